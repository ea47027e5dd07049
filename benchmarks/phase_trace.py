"""Where a sweep's time goes in each of its processes: the driver, the writer, every trial.

    python benchmarks/phase_trace.py -- python benchmarks/sweep_throughput.py --modes packed ...

runs the command with ``benchmarks/phase_trace/`` on ``PYTHONPATH`` (its ``sitecustomize``
times imports and calls in every Python process the command starts, Ray's workers
included: see that module) and then prints, process by process, each event's start relative
to the driver's last call of ``run_sweep`` and its duration. It found what a GPU trial did
before its first claim (RESULTS.md, ``trial start on a GPU``) and the end of a sweep reading
its runs three times (``sweep end on a CPU``). The timing wrappers cost microseconds a call;
the benchmark's own figures, taken without it, are the ones to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def events(folder: Path) -> dict[str, list[tuple[str, float, float]]]:
    """Each process's events (label, start, end), by pid, in the order written (a line cut
    short by a process killed while writing it is left out)."""
    found = {}
    for path in folder.glob("*.jsonl"):
        rows = []
        for line in path.read_text().splitlines():
            try:
                rows.append(tuple(json.loads(line)))
            except ValueError:
                continue
        if rows:
            found[path.stem] = rows
    return found


def report(folder: Path) -> str:
    """The events of every process that had any after (or overlapping) the driver's last
    ``run_sweep``, relative to its start."""
    procs = events(folder)
    starts = sorted(start for rows in procs.values() for label, start, _ in rows
                    if label.startswith("sweeps.runner.run_sweep#"))
    if not starts:
        return "no run_sweep call was traced"
    origin = starts[-1]
    lines = [f"times from the last of {len(starts)} run_sweep calls"]
    for pid, rows in sorted(procs.items(), key=lambda kv: kv[1][0][1]):
        later = [(label, start - origin, end - start) for label, start, end in rows[1:]
                 if end >= origin]
        if later:
            lines.append(f"-- pid {pid}: {rows[0][0][:110]} (at {rows[0][1] - origin:+.2f} s)")
            lines += [f"   {start:+8.2f} s {took:7.3f} s  {label}" for label, start, took in later]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: expected a command to run, after --")
    with tempfile.TemporaryDirectory(prefix="phase-trace-") as folder:
        path = os.pathsep.join(filter(None, [str(HERE / "phase_trace"),
                                             os.environ.get("PYTHONPATH")]))
        status = subprocess.call(command, env={**os.environ, "PYTHONPATH": path,
                                               "ORTHO_TRACE_DIR": folder})
        print(report(Path(folder)), flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
