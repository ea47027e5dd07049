"""``python -m sweeps.ready`` (:mod:`sweeps.ready`), what ``ortho reproduce`` asks before it
starts a sweep: one JSON object per spec, with the resolved spec's hash, its datasets and how
to fetch them, and the first missing file; a spec that does not resolve is exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeps import ready
from sweeps.spec import load_spec, resolve
from tests.servers import free_port
from tests.sweeps.helpers import DATA_DIR


def _ready(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict], str]:
    status = ready.main(argv)
    out, err = capsys.readouterr()
    return status, [json.loads(line) for line in out.splitlines()], err


def test_each_spec_gets_its_hash_datasets_and_data_check(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ORTHO_DATA_DIR", DATA_DIR)
    status, entries, _ = _ready(["--profile", "smoke", "ff-mnist", "polyphonic-music",
                                 "synthetic-max-length"], capsys)
    assert status == 0
    ff, music, synthetic = entries
    assert ff == {"spec": "ff-mnist", "sha256": resolve(load_spec("ff-mnist"), "smoke").sha256,
                  "datasets": {"mnist": "ortho data download mnist"}, "missing": None,
                  "file": None}
    assert music["datasets"] and set(music["datasets"].values()) == {None}  # no download
    assert music["missing"] is None
    assert synthetic["datasets"] == {} and synthetic["missing"] is None
    assert synthetic["sha256"] != resolve(load_spec("synthetic-max-length"), "cpu").sha256


def test_a_missing_file_is_named_with_how_to_get_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mnist").mkdir()
    monkeypatch.setenv("ORTHO_DATA_DIR", str(tmp_path))
    status, [entry], _ = _ready(["--profile", "smoke", "ff-mnist"], capsys)
    assert status == 0
    assert entry["file"] is not None and entry["file"].startswith(str(tmp_path))
    assert "ortho data download mnist" in entry["missing"]
    # on a cluster (one that answers) the nodes' files are checked there, not this machine's
    monkeypatch.setattr(ready, "check_address", lambda address: None)
    status, [entry], _ = _ready(["--profile", "smoke", "--address", "auto", "ff-mnist"], capsys)
    assert (entry["missing"], entry["file"]) == (None, None)


@pytest.mark.parametrize(("argv", "named"), [
    (["--profile", "smoke", "no-such-spec"], "spec"),
    (["--profile", "laptop", "ff-mnist"], "profile"),
])
def test_a_spec_that_does_not_resolve_is_exit_2_and_nothing_printed(
        argv: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, entries, err = _ready(argv, capsys)
    assert status == 2 and entries == []
    assert err.startswith("invalid ") and named in err


@pytest.mark.parametrize(("address", "expected"), [
    ("foo", "a Ray cluster's address: HOST:PORT of its GCS"),
    ("127.0.0.1:{port}", "a running Ray cluster's address that answers (connection refused"),
])
def test_an_address_that_is_no_cluster_s_is_refused_before_any_spec(
        address: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    address = address.format(port=free_port())
    status, [entry], err = _ready(["--profile", "smoke", "--address", address,
                                   "orth-pretrain-convergence"], capsys)
    assert status == 2 and entry == {"address": {"expected": entry["address"]["expected"],
                                                 "value": address}}
    assert entry["address"]["expected"].startswith(expected)
    assert err == f"invalid address: expected {entry['address']['expected']} (got {address!r})\n"
