"""The real smoke sweeps tests read (``smoke_home``, ``tests/conftest.py``): ``ortho sweep run
SPEC --profile smoke`` for every spec the selected tests name, all in ONE subprocess (one
Python start with its imports, one embedded Ray start, the runner reusing that Ray for each
sweep as ``benchmarks/sweep_throughput.py`` does) and into ONE shared home: each spec is its
own MLflow experiment, so the tests of one spec do not see another's runs.

Why one subprocess rather than one per spec: each would pay about 3 s of imports and 3-4 s of
Ray starting and stopping on top of its few seconds of training. Why a subprocess at all: the
embedded Ray stops with it, so that no test process is left holding one.

A sweep that fails fails the tests of its spec only (each spec's exit status and output are
kept apart); a subprocess that dies or runs past its time fails those whose sweeps had not
finished.

Under pytest-xdist the workers of a session share one root (:func:`shared_root`): the first
worker that needs a smoke sweep runs every wanted one, holding a file lock, and the others
wait for it and read its results (``results.json``) instead of training the same sweeps again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]

SECONDS_PER_SPEC = 300
"""The time one smoke sweep may take (the subprocess gets this much per spec it runs)."""

RUNNER = """\
import contextlib, io, json, sys, traceback
import ray
from sweeps.cli import main
from sweeps.ray_session import start_embedded_ray

home, out, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
start_embedded_ray()
results = {}
for spec in specs:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        try:
            status = main(["sweep", "run", spec, "--profile", "smoke", "--home", home])
        except BaseException:
            traceback.print_exc()
            status = -1
    results[spec] = {"status": status, "output": text.getvalue()}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f)
ray.shutdown()
"""
"""The subprocess: Ray started once, then ``ortho sweep run`` (``sweeps.cli.main``, which
reuses a running Ray and leaves it running) for each spec, its exit status and output written
to the JSON file ``out`` after each one."""


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder of the session's smoke sweeps: one for all pytest-xdist workers of the
    session (beside their own temporary folders), else a fresh one."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return factory.mktemp("smoke-sweeps")
    root = factory.getbasetemp().parent / "smoke-sweeps"
    root.mkdir(exist_ok=True)
    return root


class SmokeSweeps:
    """The smoke sweeps of a session in one shared home under ``root``: on the first request
    for a spec, every wanted spec not yet run is run (one subprocess for all of them)."""

    def __init__(self, root: Path, wanted: list[str]) -> None:
        self.root = root
        self.home = root / "home"
        self.wanted = wanted
        """The specs the session's selected tests need (``smoke_sweep`` marks), in order."""
        self._results: dict[str, dict] = {}
        self._shared = root / "results.json"
        """Every result so far, for the other processes sharing ``root``."""

    def home_of(self, spec: str) -> Path:
        """The shared home, holding a finished smoke sweep of ``spec`` (which must have
        exited with status 0, as ``ortho sweep run`` does when every configuration ended)."""
        if spec not in self._results:
            with FileLock(self.root / "results.lock"):
                if self._shared.is_file():
                    self._results = json.loads(self._shared.read_text(encoding="utf-8"))
                left = [s for s in dict.fromkeys([*self.wanted, spec]) if s not in self._results]
                if left:
                    self._run(left)
                    self._shared.write_text(json.dumps(self._results), encoding="utf-8")
        result = self._results[spec]
        message = f"smoke sweep of {spec}: exit status {result['status']}\n{result['output']}"
        assert result["status"] == 0, message
        return self.home

    def output_of(self, spec: str) -> str:
        """What ``ortho sweep run`` printed for ``spec``'s smoke sweep (run first if need be)."""
        self.home_of(spec)
        return self._results[spec]["output"]

    def _run(self, specs: list[str]) -> None:
        """Run the smoke sweeps of ``specs`` in one subprocess on the embedded default (Ray
        on 127.0.0.1, the home's SQLite store); datasets from ``$ORTHO_DATA_DIR`` (else
        ``../shared/data``)."""
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
               "MLFLOW_DISABLE_TELEMETRY": "true",
               "ORTHO_DATA_DIR": os.environ.get("ORTHO_DATA_DIR",
                                                str(ROOT.parent / "shared/data"))}
        env.pop("ORTHO_TRACKING_URI", None)
        out = self.root / f"results-{len(self._results)}.json"
        try:
            done = subprocess.run([sys.executable, "-c", RUNNER, str(self.home), str(out),
                                   *specs], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=SECONDS_PER_SPEC * len(specs))
            ended = f"exit status {done.returncode}\n{done.stdout}{done.stderr}"
        except subprocess.TimeoutExpired as err:
            ended = f"ran past {err.timeout} s\n{_text(err.stdout)}{_text(err.stderr)}"
        results = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
        for spec in specs:
            result = results.get(spec, {"status": None, "output": "not run"})
            self._results[spec] = {"status": result["status"], "output": (
                f"{result['output']}\n--- the subprocess of {specs}: {ended}")}


def _text(output: str | bytes | None) -> str:
    """What a subprocess that ran past its time had written (bytes, whatever it was asked)."""
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""
