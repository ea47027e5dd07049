"""Subnormal modes (:mod:`ortho_core.subnormals`): the calling thread, the member-block threads,
PyTorch's intra-op pool, every trainer's ``subnormals`` field, and training that follows the
same path in both modes."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
import torch

from ortho_core import experiments
from ortho_core.experiments import lcw_mlp
from ortho_core.models.srnn_kernels import in_member_blocks
from ortho_core.reporting import Report
from ortho_core.subnormals import SUBNORMAL_MODES, current_mode, pool_flushes, subnormal_mode

SUBNORMAL = torch.tensor([1 << 20], dtype=torch.int32).view(torch.float32)
"""2⁻¹²⁹, a float32 subnormal, written by its bits (no float conversion to flush)."""
TRAINERS = [name for name in experiments.EXPERIMENTS
            if any(f.name == "subnormals"
                   for f in dataclasses.fields(experiments.get(name).Config))]


def flushed() -> bool:
    """Whether this thread flushes: a subnormal times 1.5 is 0 only then."""
    return bool((SUBNORMAL * 1.5 == 0).all())


@pytest.fixture
def two_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_flush_zeroes_subnormal_arithmetic_for_the_block_only() -> None:
    assert current_mode() == "keep" and not flushed()
    assert float(SUBNORMAL * 1.5) == pytest.approx(1.5 * 2.0 ** -129, rel=1e-6)
    with subnormal_mode("flush"):
        assert current_mode() == "flush" and flushed()
        with subnormal_mode("keep"):
            assert not flushed()
        assert flushed()
    assert current_mode() == "keep" and not flushed()


def test_member_block_threads_take_the_callers_mode(two_threads: None) -> None:
    seen: dict[int, bool] = {}

    def probe(block: slice) -> None:
        seen[block.start] = flushed()

    for mode in ("flush", "keep", "flush"):  # the pool's threads outlive each call
        seen.clear()
        with subnormal_mode(mode):
            in_member_blocks(probe, 4, torch.device("cpu"))
        assert seen == {0: mode == "flush", 2: mode == "flush"}


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120, check=True)


def test_intra_op_pool_started_inside_follows_the_mode() -> None:
    out = run_python("""
        import torch
        from ortho_core.subnormals import pool_flushes, subnormal_mode
        torch.set_num_threads(2)
        with subnormal_mode("flush"):
            print(pool_flushes())
        print(pool_flushes())
    """)
    # Inside, every thread flushes; after, the calling thread keeps and the pool still flushes.
    assert out.stdout.split() == ["True", "None"]
    assert "warning" not in out.stderr.lower()


def test_intra_op_pool_started_before_is_reported() -> None:
    out = run_python("""
        import torch
        from ortho_core.subnormals import pool_flushes, subnormal_mode
        torch.set_num_threads(2)
        print(pool_flushes())
        with subnormal_mode("flush"):
            print(pool_flushes())
    """)
    assert out.stdout.split() == ["False", "None"]
    assert "intra-op threads started earlier" in out.stderr


def test_pool_probe_in_this_process_agrees_with_one_thread() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with subnormal_mode("flush"):
            assert pool_flushes() is True
        assert pool_flushes() is False
    finally:
        torch.set_num_threads(before)


class Stop(Exception):
    """Raised from inside a trainer once its mode is seen."""


@pytest.mark.parametrize("name", TRAINERS)
@pytest.mark.parametrize("mode", SUBNORMAL_MODES)
def test_every_trainer_runs_in_its_packs_mode(name: str, mode: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    module = experiments.get(name)
    seen = []

    def resolve_device(device: str) -> torch.device:
        seen.append((current_mode(), flushed()))
        raise Stop

    monkeypatch.setattr(module, "resolve_device", resolve_device)
    with pytest.raises(Stop):
        module.train([module.Config(subnormals=mode)], lambda report: None)
    assert seen == [(mode, mode == "flush")]
    assert current_mode() == "keep"


def test_subnormals_is_a_pack_field_validated_at_the_edge() -> None:
    with pytest.raises(ValueError, match="subnormals"):
        lcw_mlp.Config(subnormals="fast")  # type: ignore[arg-type]
    assert all("subnormals" in experiments.get(name).PACK_FIELDS for name in TRAINERS)
    assert len(TRAINERS) >= 8


def test_deep_sigmoid_net_trains_the_same_in_both_modes() -> None:
    """80 sigmoid layers of 16: on its way to zero the gradient passes through the subnormal
    range at initialisation (checked), yet both modes give the same losses and accuracies,
    epoch by epoch."""
    config = lcw_mlp.Config(variant="plain", layers=80, hidden=16, epochs=2, batch_size=20,
                            train_size=200, test_size=100, diagnostics=False,
                            data_dir=os.environ.get("ORTHO_DATA_DIR"))
    model = lcw_mlp.build_model([config], torch.rand(20, 784), torch.device("cpu"))
    loss = model(torch.rand(20, 784)).square().sum()
    grads = torch.autograd.grad(loss, [layer.weight for layer in model.layers])
    tiny = torch.finfo(torch.float32).tiny
    assert sum(int(((g != 0) & (g.abs() < tiny)).sum()) for g in grads) > 100

    def train(mode: str) -> tuple[list[dict[str, float]], dict[str, float]]:
        reports: list[Report] = []
        result = lcw_mlp.train([dataclasses.replace(config, subnormals=mode)], reports.append)[0]
        def numbers(metrics: dict[str, float]) -> dict[str, float]:
            return {k: v for k, v in metrics.items() if "time" not in k and "second" not in k}

        return [numbers(r.metrics) for r in reports], numbers(result.summary)

    assert train("flush") == train("keep")
