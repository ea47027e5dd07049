"""Orthogonal pre-training, variant OINIT (M §II-A, eqs. 16-18).

Before supervised training, W is moved towards orthogonality by plain gradient descent on
Eᵖ = ‖WWᵀ − I‖²_F alone (eq. 16): W := W − αₚ·∂Eᵖ/∂W = W − 4αₚ(WWᵀ − I)W (eqs. 17-18), until
Eᵖ < tol. M reports that a 100 × 100 W ~ N(0, 0.1²) with αₚ = 0.1 and tol = 10⁻⁶ always
converged, in a mean number of steps that ``analysis.published.manchev.PRETRAIN`` holds (M's
count is one more than the updates :attr:`PretrainResult.steps` counts). For a non-square W the
rows or the columns, whichever are fewer, are made orthonormal (:mod:`ortho_core.penalty`).

Precision: the descent runs in float64 whatever the input dtype, and the result is cast back.
Step counts therefore match M's (numpy, float64) protocol and do not depend on the precision
a model trains in; a float32 model pre-trained this way gets exactly the float64 result,
rounded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ortho_core.errors import PretrainError
from ortho_core.penalty import gram_residual, ortho_grad_from_residual


@dataclass
class PretrainResult:
    """The outcome of :func:`orthogonal_pretrain` for every member (leading dims of W)."""

    weights: Tensor
    """The pre-trained matrices, same shape, dtype and device as the input."""
    steps: Tensor
    """Updates (eq. 17) applied to each member (int64): the step at which Eᵖ < tol was first
    observed, or the steps taken before giving up."""
    error: Tensor
    """Each member's last Eᵖ (float64): below tol when converged."""
    converged: Tensor
    """Whether each member reached Eᵖ < tol (bool)."""


def orthogonal_pretrain(
    w: Tensor,
    lr: float | Tensor,
    tol: float | Tensor = 1e-6,
    max_steps: int | Tensor = 10_000,
) -> PretrainResult:
    """Minimise Eᵖ(W) by gradient descent, each matrix of ``w`` (..., m, n) independently.

    ``lr`` (αₚ), ``tol`` and ``max_steps`` are scalars or tensors of shape (...), one value
    per member. Eᵖ is checked before every update and once after the last; a member stops
    updating as soon as Eᵖ < tol, so ``steps`` counts the updates that were needed and an
    already orthogonal W takes 0 steps. A member whose Eᵖ becomes inf or NaN (αₚ too large)
    can never converge and also stops, as does one that has taken its ``max_steps`` updates.
    A stopped member leaves the batch, so each step costs only the members still descending
    (M's 10,000 repeats take their mean number of steps, not the slowest one's). The loop
    ends when every member has stopped; failure is reported in ``converged``, not raised
    (see :func:`require_converged`).
    """
    batch, (m, n) = w.shape[:-2], w.shape[-2:]
    x = w.detach().to(torch.float64).reshape(-1, m, n).clone()
    count = x.shape[0]

    def per_member(value: float | Tensor, dtype: torch.dtype) -> Tensor:
        return torch.as_tensor(value, dtype=dtype, device=x.device).expand(batch).reshape(count)

    limit = per_member(max_steps, torch.long)
    if bool((limit < 0).any()):
        raise ValueError(f"orthogonal_pretrain: max_steps must be >= 0, got {max_steps}")
    rate, bound = per_member(lr, torch.float64), per_member(tol, torch.float64)
    steps = torch.zeros(count, dtype=torch.long, device=x.device)
    error = torch.zeros(count, dtype=torch.float64, device=x.device)
    live, current = torch.arange(count, device=x.device), x
    while live.numel():
        residual = gram_residual(current)
        last = residual.square().sum(dim=(-2, -1))
        going = (last >= bound[live]) & torch.isfinite(last) & (steps[live] < limit[live])
        if not bool(going.all()):
            stopping = live[~going]
            x[stopping], error[stopping] = current[~going], last[~going]
            live, current, residual = live[going], current[going], residual[going]
        current = current - ortho_grad_from_residual(current, residual, rate[live])
        steps[live] += 1
    return PretrainResult(weights=x.reshape(w.shape).to(w.dtype), steps=steps.reshape(batch),
                          error=error.reshape(batch), converged=(error < bound).reshape(batch))


def require_converged(result: PretrainResult, field: str = "pretrain_tol",
                      members: Sequence[int] | None = None) -> None:
    """Raise :class:`~ortho_core.errors.PretrainError` if any member failed to converge.

    ``members`` gives the pack index of each matrix of ``result`` (leading dimension; default
    0, 1, ...), for a trainer that pre-trains only some members of its pack. The message names
    ``field`` (the configuration key a user would change) and, for each failed member, its
    pack index, the steps taken and its final Eᵖ; the error's ``members`` are those indices,
    so that the pack's isolation fails them alone (:mod:`ortho_core.experiments.isolation`).
    """
    if bool(result.converged.all()):
        return
    where = (~result.converged).nonzero().tolist()
    named = [i if members is None or not i else [members[i[0]], *i[1:]] for i in where]
    details = ", ".join(
        f"{_member(name)}: {int(result.steps[tuple(i)])} steps, "
        f"Eᵖ = {float(result.error[tuple(i)]):.3g}"
        for name, i in zip(named, where, strict=True)
    )
    raise PretrainError(
        f"{field}: orthogonal pre-training did not reach Eᵖ < tol ({details}); "
        "lower pretrain_lr, raise the step limit or loosen pretrain_tol",
        tuple(sorted({name[0] for name in named if name})),
    )

def _member(index: list[int]) -> str:
    """How a member at ``index`` (of the leading dims) is named in messages."""
    if not index:
        return "the matrix"
    return f"member {index[0] if len(index) == 1 else tuple(index)}"
