"""Experiment ``temporal-gradients``: the norm of every time step's temporal gradient of an SRNN
at initialisation (G §3.2, Fig. 3.1).

Run with ``ortho train temporal-gradients --set spectral_radius=0.8,1.2``. G draws W_rec,
W_in, W_out from N(0, σ²) and rescales W_rec to spectral radius ρ (G Alg. 3.1, here
:func:`~ortho_core.models.srnn.init_srnn`, the initialisation of the synthetic trainer), then
plots, for ρ ∈ {0.8, 0.9, 1, 1.1, 1.2}, "the temporal gradients, w.r.t. all the variables of
the model, … computed on a hundred samples for the temporal order task" on a log axis:

- the temporal gradient at step t is ∇_θ L|_t of G eqs. 3.1-3.3 (θ: W_xh, W_hh, b_h, W_hy,
  b_y stacked; the readout's part sits at the last step only), of the loss L averaged over
  one batch of ``samples`` sequences of length T (the gradient of the mean loss, not a mean
  of per-sample norms), from one hand-written BPTT pass (:mod:`ortho_core.temporal`);
- its Euclidean norm ‖∇_θ L|_t‖ is reported per step t = 1 … T.

How flat a profile is, the summary ``log10_ratio``, compares the first and the last step over
the recurrent variables W_xh, W_hh, b_h only (:data:`RECURRENT`), whose replicates span all T
steps. The readout's gradient sits at the last step alone: it is no temporal component
carried back through time, yet at T = 100 and ρ = 1.1 it is about two thirds of the last
step's squared norm (57-75 % over 20 seeds), so a ratio over all of θ would read a flat
profile of the recurrent variables as decaying because of that one step.

ρ < 1 is G's "perfect example of vanishing gradient" (recent steps exponentially larger than
distant ones); for ρ > 1 "the temporal components have roughly the same norm".

There is no training: a member is its initial network (``seed``), and a pack shares the batch
(``data_seed``), so a member gives the numbers it gives alone. Where G is silent: T (G does
not state it; ``seq_len``), σ (G's code: 0.1) and the problem variant (default G's temporal
order, ``temporal_order_galvan``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from ortho_core.config import check_pack, integer_at_least, one_of, positive, seed_value
from ortho_core.data.synthetic import get_task
from ortho_core.devices import DTYPES, check_runtime, resolve_device
from ortho_core.experiments.synthetic_stage import TRAIN_STREAM, stream_seed
from ortho_core.metrics import member_norm, spectral_radius
from ortho_core.models.srnn import SRNNInit, init_srnn
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import Subnormals, honours_subnormals
from ortho_core.temporal import PARAMETERS, temporal_sq_norms

METRICS: dict[str, str] = {
    "temporal_grad_norm": "‖∇_θ L|_t‖ over all parameters at time step t (G Fig. 3.1)",
    "temporal_grad_norm_whh": "‖∇_{W_hh} L|_t‖ (G eq. 3.1; 0 at t = 1, since h_0 = 0)",
}
"""The metrics reported at every time step t (the report's ``step``), with their meaning
(what a spec's ``scheduler.metric_step`` may name)."""
RECURRENT = ("w_xh", "w_hh", "b_h")
"""The variables whose temporal components ``log10_ratio`` compares: those replicated at
every step (the readout W_hy, b_y has a component at the last step only)."""


@dataclass
class Config:
    """One configuration of the temporal-gradient experiment (G §3.2, Fig. 3.1)."""

    task: str = "temporal_order_galvan"
    """The synthetic problem the batch is drawn from (:mod:`ortho_core.data.synthetic`;
    G Fig. 3.1: temporal order)."""
    seq_len: int = 100
    """T: the length of every sequence of the batch (G does not state it)."""
    samples: int = 100
    """Sequences in the one batch whose mean loss is differentiated (G: a hundred)."""
    hidden: int = 50
    """Hidden units (G §4.1: 50)."""
    init: Literal["normalised", "gaussian"] = "gaussian"
    """Initial weights: ``gaussian`` N(0, σ²) for W_xh, W_hh, W_hy (G Alg. 3.1) or
    ``normalised`` (Glorot uniform, M)."""
    init_std: float = 0.1
    """σ of the ``gaussian`` initialisation (G's code: 0.1)."""
    spectral_radius: float | None = None
    """ρ: rescale the initial W_hh to this spectral radius (G Alg. 3.1); None: no rescaling
    (the plain Gaussian)."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the batch the pack shares."""
    device: str = "cpu"
    """Where to compute: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""
    subnormals: Subnormals = "keep"
    """CPU arithmetic on subnormal numbers (below 1.2e-38 in float32): ``keep`` (the default
    here, where the gradient norms are the result) computes them as IEEE 754 does; ``flush``
    reads and writes them as 0 (:mod:`ortho_core.subnormals`). No effect on a GPU."""
    dtype: Literal["float32", "float64"] = "float64"
    """Precision (float64: distant steps' norms of ρ < 1 fall below 10⁻¹⁵ at T = 150)."""

    def __post_init__(self) -> None:
        get_task(self.task).check_length(self.seq_len)
        integer_at_least(self.samples, "samples", 1)
        integer_at_least(self.hidden, "hidden", 1)
        one_of(self.init, ("normalised", "gaussian"), "init")
        positive(self.init_std, "init_std")
        if self.spectral_radius is not None:
            positive(self.spectral_radius, "spectral_radius")
        seed_value(self.seed, "seed")
        seed_value(self.data_seed, "data_seed")
        check_runtime(self.device, self.subnormals)
        one_of(self.dtype, tuple(DTYPES), "dtype")


PACK_FIELDS: tuple[str, ...] = ("task", "seq_len", "samples", "hidden", "data_seed", "device",
                                "dtype", "subnormals")
"""Fields equal across a pack; the initialisation (scheme, σ, ρ) and the seed may differ."""


def planned_steps(config: Config) -> int:
    """The ``step`` of a member's last report: ``seq_len``. There is no training; a member is
    reported once per time step t = 1 … T with ``step`` = t, all after the one BPTT pass, and
    nothing ends it early."""
    return config.seq_len


SUMMARY: dict[str, str] = {
    "first_norm": "temporal-gradient norm over all of θ at the first time step",
    "last_norm": "temporal-gradient norm over all of θ at the last time step",
    "grad_norm": "norm of the loss's gradient over all of θ (the sum over t, G eq. 3.2)",
    "loss": "the loss at initialisation",
    "initial_spectral_radius": "spectral radius of the initial W_hh",
    "wall_time": "seconds the pack ran",
    "log10_ratio": "log10 of the first step's over the last step's temporal-gradient norm over "
                   "W_xh, W_hh, b_h (when both are finite and the last is > 0)",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Compute every member's temporal-gradient norms at initialisation.

    Each member is reported once per time step t = 1 … T (``step`` = t) with the metrics of
    :data:`METRICS`. Summary: ``log10_ratio`` = log10(‖∇_r L|_1‖ / ‖∇_r L|_T‖) over
    the recurrent variables r = (W_xh, W_hh, b_h) (:data:`RECURRENT`; the earliest against
    the latest step: about 0 for a flat profile, strongly negative when the gradient
    vanishes; a first norm of 0 counts as the dtype's smallest normal number),
    ``first_norm``, ``last_norm`` (over all of θ, as plotted), ``grad_norm`` (‖∇_θ L‖, the
    norm of the sum over t, G eq. 3.2), ``loss``, ``initial_spectral_radius`` (ρ(W_hh) as
    drawn, the check of Alg. 3.1) and ``wall_time``. Outcome: ``solved`` when every norm is
    finite, else ``diverged``.
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    task = get_task(cfg.task)
    device = resolve_device(cfg.device)
    dtype = DTYPES[cfg.dtype]
    inits = [SRNNInit(c.seed, c.init, c.init_std, c.spectral_radius) for c in configs]
    model = init_srnn(task.n_in, cfg.hidden, task.n_out, inits, dtype=dtype, device=device)
    generator = torch.Generator().manual_seed(stream_seed(cfg.data_seed, cfg.seq_len,
                                                          TRAIN_STREAM))
    raw, y = task.sample(cfg.samples, cfg.seq_len, generator)
    x = task.encode(raw.to(device), dtype)
    y = y.to(device)
    target = y.to(dtype) if task.loss == "mse" else y
    trace = model.bptt(x, lambda out: task.losses(out, target))
    squares = temporal_sq_norms(trace)
    norms = squares.sum(-1).sqrt().cpu()
    norms_whh = squares[..., PARAMETERS.index("w_hh")].sqrt().cpu()
    recurrent = squares[..., [PARAMETERS.index(name) for name in RECURRENT]].sum(-1).sqrt().cpu()
    grad_norm = member_norm(trace.grads).cpu()
    radius = spectral_radius(model.w_hh).cpu()
    losses = trace.losses.cpu()
    tiny = torch.finfo(dtype).tiny
    wall = time.monotonic() - started
    results = []
    for k in range(len(configs)):
        for t in range(cfg.seq_len):
            reporter(Report(member=k, step=t + 1, metrics={
                "temporal_grad_norm": float(norms[k, t]),
                "temporal_grad_norm_whh": float(norms_whh[k, t])}))
        first, last = float(recurrent[k, 0]), float(recurrent[k, -1])
        finite = bool(torch.isfinite(norms[k]).all()) and math.isfinite(float(losses[k]))
        summary = {"first_norm": float(norms[k, 0]), "last_norm": float(norms[k, -1]),
                   "grad_norm": float(grad_norm[k]), "loss": float(losses[k]),
                   "initial_spectral_radius": float(radius[k]), "wall_time": wall}
        if finite and last > 0:
            summary["log10_ratio"] = math.log10(max(first, tiny) / last)
        results.append(Result(Outcome.SOLVED if finite else Outcome.DIVERGED, summary))
    return results
