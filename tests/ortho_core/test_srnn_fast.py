"""The fast recurrent path of the packed SRNN (member blocks in parallel threads, fused steps,
the time loops in Python and in C++, CUDA graphs) against a plain per-member autograd loop."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F

from ortho_core.models import PackedSRNN, SRNNInit, init_srnn, srnn, srnn_native
from ortho_core.models.srnn_cuda_graph import (
    GraphedLoops,
    graph_bytes,
    graph_key,
    graphs_apply,
)
from ortho_core.models.srnn_kernels import in_member_blocks, member_blocks, step_weights
from ortho_core.optim import sgd_step

N_IN, N_HIDDEN, N_OUT, BATCH, K = 2, 8, 3, 4, 5
TOLERANCE = {torch.float64: {"rtol": 1e-12, "atol": 1e-13},
             torch.float32: {"rtol": 1e-4, "atol": 1e-5}}


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run with one intra-op thread (whole pack in one block) and with two (two blocks in
    parallel threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.fixture(params=["python", "cpp"])
def loops(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run on the Python time loops and on the C++ ones (:mod:`srnn_native`), which are
    skipped only where no C++ compiler or no ninja is found."""
    if request.param == "python":
        with srnn_native.python_loops():
            yield request.param
        return
    if not srnn_native.build():
        if shutil.which(os.environ.get("CXX", "c++")) and shutil.which("ninja"):
            pytest.fail("the C++ time loops did not build although a compiler and ninja exist")
        pytest.skip("no C++ compiler or no ninja")
    assert srnn_native.applies(torch.empty(0))
    yield request.param


def pack(dtype: torch.dtype, n_hidden: int = N_HIDDEN, k: int = K,
         n_in: int = N_IN) -> PackedSRNN:
    inits = [SRNNInit(seed=s, scheme="gaussian", init_std=0.4) for s in range(k)]
    model = init_srnn(n_in, n_hidden, N_OUT, inits, dtype=dtype)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        model.b_h.copy_(torch.randn(model.b_h.shape, generator=g, dtype=dtype) * 0.3)
        model.b_y.copy_(torch.randn(model.b_y.shape, generator=g, dtype=dtype) * 0.3)
    return model


def data(steps: int, dtype: torch.dtype, seed: int = 0,
         n_in: int = N_IN) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, steps, n_in, generator=g, dtype=dtype)
    return x, torch.randint(N_OUT, (BATCH,), generator=g)


