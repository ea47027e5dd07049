"""``pack_size: auto`` on this machine's device: the probe a sweep runs before it plans
(:mod:`sweeps.pack_size`), for shipped specs' profiles, in this process.

Run from the repository root, with the package importable (``pip install -e .`` or
``PYTHONPATH=.``) and ``$ORTHO_DATA_DIR`` holding MNIST:

    python benchmarks/pack_size_probe.py                   # the paper profiles, ~1 minute
    python benchmarks/pack_size_probe.py --specs ff-mnist --profile cpu
    python benchmarks/pack_size_probe.py --gpu 0.01        # a small GPU share: the memory bound
    python benchmarks/pack_size_probe.py --repeat 3        # is K the same probe to probe?

For each spec it does what ``ortho sweep run`` does with ``pack_size: auto``, less Ray: it takes
the configurations of the largest pack the plan could form (:func:`sweeps.pack_size.references`;
their number is the cap), resolves ``device: auto`` as a trial holding a GPU would (CUDA when
this machine has one), and runs :func:`sweeps.pack_size.probe_curve` with the profile's
``resources`` (or ``--cpus`` / ``--gpu``). It prints the curve (configs·iterations per second
by pack size K, and on a GPU the peak memory), where the ladder ended, the K a sweep would
choose for the profile's plan with ``--slots`` trials at once (:func:`sweeps.pack_size.decide`,
with each point's set-up) and the probe's wall time, which a sweep pays once before its first
trial. Without Ray and MLflow because the GPU machine lent to this project has neither: the
Ray task runs the same function in a worker process.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from ortho_core import experiments
from sweeps import pack_size
from sweeps.spec import load_spec, resolve

SPECS = ("synthetic-max-length", "ff-mnist", "pixel-mnist")
"""The shipped specs whose trainers have a ``probe_config``."""


def on_this_machine(params: dict) -> dict:
    """``params`` with ``device: auto`` resolved as a trial holding a GPU resolves it."""
    if params.get("device") != "auto":
        return params
    return {**params, "device": "cuda" if torch.cuda.is_available() else "cpu"}


def probe(spec_name: str, profile: str, cpus: float | None, gpu: float | None,
          seconds: float, slots: int) -> None:
    """Probe one spec's profile and print what a sweep would choose."""
    spec = resolve(load_spec(spec_name), profile)
    spec = dataclasses.replace(spec, pack_size=pack_size.AUTO)
    params = [on_this_machine(p) for p in pack_size.references(spec)]
    cpus = spec.resources.cpu if cpus is None else cpus
    gpu = spec.resources.gpu if gpu is None else gpu
    device = params[0].get("device", "cpu")
    print(f"{spec_name}/{profile}: cap {len(params)}, device {device}, cpu {cpus:g}, "
          f"gpu {gpu:g}", flush=True)
    started = time.monotonic()
    result = pack_size.probe_curve(experiments.EXPERIMENTS[spec.experiment], params, cpus, gpu,
                                   seconds)
    wall = time.monotonic() - started
    for k, rate in result.curve.items():
        memory = (f", peak {result.peak_bytes[k] / 2 ** 20:.0f} MiB"
                  if k in result.peak_bytes else "")
        setup = f", set-up {result.setup[k]:.2f} s" if k in result.setup else ""
        print(f"  K = {k:3d}: {rate:10.0f} configs·iterations/s "
              f"({rate / result.curve[min(result.curve)]:.2f}× K = {min(result.curve)})"
              f"{setup}{memory}")
    if result.curve:
        print(f"  {pack_size.decide(spec, params, result, slots, wall).why}", flush=True)
    else:
        print(f"  ladder ended at {result.ended}; nothing measured; probe {wall:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--specs", nargs="+", default=list(SPECS), choices=SPECS)
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--cpus", type=float, help="a trial's CPUs (default: the profile's)")
    parser.add_argument("--gpu", type=float, help="a trial's GPU share (default: the profile's)")
    parser.add_argument("--seconds", type=float, default=pack_size.PROBE_SECONDS,
                        help="the probe's time limit (default: a sweep's)")
    parser.add_argument("--repeat", type=int, default=1, help="probes per spec")
    parser.add_argument("--slots", type=int, default=1,
                        help="trials the plan runs at once (a GPU shared by 4: 4)")
    args = parser.parse_args()
    if torch.cuda.is_available():
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for name in args.specs:
        for _ in range(args.repeat):
            probe(name, args.profile, args.cpus, args.gpu, args.seconds, args.slots)


if __name__ == "__main__":
    main()
