"""Experiment ``temporal-gradients`` (G Fig. 3.1): the reported norm of every time step's
temporal gradient, checked in float64 against G's definition computed by autograd on an
unrolled SRNN whose weights are replicated per step; packs; bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ortho_core.config import field_docs
from ortho_core.data.synthetic import get_task
from ortho_core.experiments import get
from ortho_core.experiments.synthetic_stage import TRAIN_STREAM, stream_seed
from ortho_core.experiments.temporal_gradients import METRICS, PACK_FIELDS, Config, train
from ortho_core.models.srnn import SRNNInit, init_srnn
from ortho_core.reporting import Outcome
from sweeps.cli import main

SMALL = {"task": "temporal_order_galvan", "seq_len": 7, "samples": 5, "hidden": 6,
         "init_std": 0.3}


def run(configs):
    reports: dict[int, list] = {}
    results = train(configs, lambda r: reports.setdefault(r.member, []).append(r))
    return results, reports


def autograd_norms(cfg: Config) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Per-step norms ‖∇_θ L|_t‖, ‖∇_{W_hh} L|_t‖ and ‖∇_{W_xh, W_hh, b_h} L|_t‖ by G's
    definition (the gradient w.r.t. the t-th replicate of each variable, the readout's
    replicates at every step), the full gradient's norm and the loss: all by autograd in
    float64."""
    task = get_task(cfg.task)
    model = init_srnn(task.n_in, cfg.hidden, task.n_out,
                      [SRNNInit(cfg.seed, cfg.init, cfg.init_std, cfg.spectral_radius)],
                      dtype=torch.float64)
    gen = torch.Generator().manual_seed(stream_seed(cfg.data_seed, cfg.seq_len, TRAIN_STREAM))
    raw, y = task.sample(cfg.samples, cfg.seq_len, gen)
    x = task.encode(raw, torch.float64)
    steps = cfg.seq_len
    reps = [[p.detach()[0].clone().requires_grad_() for _ in range(steps)]
            for p in model.parameters()]
    h = torch.zeros(cfg.samples, cfg.hidden, dtype=torch.float64)
    outputs = []
    for t in range(steps):
        h = torch.tanh(x[:, t] @ reps[0][t].T + h @ reps[1][t].T + reps[2][t])
        outputs.append(h @ reps[3][t].T + reps[4][t])
    loss = task.losses(outputs[-1][None], y)[0]
    grads = torch.autograd.grad(loss, [r for rep in reps for r in rep], allow_unused=True)

    def sq(g: torch.Tensor | None) -> float:
        return 0.0 if g is None else float(g.square().sum())

    per_param = np.array([[sq(grads[j * steps + t]) for t in range(steps)] for j in range(5)])
    full = [sum(g for g in grads[j * steps:(j + 1) * steps] if g is not None)
            for j in range(5)]
    grad_norm = math.sqrt(sum(float(g.square().sum()) for g in full))
    return (np.sqrt(per_param.sum(0)), np.sqrt(per_param[1]), np.sqrt(per_param[:3].sum(0)),
            grad_norm, float(loss.detach()))


def test_registered_and_every_field_documented():
    assert get("temporal-gradients").train is train
    docs = field_docs(Config)
    assert set(docs) == set(Config.__dataclass_fields__)
    assert set(PACK_FIELDS) <= set(docs)
    for free in ("spectral_radius", "seed", "init", "init_std"):
        assert free not in PACK_FIELDS


@pytest.mark.parametrize("rho", [None, 0.8, 1.2])
def test_each_step_reports_the_norm_of_g_s_temporal_gradient(rho):
    cfg = Config(**SMALL, spectral_radius=rho, seed=3)
    (result,), reports = run([cfg])
    got = np.array([[r.metrics[m] for m in METRICS] for r in reports[0]])
    assert [r.step for r in reports[0]] == list(range(1, cfg.seq_len + 1))
    total, whh, recurrent, grad_norm, loss = autograd_norms(cfg)
    np.testing.assert_allclose(got[:, 0], total, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(got[:, 1], whh, rtol=1e-10, atol=1e-15)
    assert got[0, 1] == 0.0, "h_0 = 0: no W_hh term at the first step"
    s = result.summary
    assert result.outcome == Outcome.SOLVED
    assert s["log10_ratio"] == pytest.approx(math.log10(recurrent[0] / recurrent[-1]),
                                             rel=1e-10)
    assert recurrent[-1] < total[-1] and recurrent[0] == pytest.approx(total[0], rel=1e-12), \
        "the readout's temporal gradient sits at the last step only"
    assert (s["first_norm"], s["last_norm"]) == pytest.approx((total[0], total[-1]), rel=1e-10)
    assert s["grad_norm"] == pytest.approx(grad_norm, rel=1e-10)
    assert s["loss"] == pytest.approx(loss, rel=1e-12)
    if rho is not None:
        assert s["initial_spectral_radius"] == pytest.approx(rho, rel=1e-9)


def test_distant_steps_vanish_below_rho_one_and_not_above():
    configs = [Config(**{**SMALL, "seq_len": 60, "hidden": 30, "init_std": 0.1},
                      spectral_radius=rho) for rho in (0.8, 1.2)]
    results, _ = run(configs)
    low, high = (r.summary["log10_ratio"] for r in results)
    assert low < -4 and high > low + 3


def test_a_pack_member_gives_the_numbers_it_gives_alone():
    configs = [Config(**SMALL, spectral_radius=rho, seed=seed, init=init)
               for rho, seed, init in ((0.9, 0, "gaussian"), (1.1, 1, "gaussian"),
                                       (None, 2, "normalised"))]
    results, reports = run(configs)
    for k, cfg in enumerate(configs):
        (alone,), alone_reports = run([cfg])
        for a, b in zip(reports[k], alone_reports[0], strict=True):
            assert a.step == b.step
            for m in METRICS:
                assert a.metrics[m] == pytest.approx(b.metrics[m], rel=1e-12, abs=1e-300)
        for key in ("log10_ratio", "grad_norm", "loss"):
            assert results[k].summary[key] == pytest.approx(alone.summary[key], rel=1e-12)
    assert len({r.summary["loss"] for r in results}) == 3


def test_a_pack_must_share_its_shape():
    with pytest.raises(ValueError, match="seq_len"):
        train([Config(**SMALL), Config(**{**SMALL, "seq_len": 8})], lambda r: None)


@pytest.mark.parametrize(("setting", "field"), [
    ("samples=0", "samples"), ("spectral_radius=-1", "spectral_radius"),
    ("task=nope", "task"), ("dtype=float16", "dtype"), ("init_std=0", "init_std"),
])
def test_bad_input_exits_2_naming_the_field(setting, field, capsys):
    assert main(["train", "temporal-gradients", "--set", setting]) == 2
    assert field in capsys.readouterr().err