def pack_loss(model: PackedSRNN, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = model(x)
    k = out.shape[0]
    return F.cross_entropy(out.reshape(-1, N_OUT), y.repeat(k), reduction="sum") / BATCH


def reference_out(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """One member by the straightforward loop: tanh(x_t W_xhᵀ + h W_hhᵀ + b_h) under autograd."""
    w_xh, w_hh, b_h, w_hy, b_y = weights
    h = x.new_zeros(BATCH, w_hh.shape[0])
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ w_xh.T + h @ w_hh.T + b_h)
    return h @ w_hy.T + b_y


def member(model: PackedSRNN, k: int) -> list[torch.Tensor]:
    return [p.detach()[k].clone().requires_grad_() for p in model.parameters()]


@pytest.mark.parametrize(("n_in", "steps"), [(2, 30), (1, 30), (1, 1)],
                         ids=["inputs", "pixels", "one-step"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_outputs_and_gradients_equal_reference_loop(dtype: torch.dtype, n_in: int, steps: int,
                                                    threads: int, loops: str) -> None:
    model = pack(dtype, n_in=n_in)
    x, y = data(steps, dtype, n_in=n_in)
    out = model(x)
    loss = F.cross_entropy(out.reshape(-1, N_OUT), y.repeat(K), reduction="sum") / BATCH
    loss.backward()
    for k in range(K):
        weights = member(model, k)
        ref = reference_out(weights, x)
        F.cross_entropy(ref, y).backward()
        torch.testing.assert_close(out[k].detach(), ref.detach(), **TOLERANCE[dtype])
        for p, ref in zip(model.parameters(), weights, strict=True):
            torch.testing.assert_close(p.grad[k], ref.grad, **TOLERANCE[dtype])


def reference_sgd(model: PackedSRNN, lr: list[float], dtype: torch.dtype,
                  steps: int = 50) -> list[list[torch.Tensor]]:
    """Each member of ``model`` trained alone by the straightforward loop in ``dtype``, from the
    pack's initial weights, on the batches of :func:`data` in the pack's dtype."""
    references = [[w.detach().to(dtype).requires_grad_() for w in member(model, k)]
                  for k in range(len(lr))]
    for step in range(steps):
        x, y = data(12, model.w_hh.dtype, seed=step)
        for k, weights in enumerate(references):
            loss = F.cross_entropy(reference_out(weights, x.to(dtype)), y)
            grads = torch.autograd.grad(loss, weights)
            with torch.no_grad():
                for w, g in zip(weights, grads, strict=True):
                    w -= lr[k] * g
    return references


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fifty_sgd_steps_equal_reference_loop(dtype: torch.dtype, threads: int,
                                              loops: str) -> None:
    """In float64 the pack's trajectory is the loop's to rounding. In float32, fifty steps at
    α up to 0.2 amplify the rounding of any summation order (the float32 loop itself drifts
    ~1e-6 to 1e-5 from exact arithmetic, by how much depends on the CPU's kernels), so there
    the pack must stay about as close to the float64 loop as the float32 loop does: within
    twice its drift plus float32's ``atol`` of :data:`TOLERANCE` (on an AMD EPYC the Python
    time loops' pack drifts 5.9e-6 where the loop drifts 2.1e-6; on the Intel Xeon of earlier
    runs it stayed within twice the loop's drift plus 1e-6). An error of the update itself
    shows in float64, to 1e-12."""
    lr = [0.05, 0.1, 0.2]
    model = pack(dtype, k=3)
    exact = reference_sgd(model, lr, torch.float64)
    plain = reference_sgd(model, lr, dtype)
    initial = model.w_hh.detach().clone()
    params = list(model.parameters())
    active = torch.ones(3, dtype=torch.bool)
    for step in range(50):
        x, y = data(12, dtype, seed=step)
        sgd_step(params, torch.autograd.grad(pack_loss(model, x, y), params),
                 torch.tensor(lr, dtype=dtype), active)
    assert (model.w_hh.detach() - initial).abs().amax(dim=(1, 2)).min() > 1e-3
    for k in range(3):
        for p, truth, loop in zip(params, exact[k], plain[k], strict=True):
            if dtype == torch.float64:
                torch.testing.assert_close(p.detach()[k], truth.detach(), **TOLERANCE[dtype])
                continue
            pack_error = (p.detach()[k].double() - truth.detach()).abs().max().item()
            loop_error = (loop.detach().double() - truth.detach()).abs().max().item()
            assert pack_error <= 2 * loop_error + TOLERANCE[dtype]["atol"], \
                (k, pack_error, loop_error)


def test_member_of_pack_equals_alone_at_784_steps(threads: int, loops: str) -> None:
    inits = [SRNNInit(seed=s, scheme="gaussian", init_std=0.2) for s in (3, 4, 5)]
    together = init_srnn(1, 16, N_OUT, inits, dtype=torch.float64)
    alone = init_srnn(1, 16, N_OUT, inits[1:2], dtype=torch.float64)
    lr, active = torch.full((3,), 0.1, dtype=torch.float64), torch.ones(3, dtype=torch.bool)
    g = torch.Generator().manual_seed(1)
    for _ in range(2):
        x = torch.rand(2, 784, 1, generator=g, dtype=torch.float64)
        y = torch.randint(N_OUT, (2,), generator=g)
        for model, k in ((together, 3), (alone, 1)):
            params = list(model.parameters())
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, N_OUT), y.repeat(k), reduction="sum")
            sgd_step(params, torch.autograd.grad(loss, params), lr[:k], active[:k])
    for a, b in zip(alone.parameters(), together.parameters(), strict=True):
        torch.testing.assert_close(a.detach()[0], b.detach()[1], rtol=1e-12, atol=1e-14)
    assert not torch.equal(together.w_hh.detach()[1], together.w_hh.detach()[0])


def test_member_blocks_cover_the_pack_once_per_thread(threads: int) -> None:
    for k in (1, 2, 5, 64):
        blocks = member_blocks(k, torch.device("cpu"))
        assert len(blocks) == min(threads, k)
        assert [m for b in blocks for m in range(k)[b]] == list(range(k))
        assert min(b.stop - b.start for b in blocks) >= k // threads
    assert member_blocks(64, torch.device("cuda")) == [slice(0, 64)]


def test_member_blocks_run_without_grad_and_restore_threads() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: dict[int, tuple[bool, int]] = {}

        def block(m: slice) -> None:
            seen[m.start] = (torch.is_grad_enabled(), torch.get_num_threads())

        in_member_blocks(block, 4, torch.device("cpu"))
        assert seen == {0: (False, 1), 2: (False, 1)}
        assert torch.get_num_threads() == 2

        def fails(m: slice) -> None:
            raise ArithmeticError(f"block {m.start}")

        with pytest.raises(ArithmeticError, match="block"):
            in_member_blocks(fails, 4, torch.device("cpu"))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_backward_through_a_reused_buffer_is_refused(loops: str) -> None:
    model = pack(torch.float32)
    x, y = data(6, torch.float32)
    stale = pack_loss(model, x, y)
    fresh = pack_loss(model, x, y)
    with pytest.raises(RuntimeError, match="inplace"):
        stale.backward()
    fresh.backward()
    assert model.w_hh.grad is not None and model.w_hh.grad.abs().sum() > 0


def test_without_a_compiler_the_python_loops_run_and_say_so(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from torch.utils import cpp_extension

    calls = []

    def no_ninja(**kwargs: object) -> None:
        calls.append(kwargs["name"])
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(srnn_native, "_built", None)
    monkeypatch.setattr(cpp_extension, "load", no_ninja)
    model = pack(torch.float64)
    x, y = data(5, torch.float64)
    with caplog.at_level(logging.WARNING, logger=srnn_native.__name__):
        pack_loss(model, x, y).backward()
        pack_loss(model, x, y).backward()
    assert len(calls) == 1 and calls[0].startswith("ortho_srnn_")
    assert [r.getMessage() for r in caplog.records] == [
        "srnn_native: C++ time loops not built (Ninja is required to load C++ extensions); "
        "using the Python loops"]
    weights = member(model, 2)
    F.cross_entropy(reference_out(weights, x), y).backward()
    torch.testing.assert_close(model.w_hh.grad[2], 2 * weights[1].grad, rtol=1e-12, atol=1e-13)


def test_a_build_lock_left_by_a_killed_build_does_not_block_the_next(tmp_path) -> None:
    """torch's build lock, left behind when a builder is killed mid-build (a trial stopped by
    SIGTERM while it compiled), made every later build wait on it forever; now the next build
    removes it and loads. The finished build is copied into a fresh extensions folder (no
    compile when there is one), then a fresh process builds there with the lock in place."""
    if not srnn_native.build():
        pytest.skip("the C++ loops do not build here")
    built = srnn_native.build_directory()
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    name = built.name
    shutil.copytree(built, tmp_path / name, ignore=shutil.ignore_patterns("lock"))
    (tmp_path / name / "lock").touch()
    code = ("import sys; from ortho_core.models import srnn_native as s; "
            "sys.exit(0 if s.build() else 3)")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "removed the build lock" in done.stderr and not (tmp_path / name / "lock").exists()


def test_cuda_graphs_are_skipped_on_cpu() -> None:
    model = pack(torch.float64)
    assert model.cuda_graphs
    x, y = data(6, torch.float64)
    assert not graphs_apply(x)
    pack_loss(model, x, y).backward()
    assert not model._workspace._graphs
    assert model.w_hh.grad is not None and model.w_hh.grad.abs().sum() > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_equal_the_plain_loop_and_refuse_stale_backward(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of two lengths in turn (as ``length_jitter`` draws them) replay the graphs
    captured once for each length, with the plain loop's numbers."""
    captures = []

    class Counted(GraphedLoops):
        def __init__(self, x: torch.Tensor, *weights: torch.Tensor):
            captures.append(x.shape[1])
            super().__init__(x, *weights)

    monkeypatch.setattr(srnn, "GraphedLoops", Counted)
    models = [pack(torch.float64).cuda() for _ in range(2)]
    models[1].cuda_graphs = False
    for step in range(4):
        x, y = (t.cuda() for t in data(20 + step % 2, torch.float64, seed=step))
        for model in models:
            params = list(model.parameters())
            grads = torch.autograd.grad(pack_loss(model, x, y), params)
            sgd_step(params, grads, 0.1, torch.ones(K, dtype=torch.bool, device="cuda"))
    assert captures == [20, 21]
    for a, b in zip(*(m.parameters() for m in models), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)
    stale = pack_loss(models[0], x, y)
    fresh = pack_loss(models[0], x, y)
    with pytest.raises(RuntimeError, match="inplace"):
        stale.backward()
    fresh.backward()


class _Capture:
    """Stands in for :class:`GraphedLoops` (which needs CUDA) in the cache tests: records each
    capture and holds what the cache reads."""

    made: ClassVar[list[tuple[int, ...]]] = []

    def __init__(self, x: torch.Tensor, w_xh: torch.Tensor, w_hh: torch.Tensor,
                 b_h: torch.Tensor):
        self.key, self.nbytes = graph_key(x), graph_bytes(x, w_hh)
        self._ptrs = (w_xh.data_ptr(), w_hh.data_ptr(), b_h.data_ptr())
        _Capture.made.append(tuple(x.shape))

    def reads(self, w_xh: torch.Tensor, w_hh: torch.Tensor, b_h: torch.Tensor) -> bool:
        return self._ptrs == (w_xh.data_ptr(), w_hh.data_ptr(), b_h.data_ptr())

    def matches(self, x: torch.Tensor, w_xh: torch.Tensor, w_hh: torch.Tensor,
                b_h: torch.Tensor) -> bool:
        return graph_key(x) == self.key and self.reads(w_xh, w_hh, b_h)


def test_a_pack_keeps_graphs_per_input_length_least_recently_used_out_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each length is captured once while the buffers of the graphs held fit in GRAPH_BYTES
    (here room for two lengths); a third evicts the least recently used one; weights at other
    addresses (a pack rebuilt) drop every graph."""
    model = pack(torch.float32)
    weights = [w.detach() for w in (model.w_xh, model.w_hh, model.b_h)]
    lengths = {t: torch.zeros(BATCH, t, N_IN) for t in (10, 11, 12)}
    monkeypatch.setattr(srnn, "GraphedLoops", _Capture)
    monkeypatch.setattr(srnn, "GRAPH_BYTES", graph_bytes(lengths[11], weights[1])
                        + graph_bytes(lengths[12], weights[1]))
    _Capture.made = []
    workspace = srnn._Workspace()
    for t in (10, 11, 10, 11, 12, 10, 11):
        workspace.graphs(lengths[t], *weights)
    assert [shape[1] for shape in _Capture.made] == [10, 11, 12, 10, 11]
    assert [key[0][1] for key in workspace._graphs] == [10, 11]
    moved = [w.clone() for w in weights]
    workspace.graphs(lengths[11], *moved)
    assert [key[0][1] for key in workspace._graphs] == [11] and len(_Capture.made) == 6


def test_forward_steps_multiply_by_a_contiguous_copy_of_w_hh_transposed_on_cpu() -> None:
    """The forward steps read W_hhᵀ from a copy on CPU (the faster layout for MKL's batched
    product, benchmarks/step_layout.py), holding W_hhᵀ's values and not aliasing W_hh."""
    w_hh = torch.randn(3, 5, 5, dtype=torch.float64)
    copy = step_weights(w_hh)
    assert copy.is_contiguous() and torch.equal(copy, w_hh.transpose(1, 2))
    assert copy.data_ptr() != w_hh.data_ptr()
