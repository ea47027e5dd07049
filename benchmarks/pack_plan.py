"""Does ``pack_size: auto`` time a plan as this machine's device trains it? The probe a sweep
runs, the K it chooses, and for a few K the model's predicted plan time against the plan's
first pack trained for real, in this process.

Run from the repository root, with the package importable (``pip install -e .`` or
``PYTHONPATH=.``):

    python benchmarks/pack_plan.py --quick       # this CPU, about 2 minutes
    python benchmarks/pack_plan.py --repeats 32 --ks 128,224,896 --slots 4 --gpu 0.25 \\
        --set max_iters=1000 --set max_seq_len=50 --set val_size=2000   # a GPU, ~2 minutes

For synthetic-max-length's ``--profile`` (all its configurations, ``--set`` on each, ``--repeats``
seeds, as ``benchmarks/sweep_throughput.py --packs 0`` sweeps them) it:

1. runs :func:`sweeps.pack_size.probe_curve` on the configurations of the largest pack the plan
   could form, with a trial's ``--cpus`` and ``--gpu``, and prints the curve and the K that
   :func:`sweeps.pack_size.decide` chooses for ``--slots`` trials at once;
2. for each K of ``--ks``: the plan at K (its packs dealt to fill the slots), its predicted
   time by the model ``decide`` used (:func:`sweeps.pack_size.plan_seconds` with
   :func:`sweeps.pack_size.weighing`'s keywords), and its measured
   estimate: the plan's first pack trained alone under the real protocol
   (``synthetic.train``), times the plan's rounds (packs / slots, rounded up). Both are
   printed as ratios to the largest K's, so that the model's error shows where it matters:
   which K finishes first.

The estimate takes the packs of a round to run side by side as fast as one alone (on a shared
GPU they slow each other) and every round as long as the first pack (the plan's groups, one
problem each, differ). Without Ray and MLflow because the GPU machine lent to this project has
neither; ``benchmarks/sweep_throughput.py`` measures whole sweeps through them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from sweep_throughput import CASES, setting, subset_spec

ROOT = Path(__file__).resolve().parent.parent
QUICK = {"max_iters": 300, "max_seq_len": 40, "val_size": 200, "screen_size": 100}
"""``--quick``'s settings: a curriculum of four lengths, 300 iterations each."""


def grid(profile: str, overrides: dict[str, Any], repeats: int, cpus: float, gpu: float):
    """synthetic-max-length's ``profile``, every configuration with ``overrides`` and
    ``repeats`` seeds, ``pack_size: auto``, resolved (the spec written to a temporary file)."""
    from sweeps.spec import load_spec, resolve

    case = next(c for c in CASES if c.spec == "synthetic-max-length")
    doc, _ = subset_spec(dataclasses.replace(case, packs=()), profile, overrides, "auto",
                         {"cpu": cpus, "gpu": gpu})
    folder = Path(tempfile.mkdtemp(prefix="pack-plan-"))
    path = folder / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump({**doc, "repeats": repeats, "pack_size": "auto"},
                                   sort_keys=False))
    return resolve(load_spec(str(path)), "cpu")  # the written spec's profiles are empty


def train_first_pack(module: Any, spec: Any, k: int,
                     slots: int) -> tuple[int, int, float, int]:
    """The plan of ``spec`` at pack size ``k`` for ``slots`` trials at once: its number of
    packs, its first pack's size, that pack's wall time trained alone, and the iterations its
    members trained in all."""
    from ortho_core.config import from_dict
    from sweeps.plan import build_plan
    from sweeps.trial import resolve_device

    plan = build_plan(dataclasses.replace(spec, pack_size=k), slots=slots)
    configs = [from_dict(module.Config, resolve_device(m.params)) for m in plan.packs[0]]
    steps: dict[int, int] = {}
    started = time.monotonic()
    module.train(configs, lambda report: steps.__setitem__(report.member, report.step))
    return len(plan.packs), len(configs), time.monotonic() - started, sum(steps.values())


def main() -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--profile", default="paper")
    p.add_argument("--set", type=setting, action="append", default=[], metavar="KEY=VALUE",
                   help="a config key on every configuration (repeatable)")
    p.add_argument("--repeats", type=int, default=1, help="seeds per configuration")
    p.add_argument("--ks", default="", help="pack sizes to train, comma-separated "
                   "(default: the chosen K and the cap)")
    p.add_argument("--slots", type=int, default=2, help="trials at once (default 2)")
    p.add_argument("--cpus", type=float, default=1, help="a trial's CPUs (default 1)")
    p.add_argument("--gpu", type=float, default=0, help="a trial's GPU share (default 0)")
    p.add_argument("--quick", action="store_true",
                   help=f"{', '.join(f'{k}={v}' for k, v in QUICK.items())}, 4 seeds, "
                        "and K = 8 besides the chosen K and the largest measured")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from ortho_core import experiments
    from sweeps import pack_size
    from sweeps.trial import limit_threads

    # the device a trial would resolve ``auto`` to, here without asking Ray
    overrides = {**(QUICK if args.quick else {}), **dict(args.set),
                 "device": "cuda" if args.gpu else "cpu"}
    repeats = 4 if args.quick and args.repeats == 1 else args.repeats
    spec = grid(args.profile, overrides, repeats, args.cpus, args.gpu)
    module = experiments.get(spec.experiment)
    params = pack_size.references(spec)
    limit_threads(args.cpus)
    device = torch.cuda.get_device_name() if args.gpu else "CPU"
    print(f"synthetic-max-length/{args.profile} × {repeats} seed(s), {overrides}: cap "
          f"{len(params)}, {args.slots} slot(s), {device}, torch {torch.__version__}",
          flush=True)
    started = time.monotonic()
    probe = pack_size.probe_curve(experiments.EXPERIMENTS[spec.experiment], params, args.cpus,
                                  args.gpu)
    if not probe.curve:
        raise SystemExit(f"the probe measured nothing (its ladder ended at {probe.ended})")
    choice = pack_size.decide(spec, params, probe, args.slots, time.monotonic() - started)
    print(f"pack_size auto: {choice.why}", flush=True)

    ks = sorted({int(k) for k in args.ks.split(",") if k}
                or {choice.k, max(probe.curve), *([8] if args.quick else [])})
    _, weighed = pack_size.weighing(spec, params, probe)
    packs_at = pack_size.plan_packs(spec, args.slots)
    rows = []
    for k in ks:
        predicted = pack_size.plan_seconds(probe.curve, packs_at(k), args.slots, **weighed)
        n_packs, size, wall, iterations = train_first_pack(module, spec, k, args.slots)
        rounds = math.ceil(n_packs / args.slots)
        rows.append((k, n_packs, size, wall, iterations, rounds * wall, predicted))
        print(f"  K = {k}: {n_packs} packs; the first ({size} members) trained alone in "
              f"{wall:.1f} s, {iterations:,} configs·iterations ({iterations / wall:,.0f}/s)",
              flush=True)
    last = rows[-1]
    print(f"{'K':>5} {'packs':>6} {'rounds':>6} {'estimate s':>10} {'measured':>9} "
          f"{'predicted':>9}   (ratios to K = {last[0]})")
    for k, n_packs, _, _, _, estimate, predicted in rows:
        print(f"{k:>5} {n_packs:>6} {math.ceil(n_packs / args.slots):>6} {estimate:>10.1f} "
              f"{estimate / last[5]:>9.2f} {predicted / last[6]:>9.2f}")


if __name__ == "__main__":
    main()
