"""Plain SGD and RMSProp over a pack, with per-member learning rates, gradient-norm clipping
and a mask of the members still training (DESIGN.md "Packs").

M trains with plain SGD (M §III); M's pixel-MNIST code trains with RMSProp
(:func:`rmsprop_step`); G clips the step when the gradient norm exceeds τ, which is the
rescaling g · min(1, τ/‖g‖) (G §3.4, after Pascanu et al.).

Why not ``torch.optim.SGD``: a pack holds K members in one tensor, each with its own rate α[k]
and its own "still training" flag, and no library step does that exactly. ``torch.optim.SGD``
(``foreach`` or not) takes one rate per parameter group, a float or a 1-element tensor (a (K,)
tensor raises ``ValueError: Tensor lr must be 1-element``); ``torch._foreach_add_`` takes a
scalar ``alpha`` only; ``torch._foreach_addcmul_(p, g, α, value=-1)`` does take per-member
rates but computes p − α·g with a different rounding (up to 1 ulp away from the product
rounded first, in float32 on CPU), so a member would not give bit for bit the numbers it gives
alone or in another pack; and none leaves a stopped member's weights untouched when its
gradient is NaN. :func:`sgd_step` is ``torch._foreach_mul`` then ``torch._foreach_sub_``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def clip_factors(grad_norm: Tensor, clip: float | Tensor | None) -> Tensor:
    """Per-member factors min(1, τ/‖g‖) that scale each gradient to norm at most τ.

    ``grad_norm`` is (K,) (e.g. from :func:`ortho_core.metrics.member_norm`); ``clip`` (τ) is a
    float, a tensor (K,) or None. τ = None or τ = 0 means no clipping (factor 1), per member
    when given as a tensor. A zero gradient gets factor 1; a NaN norm gives a NaN factor, so
    that a diverged member stays visibly diverged.
    """
    ones = torch.ones_like(grad_norm)
    if clip is None:
        return ones
    tau = torch.as_tensor(clip, dtype=grad_norm.dtype, device=grad_norm.device)
    return torch.where(tau > 0, torch.clamp(tau / grad_norm, max=1.0), ones)


STEP_BLOCK = 1 << 18
"""Elements of the temporaries α·g that :func:`sgd_step` keeps alive at once (1 MiB of float32),
beyond one tensor. Allocating the steps of a whole large pack at once makes glibc's allocator
return the memory to the system and fault it back in at every step; blocks of this size are
reused instead (``benchmarks/ff_throughput.py`` measures the effect)."""


def sgd_step(
    params: Sequence[Tensor],
    grads: Sequence[Tensor],
    lr: float | Tensor,
    active: Tensor,
    *,
    overwrite_grads: bool = False,
) -> None:
    """In place, p[k] := p[k] − α[k]·g[k] for every active member k; others stay bit-identical.

    ``params`` and ``grads`` are matching packed tensors (K, ...) of one dtype; ``lr`` (α) is a
    float or a tensor (K,) and may already include clipping factors; ``active`` is a bool
    tensor (K,). An active member gets exactly p − α·g, the product rounded before the
    difference (no fused multiply-add), whatever the other members do.

    The update runs as multi-tensor operations over blocks of about :data:`STEP_BLOCK` elements: the
    steps α·g (``torch._foreach_mul``), then p − step (``torch._foreach_sub_``), rather than
    selecting tensor by tensor with ``torch.where``. An inactive member's steps are overwritten
    with zeros before they are applied (a zero rate would not do: 0·NaN = NaN), so that a NaN or
    inf gradient or rate of a finished or diverged member cannot leak into its weights, and
    p − 0 leaves them bit-identical. On the CPU the inactive members are looked up in
    ``active`` first and only their steps zeroed. On a GPU reading ``active`` waits for the
    device at every step, so an update of few tensors (at most :data:`MASKED_TENSORS`, an
    SRNN's) masks every step by it instead (``masked_fill_``), with no synchronisation.

    ``overwrite_grads``: the steps are written into ``grads`` themselves (a caller that reads
    them no more after the step): the same numbers, without a temporary per tensor and with
    one pass less over memory, which a large pack's update is bound by (ff-mnist's iteration
    5-14 % faster at K = 1-12, ``benchmarks/sgd_update.py``). ``grads`` then hold the steps
    α·g, zero for the inactive members; two of them at one address (which would be scaled
    twice) raise ``ValueError`` before anything is written.
    """
    if len(params) != len(grads):
        raise ValueError(f"sgd_step: {len(params)} parameters but {len(grads)} gradients")
    if not params:
        return
    rates = _per_member(torch.as_tensor(lr, dtype=params[0].dtype, device=params[0].device),
                        params)
    if _reads_active(params[0].device, len(params)):
        stopped = None if bool(active.all()) else (~active).nonzero().flatten()
        masks = None
    else:
        stopped, masks = None, _per_member(~active, params)
    with torch.no_grad():
        if overwrite_grads:
            _refuse_shared(grads)
            torch._foreach_mul_(list(grads), rates)
            _apply_steps(params, grads, stopped, masks)
            return
        start, size = 0, 0
        for end, p in enumerate(params, start=1):
            size += p.numel()
            if size < STEP_BLOCK and end < len(params):
                continue
            _apply_steps(params[start:end],
                         torch._foreach_mul(list(grads[start:end]), rates[start:end]), stopped,
                         None if masks is None else masks[start:end])
            start, size = end, 0


MASKED_TENSORS = 8
"""On a GPU, :func:`sgd_step` masks the steps of updates of at most this many tensors rather
than wait for the device to read ``active``. Each mask is a kernel launch: on an H200 the
SRNN's 5 made its iterations 9-21 % faster from T = 50 on (and 6-10 % slower at T = 10, where
the device has little to overlap), ff-mnist's 22 made its iterations 6-8 % slower (RESULTS.md,
"sgd_step on a GPU")."""


def _reads_active(device: torch.device, tensors: int) -> bool:
    """Whether :func:`sgd_step` reads ``active`` to find the stopped members (on the CPU,
    where that costs nothing, or for many tensors) rather than masking every step."""
    return device.type == "cpu" or tensors > MASKED_TENSORS


def _refuse_shared(grads: Sequence[Tensor]) -> None:
    """Raise ``ValueError`` when two gradients start at one address (one tensor passed twice,
    or autograd's one gradient for two inputs): overwriting them would scale it twice."""
    starts = [g.data_ptr() for g in grads if g.numel()]
    if len(set(starts)) < len(starts):
        raise ValueError("sgd_step: overwrite_grads needs a tensor of its own per gradient; "
                         "two of them share their memory")


def _apply_steps(params: Sequence[Tensor], steps: Sequence[Tensor], stopped: Tensor | None,
                 masks: Sequence[Tensor] | None) -> None:
    """p := p − step for each pair, after zeroing the steps of the ``stopped`` members
    (indices) or where ``masks`` (one per step, true for a stopped member) say."""
    if stopped is not None:
        for step in steps:
            step.index_fill_(0, stopped, 0.0)
    if masks is not None:
        for step, mask in zip(steps, masks, strict=True):
            step.masked_fill_(mask, 0.0)
    torch._foreach_sub_(list(params), list(steps))


def _per_member(values: Tensor, like: Sequence[Tensor]) -> list[Tensor]:
    """``values`` (one per member, (K,), or a scalar) viewed as (K, 1, …, 1) to broadcast over
    each tensor of ``like`` (K, ...); one view per distinct rank."""
    if not values.dim():
        return [values] * len(like)
    views: dict[int, Tensor] = {}
    for t in like:
        if t.dim() not in views:
            views[t.dim()] = values.reshape((-1,) + (1,) * (t.dim() - 1))
    return [views[t.dim()] for t in like]


def rmsprop_step(
    params: Sequence[Tensor],
    grads: Sequence[Tensor],
    square_avgs: Sequence[Tensor],
    lr: float | Tensor,
    active: Tensor,
    rho: float = 0.9,
    eps: float = 1e-6,
) -> None:
    """In place, RMSProp as M's code runs it (Lasagne's ``rmsprop``), per member:
    r := ρr + (1 − ρ)g², then p := p − α·g / √(r + ε), ε inside the root.

    ``square_avgs`` are the running averages r, tensors like ``params`` (zeros at the
    start), updated in place; ``lr`` (α) is a float or a tensor (K,); ``active`` (K,) bool.
    An inactive member's weights and averages stay bit-identical, whatever its gradient
    holds (NaN included).
    """
    if not len(params) == len(grads) == len(square_avgs):
        raise ValueError(f"rmsprop_step: {len(params)} parameters, {len(grads)} gradients, "
                         f"{len(square_avgs)} averages")
    if not params:
        return
    rates = _per_member(torch.as_tensor(lr, dtype=params[0].dtype, device=params[0].device),
                        params)
    masks = _per_member(active, params)
    with torch.no_grad():
        for p, g, r, rate, mask in zip(params, grads, square_avgs, rates, masks, strict=True):
            r.copy_(torch.where(mask, rho * r + (1 - rho) * g * g, r))
            p.sub_(torch.where(mask, rate * g / torch.sqrt(r + eps), 0.0))
