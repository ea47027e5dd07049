"""The synthetic problems of M §III-A: shapes, marker bands, class balance, targets
recomputed from the inputs, reproducibility, losses and error counts."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core.data.synthetic import DEFAULT_ERROR_THRESHOLD, TASKS, Task, get_task
from ortho_core.errors import ConfigError

N = 4000


def generate(task: Task, batch: int, length: int,
             generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Network inputs ``(B, L, n_in)`` of float32 and targets of ``batch`` sequences, as the
    trainers build them from :meth:`Task.sample` and :meth:`Task.encode`."""
    raw, target = task.sample(batch, length, generator)
    return task.encode(raw), target


def draw(name: str, length: int, n: int = N, seed: int = 0):
    return generate(get_task(name), n, length, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("name", "n_in", "n_out", "loss"), [
    ("temporal_order", 6, 4, "ce"), ("temporal_order_3bit", 6, 8, "ce"),
    ("adding", 2, 1, "mse"), ("permutation", 100, 100, "ce")])
def test_registry_sizes(name, n_in, n_out, loss):
    task = get_task(name)
    assert (task.n_in, task.n_out, task.loss) == (n_in, n_out, loss)
    x, y = draw(name, 30, n=7)
    assert x.shape == (7, 30, n_in) and x.dtype == torch.float32
    assert y.shape == ((7, 1) if loss == "mse" else (7,))
    assert y.dtype == (torch.float32 if loss == "mse" else torch.long)


