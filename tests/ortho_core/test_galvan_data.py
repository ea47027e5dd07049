"""G's problem variants (G App. B), the per-batch length jitter, G's error rules and G's
success and failure criteria in the trainer."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core.data.galvan import draw_length
from ortho_core.data.synthetic import get_task
from ortho_core.experiments.synthetic import Config, train
from ortho_core.experiments.synthetic_stage import Stage, stream_seed
from ortho_core.reporting import Outcome

N, L = 4000, 60


def sample(name: str, length: int = L, n: int = N):
    return get_task(name).sample(n, length, torch.Generator().manual_seed(5))


def markers(raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    assert (raw[:, :, 0].sum(1) == 2).all()
    pos = raw[:, :, 0].nonzero()[:, 1].view(-1, 2)
    return pos[:, 0], pos[:, 1]


@pytest.mark.parametrize("name", ["adding_galvan", "multiplication", "xor"])
def test_marker_bands_are_the_first_tenth_and_four_to_five_tenths(name):
    raw, target = sample(name)
    p0, p1 = markers(raw)
    assert set(p0.tolist()) == set(range(L // 10))
    assert set(p1.tolist()) == set(range(4 * L // 10, 5 * L // 10 + 1))
    rows = torch.arange(N)
    a, b = raw[rows, p0, 1], raw[rows, p1, 1]
    values = raw[:, :, 1]
    if name == "adding_galvan":
        assert values.min() < -0.99 and values.max() > 0.99 and values.abs().max() <= 1
        torch.testing.assert_close(target[:, 0], (a + b) / 2)
    elif name == "multiplication":
        assert values.min() >= 0 and values.max() < 1 and values.min() < 0.01
        torch.testing.assert_close(target[:, 0], a * b)
    else:
        assert set(values.unique().tolist()) == {0.0, 1.0}
        expected = torch.tensor([1.0 if int(u) != int(v) else -1.0
                                 for u, v in zip(a.tolist(), b.tolist(), strict=True)])
        assert torch.equal(target[:, 0], expected)
        assert 0.45 < (target > 0).float().mean() < 0.55


def test_temporal_order_galvan_has_g_codes_bands_and_four_classes():
    raw, target = sample("temporal_order_galvan")
    special = (raw < 2).nonzero()
    assert (torch.bincount(special[:, 0], minlength=N) == 2).all()
    pos = special[:, 1].view(-1, 2)
    assert set(pos[:, 0].tolist()) == set(range(L // 10))
    assert set(pos[:, 1].tolist()) == set(range(L // 10, L // 10 + 4 * L // 10))
    rows = torch.arange(N)
    assert torch.equal(target, raw[rows, pos[:, 0]] + 2 * raw[rows, pos[:, 1]])
    assert set(target.tolist()) == {0, 1, 2, 3}


def test_jittered_lengths_fill_t_to_just_below_1_1t():
    gen = torch.Generator().manual_seed(0)
    for seq_len in (10, 100, 105):
        lengths = {draw_length(seq_len, gen) for _ in range(600)}
        assert lengths == set(range(seq_len, seq_len + seq_len // 10))
    assert {draw_length(9, gen) for _ in range(50)} == {9}


def test_error_rules():
    """G App. B: correct when |y − t| < 0.04; G's XOR: wrong when the sign differs."""
    t = torch.zeros(4, 1)
    y = torch.tensor([[0.0399], [-0.04], [0.05], [math.nan]])[None]
    assert get_task("adding_galvan").errors(y, t, 0.04)[0].tolist() == [False, True, True,
                                                                          True]
    assert get_task("adding").errors(y, t, 0.04 ** 2)[0].tolist() == [False, False, True, True]
    xor_t = torch.tensor([[1.0], [-1.0], [1.0], [-1.0]])
    xor_y = torch.tensor([[0.2], [-3.0], [-0.1], [0.0]])[None]
    assert get_task("xor").errors(xor_y, xor_t, 0.04)[0].tolist() == [False, False, True, True]


def test_jittered_stage_draws_batches_and_validation_groups_of_own_lengths():
    cfg = Config(task="adding_galvan", seq_len=50, length_jitter=True, batch_size=30,
                 val_size=100, hidden=8)
    task = get_task(cfg.task)
    from ortho_core.experiments.synthetic import initial_weights
    weights, _ = initial_weights([cfg], task, torch.float32, torch.device("cpu"))
    stage = Stage([cfg], task, 50, weights, torch.float32, torch.device("cpu"))
    assert [len(y) for _, y in stage.val] == [30, 30, 30, 10]
    assert all(50 <= raw.shape[1] < 55 for raw, _ in stage.val)
    batches = stage.draw(40)
    assert {raw.shape[1] for raw, _, _ in batches} == set(range(50, 55))
    assert all(beta is None for _, _, beta in batches)
    gen = torch.Generator().manual_seed(stream_seed(0, 50, 0))
    first = task.sample(30, draw_length(50, gen), gen)[0]
    assert torch.equal(batches[0][0], first)


def test_g_success_is_under_one_percent_and_the_loss_plateau_fails():
    base = {"task": "adding_galvan", "seq_len": 10, "hidden": 16, "val_size": 500,
            "eval_every": 50, "max_iters": 3000, "protocol": "fixed", "lr": 0.05,
            "clip": 1.0, "error_threshold": 0.2}
    results = train([Config(**base, success="under_one_percent"), Config(**base)],
                    lambda r: None)
    g, m = results
    assert g.outcome is Outcome.SOLVED and 0 < g.summary["val_error"] < 0.01
    assert m.summary["total_iters"] > g.summary["total_iters"]
    assert m.outcome is not Outcome.SOLVED or m.summary["val_error"] == 0
    frozen = {**base, "lr": 1e-300, "patience": 100, "max_iters": 1000}
    (stuck,) = train([Config(**frozen)], lambda r: None)
    assert stuck.outcome is Outcome.UNSOLVED
    assert stuck.summary["stalled"] == 1.0 and stuck.summary["total_iters"] == 150
