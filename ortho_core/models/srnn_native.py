"""The packed SRNN's time loops as a small C++ extension (``csrc/srnn_loops.cpp``), used by
:mod:`ortho_core.models.srnn_kernels` on CPU when it builds.

In C++ a step is one batched matmul through ATen and one fused elementwise pass, with no
Python and no autograd bookkeeping between the steps: forward, h_t = tanh(prod + pre) with
tanh a rational function the compiler vectorises (relative error below 4·10⁻⁷ in float32;
``std::tanh`` in float64) and, for one input per step (pixels), the input projection
b_h + x_t W_xh computed in the same pass instead of a pass of its own; backward,
∂L/∂a_t = ∂L/∂h_t·(1 − h_t²). ∂W_hh is accumulated every ``projection_steps`` steps from the
rows of ∂a just written, still in cache, instead of one product over both (K, T, B, H)
buffers read back from memory at the end. The operations release the GIL, so the member
blocks still run in parallel threads (:func:`~.srnn_kernels.in_member_blocks`).
``benchmarks/pixel_throughput.py`` measures them against the Python loops.

It is compiled with ``-O3 -march=native`` for the machine it runs on, once: at install time
(:func:`main`, from ``scripts/install.sh``) or at its first use (about 10 s), into PyTorch's
extensions directory (``$TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``).
The extension's name carries the CPU's instruction sets, the torch version and the folder of
its source, so machines sharing that directory never load one another's build, and two
checkouts on one machine do not rebuild over each other (ninja's build file names the source
by its path). Where it cannot be built (no C++ compiler or no ninja) the Python loops are
used, and one line is logged saying so.

A builder killed mid-build (a trial stopped by SIGTERM while it compiled) leaves torch's
build lock behind, a file torch creates and removes itself, on which every later build of
the extension would wait forever; builds therefore hold a lock of their own that the kernel
releases with its process (:func:`_build_lock`), under which a leftover torch lock is stale
and is removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import platform
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor

__all__ = ["applies", "backward_states", "build", "build_directory", "forward_states", "main",
           "python_loops"]

SOURCE = Path(__file__).with_name("csrc") / "srnn_loops.cpp"
FLAGS = ["-O3", "-march=native"]

_log = logging.getLogger(__name__)
_built: bool | None = None  # None: not tried yet in this process
_enabled = True


def _name() -> str:
    """The extension's name: one per CPU instruction set, torch version and source
    folder."""
    cpu = platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu += next((line for line in cpuinfo.read_text().splitlines()
                     if line.startswith(("flags", "Features"))), "")
    tag = hashlib.sha1(f"{cpu}|{torch.__version__}|{SOURCE.parent.resolve()}".encode())
    return f"ortho_srnn_{tag.hexdigest()[:12]}"


def build_directory() -> Path:
    """Where the extension is built (torch's choice for its name, made if missing)."""
    from torch.utils import cpp_extension

    return Path(cpp_extension._get_build_directory(_name(), verbose=False))


@contextmanager
def _build_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory``'s lock file (``<name>.flock`` beside it)
    and remove torch's ``lock`` inside it when one is there: every builder takes this lock
    first, so a torch lock found while holding it was left by a builder that died."""
    with open(directory.parent / f"{directory.name}.flock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        stale = directory / "lock"
        if stale.exists():
            _log.warning("srnn_native: removed the build lock %s, left by a build that did "
                         "not finish", stale)
            stale.unlink(missing_ok=True)
        yield


def build(verbose: bool = False) -> bool:
    """Build (or find already built) and load the extension; False, after logging one line,
    where it cannot be built. Tried once per process."""
    global _built
    if _built is None:
        from torch.utils import cpp_extension

        try:
            with _build_lock(build_directory()):
                cpp_extension.load(name=_name(), sources=[str(SOURCE)], extra_cflags=FLAGS,
                                   is_python_module=False, verbose=verbose)
            _built = True
        except (RuntimeError, OSError, subprocess.SubprocessError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            _log.warning("srnn_native: C++ time loops not built (%s); using the Python loops",
                         reason)
            _built = False
    return _built


def applies(out: Tensor) -> bool:
    """Whether the C++ loops run for the (K, T, B, H) buffer ``out``: on CPU, float32 or
    float64, outside :func:`python_loops`, and built (building it on first use)."""
    return (_enabled and out.device.type == "cpu" and out.dtype in (torch.float32, torch.float64)
            and build())


@contextmanager
def python_loops() -> Iterator[None]:
    """Use the Python loops inside (to compare the two paths in one process)."""
    global _enabled
    before, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = before


def forward_states(x_rows: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor, out: Tensor,
                   projection_steps: int) -> None:
    """h_1 … h_T of one block of members into ``out`` (k, T, B, H) from the input rows
    ``x_rows`` (T·B, I), as :func:`~.srnn_kernels.forward_states` computes them."""
    torch.ops.ortho_srnn.forward_states(x_rows, w_xh, w_hh, b_h, out, projection_steps)


def backward_states(hs: Tensor, w_hh: Tensor, grad: Tensor, out: Tensor, inputs: Tensor | None,
                    sums: Tensor | None, grad_hh: Tensor | None, projection_steps: int) -> None:
    """∂L/∂a_t of one block of members into ``out``, ``sums`` += Σ_t inputs_t ∂a_t as
    :func:`~.srnn_kernels.backward_states` computes them, and ``grad_hh`` += Σ_{t≥2} ∂a_tᵀ h_{t−1}
    (∂L/∂W_hh of :func:`~.srnn_kernels.weight_grads`), both every ``projection_steps`` steps
    from the rows just written, still in cache."""
    torch.ops.ortho_srnn.backward_states(hs, w_hh, grad, out, inputs, sums, grad_hh,
                                         projection_steps)


def main() -> None:
    """Build the extension now and say whether it built (``scripts/install.sh`` runs this)."""
    logging.basicConfig(format="%(message)s")
    print("install: C++ time loops of the packed SRNN",
          "built" if build() else "not built: the Python loops will be used")