def _markers(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions (B, m) and values (B, m) of the binary symbols 0/1 of a one-hot batch."""
    symbols = x.argmax(-1)
    is_marker = symbols < 2
    counts = is_marker.sum(1)
    m = int(counts[0])
    assert (counts == m).all()
    pos = is_marker.nonzero()[:, 1].view(-1, m)
    return pos, symbols.gather(1, pos)


@pytest.mark.parametrize("length", [10, 57, 200])
def test_temporal_order_bands_and_targets(length):
    x, y = draw("temporal_order", length)
    assert (x.sum(-1) == 1).all()
    pos, val = _markers(x)
    w = length // 10
    assert pos.shape[1] == 2
    assert ((pos[:, 0] >= w) & (pos[:, 0] < 2 * w)).all()
    assert ((pos[:, 1] >= length // 2) & (pos[:, 1] < length // 2 + w)).all()
    if w > 1:  # every position of each band occurs
        assert pos[:, 0].unique().numel() == w and pos[:, 1].unique().numel() == w
    assert torch.equal(y, val[:, 0] + 2 * val[:, 1])
    counts = torch.bincount(y, minlength=4).double() / N
    assert (counts - 0.25).abs().max() < 0.03
    noise = x.argmax(-1)[x.argmax(-1) >= 2]
    shares = torch.bincount(noise, minlength=6)[2:].double() / noise.numel()
    assert (shares - 0.25).abs().max() < 0.01


@pytest.mark.parametrize("length", [10, 83])
def test_temporal_order_3bit_bands_and_targets(length):
    x, y = draw("temporal_order_3bit", length)
    pos, val = _markers(x)
    w = length // 10
    for i, start in enumerate((length // 10, 3 * length // 10, 6 * length // 10)):
        assert ((pos[:, i] >= start) & (pos[:, i] < start + w)).all()
    assert torch.equal(y, val[:, 0] + 2 * val[:, 1] + 4 * val[:, 2])
    counts = torch.bincount(y, minlength=8).double() / N
    assert (counts - 0.125).abs().max() < 0.025


@pytest.mark.parametrize("length", [10, 64, 150])
def test_adding_bands_and_targets(length):
    x, y = draw("adding", length)
    marks = x[:, :, 0]
    assert ((marks == 0) | (marks == 1)).all() and (marks.sum(1) == 2).all()
    pos = marks.nonzero()[:, 1].view(-1, 2)
    w = length // 10
    assert (pos[:, 0] < w).all()
    assert ((pos[:, 1] >= w) & (pos[:, 1] < w + 4 * length // 10)).all()
    values = x[:, :, 1]
    assert (values >= 0).all() and (values < 1).all()
    assert abs(values.mean().item() - 0.5) < 0.01
    expected = (values.gather(1, pos).sum(1) / 2).unsqueeze(1)
    torch.testing.assert_close(y, expected)
    assert abs(y.mean().item() - 0.5) < 0.02


@pytest.mark.parametrize("length", [10, 240])
def test_permutation_first_symbol_is_the_target(length):
    x, y = draw("permutation", length, n=2000)
    symbols = x.argmax(-1)
    assert (x.sum(-1) == 1).all()
    assert torch.equal(symbols[:, 0], y)
    assert (symbols[:, 1:] >= 2).all()
    assert abs(y.double().mean().item() - 0.5) < 0.05
    assert symbols[:, 1:].unique().numel() == 98


@pytest.mark.parametrize("name", list(TASKS))
def test_short_sequences_keep_markers_apart(name):
    task = get_task(name)
    for length in range(task.min_len, 12):
        x, y = draw(name, length, n=500)
        if task.loss == "mse":
            assert (x[:, :, 0].sum(1) == 2).all()
        elif name == "permutation":
            assert torch.equal(x.argmax(-1)[:, 0], y)
        else:
            pos, _ = _markers(x)  # asserts every sample holds all its markers
            assert pos.shape[1] == (3 if name == "temporal_order_3bit" else 2)


@pytest.mark.parametrize("name", list(TASKS))
def test_a_seeded_stream_repeats_and_seeds_differ(name):
    task = get_task(name)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    for _ in range(3):
        a, b = generate(task, 16, 20, g1), generate(task, 16, 20, g2)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = generate(task, 16, 20, torch.Generator().manual_seed(6))
    assert not torch.equal(a[0], c[0])


def test_encode_is_one_hot_in_its_dtype():
    task = get_task("temporal_order")
    raw, _ = task.sample(8, 15, torch.Generator().manual_seed(1))
    x = task.encode(raw, torch.float64)
    assert x.shape == (8, 15, task.n_in) and x.dtype == torch.float64
    assert torch.equal(x.argmax(-1), raw)
    assert torch.equal(x.sum(-1), torch.ones(8, 15, dtype=torch.float64))


def test_cross_entropy_and_errors_against_closed_forms():
    task = get_task("temporal_order")
    out = torch.tensor([[[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
                        [[0.0, 5.0, 0.0, 0.0], [float("nan"), 0.0, 0.0, 0.0]]])
    y = torch.tensor([0, 3])
    loss = task.losses(out, y)
    z = math.log(math.exp(2) + 3)
    expected0 = ((z - 2) + math.log(4)) / 2
    assert loss.shape == (2,)
    assert loss[0].item() == pytest.approx(expected0, rel=1e-6)
    assert torch.equal(task.errors(out, y), torch.tensor([[False, True], [True, True]]))


def test_adding_loss_and_threshold():
    task = get_task("adding")
    out = torch.tensor([[[0.5], [0.9], [0.0]]])
    t = torch.tensor([[0.6], [0.6], [0.0]])
    assert task.losses(out, t).item() == pytest.approx((0.01 + 0.09) / 3, rel=1e-5)
    assert task.errors(out, t).tolist() == [[False, True, False]]
    assert DEFAULT_ERROR_THRESHOLD == 0.04
    assert task.errors(out, t, error_threshold=1e-8).tolist() == [[True, True, False]]
    assert task.errors(torch.full_like(out, float("inf")), t).all()


def test_bad_inputs_name_the_field():
    with pytest.raises(ConfigError) as err:
        get_task("parity")
    assert err.value.field == "task"
    for name in TASKS:
        with pytest.raises(ConfigError) as err:
            draw(name, 1, n=2)
        assert err.value.field == "seq_len"
    with pytest.raises(ConfigError) as err:
        draw("temporal_order_3bit", 3, n=2)
    assert err.value.field == "seq_len"
    with pytest.raises(ConfigError) as err:
        draw("adding", 10, n=0)
    assert err.value.field == "batch_size"
