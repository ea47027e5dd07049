"""The report's run cache (:mod:`analysis.cache`): an entry survives a write that stops
half-way (an interrupt, a full disk), and no partial file is ever seen under its name."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.cache import RunCache

SPEC, SWEEP = "synthetic-max-length", "sw-1"


def _runs(n: int) -> pd.DataFrame:
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(n)], "params.lr": ["0.1"] * n})


def _history(n: int) -> pd.DataFrame:
    return pd.DataFrame({"step": range(n), "value": [0.5 * s for s in range(n)]})


def _stop_half_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every parquet write put a few bytes into its file, then raise KeyboardInterrupt
    (as Ctrl-C during ``to_parquet`` would)."""
    def half(self: pd.DataFrame, path: str | Path, **_: object) -> None:
        Path(path).write_bytes(b"PAR1\x00")
        raise KeyboardInterrupt
    monkeypatch.setattr(pd.DataFrame, "to_parquet", half)


def test_an_interrupted_write_leaves_the_entry_it_had(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cache = RunCache(tmp_path)
    cache.put_runs(SPEC, SWEEP, "fp-1", _runs(3), {"n_runs": 3})
    cache.put_history(SPEC, SWEEP, "r0", "val_error", _history(4))
    with monkeypatch.context() as m:
        _stop_half_way(m)
        with pytest.raises(KeyboardInterrupt):
            cache.put_history(SPEC, SWEEP, "r1", "val_error", _history(2))
        with pytest.raises(KeyboardInterrupt):
            cache.put_runs(SPEC, SWEEP, "fp-1", _runs(5), {"n_runs": 5})
    history = cache.get_history(SPEC, SWEEP, "r0", "val_error")
    pd.testing.assert_frame_equal(history, _history(4))
    assert cache.get_history(SPEC, SWEEP, "r1", "val_error") is None
    # the runs' metadata goes before their frame is rewritten: the entry is a miss, not half
    assert cache.get_runs(SPEC, SWEEP, "fp-1") is None
    assert sorted(p.name for p in (tmp_path / SPEC).iterdir()) == [
        f"{SWEEP}.history.parquet", f"{SWEEP}.parquet"]  # no staged file left behind

    cache.put_runs(SPEC, SWEEP, "fp-1", _runs(5), {"n_runs": 5})
    frame, meta = cache.get_runs(SPEC, SWEEP, "fp-1")
    pd.testing.assert_frame_equal(frame, _runs(5))
    assert meta == {"n_runs": 5, "fingerprint": "fp-1"}


def test_a_new_fingerprint_drops_the_sweep_s_histories(tmp_path: Path) -> None:
    cache = RunCache(tmp_path)
    cache.put_runs(SPEC, SWEEP, "fp-1", _runs(3), {})
    cache.put_history(SPEC, SWEEP, "r0", "val_error", _history(4))
    cache.put_runs(SPEC, SWEEP, "fp-1", _runs(3), {})
    assert cache.get_history(SPEC, SWEEP, "r0", "val_error") is not None
    cache.put_runs(SPEC, SWEEP, "fp-2", _runs(4), {})
    assert cache.get_history(SPEC, SWEEP, "r0", "val_error") is None
    assert cache.get_runs(SPEC, SWEEP, "fp-1") is None
    assert len(cache.get_runs(SPEC, SWEEP, "fp-2")[0]) == 4


def test_a_server_s_cache_is_in_a_named_home_else_the_user_s_cache(tmp_path, monkeypatch):
    """A report of a tracking server writes no ``./ortho-runs`` into the working directory
    (it did); a SQLite store's cache is beside it."""
    from analysis.store import cache_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("ORTHO_HOME", raising=False)
    server = "http://127.0.0.1:5000"
    default = cache_dir(server)
    assert default.parent == tmp_path / "user" / ".cache" / "ortho-sweeps" / "analysis"
    assert cache_dir(server, tmp_path / "h").parent == tmp_path / "h" / "cache" / "analysis"
    monkeypatch.setenv("ORTHO_HOME", str(tmp_path / "env"))
    assert cache_dir(server) == tmp_path / "env" / "cache" / "analysis" / default.name
    assert cache_dir(f"sqlite:///{tmp_path}/s/mlflow.db") == tmp_path / "s" / "cache" / "analysis"
    assert cache_dir(server, tmp_path / "h") != cache_dir("http://127.0.0.1:5001", tmp_path / "h")
