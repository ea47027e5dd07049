"""``ortho reproduce PAPER``: bad input and missing data stop before any work; a smoke
reproduction of K (one spec, ``lcw-deep-mlp``) writes one page holding the spec, every
published statement and one embedded image per figure; a second reproduction starts no child
and trains nothing, and rebuilds the page; a sweep of a spec that changed since is run anew."""

from __future__ import annotations

import base64
import html
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from analysis import reproduce
from analysis.claims import Claim
from analysis.load import no_runs
from analysis.papers import PAPERS, PROFILES
from analysis.published import kutsuna
from analysis.report import builder
from sweeps.cli import main
from sweeps.spec import available_specs
from sweeps.spec.schema import PROFILES as SPEC_PROFILES
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
SPEC = "lcw-deep-mlp"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The children's environment: the shipped data, no tracking URI from outside, quiet."""
    import os

    monkeypatch.setenv("ORTHO_DATA_DIR",
                       os.environ.get("ORTHO_DATA_DIR", str(ROOT.parent / "shared/data")))
    monkeypatch.delenv("ORTHO_TRACKING_URI", raising=False)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


def test_every_spec_belongs_to_one_paper() -> None:
    specs = [s for p in PAPERS.values() for s in p.specs]
    assert sorted(specs) == sorted(available_specs())
    assert len(set(specs)) == len(specs)
    assert set(PROFILES) == set(SPEC_PROFILES)
    for paper in PAPERS.values():
        for spec in paper.specs:  # each spec's header names its paper's author
            header = (ROOT / "sweeps/specs" / f"{spec}.yaml").read_text()[:300]
            assert paper.key.capitalize() in header


@pytest.mark.parametrize(("argv", "named"), [
    (["reproduce", "lamport"], "argument paper"),
    (["reproduce", "galvan", "--profile", "laptop"], "argument --profile"),
])
def test_bad_input_exits_2_before_any_work(argv: list[str], named: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--home", str(tmp_path)])
    assert exit_.value.code == 2
    assert named in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("address", ["foo", "127.0.0.1:{port}"])
def test_an_address_that_is_no_cluster_s_exits_2_before_any_sweep(
        address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each sweep refused it in turn (or printed Ray's traceback), then an empty page was
    written over the last one."""
    address = address.format(port=free_port())
    assert main(["reproduce", "manchev", "--profile", "smoke", "--address", address,
                 "--home", str(tmp_path / "home"), "--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ortho reproduce: invalid address: expected ")
    assert err.endswith(f" (got {address!r})\n") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_missing_data_stops_before_any_work(env: None, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "data"
    empty.mkdir()
    monkeypatch.setenv("ORTHO_DATA_DIR", str(empty))
    home, out = tmp_path / "home", tmp_path / "out"
    base = ["reproduce", "kutsuna", "--profile", "smoke", "--home", str(home), "--out", str(out)]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert f"{SPEC} needs mnist" in err
    assert "train-images-idx3-ubyte.gz" in err and "`ortho data download mnist`" in err
    assert "--skip-missing-data" not in err  # kutsuna's one spec lacks it: nothing else to run
    assert not home.exists() and not out.exists()

    assert main([*base, "--skip-missing-data"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == (f"left out for missing data: {SPEC} (mnist); add them with "
                           "`ortho data download mnist` and `ortho reproduce kutsuna --profile "
                           f"smoke --home {home} --out {out}` (finished sweeps are reused)")
    page = (out / "kutsuna.html").read_text()
    assert "not run here: needs mnist" in page and "<img" not in page
    # the claims of the spec left out are listed and counted, each not measured
    claims = build_report_of_no_runs(SPEC)
    assert len(claims) > 1
    assert f"kutsuna: 0 hold, 0 do not, {len(claims)} not measured; wrote " in "\n".join(printed)
    assert page.count('<li class="not-measured">') == len(claims)
    assert page.count("its spec did not run here") == len(claims)
    assert not home.exists()


def build_report_of_no_runs(spec: str) -> list:
    """The claims the report of ``spec`` states (built on a sweep of no runs)."""
    return builder(spec)(no_runs(spec, "smoke"), None).claims


def test_missing_data_says_which_datasets_no_command_fetches(
        capsys: pytest.CaptureFixture[str]) -> None:
    entries = [{"spec": "polyphonic-music", "datasets": {"jsb_chorales": None},
                "missing": "no such file", "file": "data/music/JSB Chorales.pickle"},
               {"spec": "ff-mnist", "datasets": {"mnist": "ortho data download mnist"},
                "missing": "no such file", "file": "data/mnist/train-images-idx3-ubyte.gz"}]
    err = reproduce.missing_data_error("ortho reproduce all --profile cpu", entries,
                                       others=True)
    assert err.field == "data/music/JSB Chorales.pickle"
    assert err.expected == (
        "the datasets of polyphonic-music (jsb_chorales), ff-mnist (mnist); fetch them with "
        "`ortho data download mnist`; put the files of jsb_chorales where the lines above say "
        "(`ortho data` cannot fetch them), or run the other specs now with "
        "`ortho reproduce all --profile cpu --skip-missing-data`")
    assert capsys.readouterr().err.splitlines() == [
        "polyphonic-music needs jsb_chorales: no such file", "ff-mnist needs mnist: no such file"]


def test_the_claims_that_do_not_hold_are_named_after_the_counts(tmp_path: Path) -> None:
    claims = [Claim("M-T1", "x", "holds", "e"), Claim("M-T2", "x", "does not hold", "e"),
              Claim("M-F2", "x", "not measured", "e"),
              Claim("M-T3", "x", "does not hold", "e", caveat="the smoke profile ...")]
    outcome = reproduce.Outcome(PAPERS["manchev"], [], Counter(
        {"holds": 1, "does not hold": 2, "not measured": 1, "explained": 1}),
        not_holding=reproduce.not_holding(claims))
    page = tmp_path / "manchev.html"
    assert reproduce.result_lines(outcome, page) == [
        f"manchev: 1 hold, 2 do not (1 explained), 1 not measured; wrote {page}",
        "  do not hold: M-T2, M-T3* (*: the page says why)"]
    outcome.not_holding = reproduce.not_holding(claims[:1])
    assert reproduce.result_lines(outcome, page) == [
        f"manchev: 1 hold, 2 do not (1 explained), 1 not measured; wrote {page}"]


def test_claims_sharing_an_id_are_named_once_with_their_number(tmp_path: Path) -> None:
    """A table's claims carry the table's id: the terminal names it once, in page order,
    with how many of them do not hold (those the page explains apart from the others)."""
    caveat = "the smoke profile ..."
    claims = [Claim("M-T2", "a", "does not hold", "e", caveat=caveat),
              Claim("M-T1", "b", "does not hold", "e"),
              Claim("M-T2", "c", "holds", "e"),
              Claim("M-T2", "d", "does not hold", "e", caveat=caveat),
              Claim("M-T2", "e", "does not hold", "e"),
              Claim("M-T2", "f", "does not hold", "e", caveat=caveat)]
    assert reproduce.not_holding(claims) == ["M-T2* ×3", "M-T1", "M-T2"]
    outcome = reproduce.Outcome(PAPERS["manchev"], [], Counter(
        {"holds": 1, "does not hold": 2, "explained": 2}),
        not_holding=reproduce.not_holding(claims[:1] + claims[3:4]))
    assert reproduce.result_lines(outcome, tmp_path / "manchev.html")[1] == (
        "  do not hold: M-T2* ×2 (*: the page says why)")


def test_a_terminated_reproduction_interrupts_its_sweep_rather_than_orphan_it(
        tmp_path: Path) -> None:
    """SIGTERM to ``ortho reproduce`` reaches its sweep's child (in a process group of its
    own, so a terminal's signals pass it by) as a Ctrl-C: the child ends interrupted, and
    the parent with the child's status, instead of leaving the sweep running without it."""
    marker = tmp_path / "interrupted"
    child = ("import signal, sys, time, pathlib\n"
             "def stop(*_):\n"
             f"    pathlib.Path({str(marker)!r}).write_text('SIGINT')\n"
             "    sys.exit(130)\n"
             "signal.signal(signal.SIGINT, stop)\n"
             f"pathlib.Path({str(tmp_path / 'ready')!r}).write_text('')\n"
             "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c",
                               "import sys; from analysis.reproduce import run_child; "
                               f"sys.exit(run_child([sys.executable, '-c', {child!r}], {{}}))"],
                              cwd=Path(__file__).resolve().parents[2])
    deadline = time.monotonic() + 30
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == 130
    assert marker.read_text() == "SIGINT"


def test_an_interrupt_before_the_first_sweep_made_its_store_exits_130(
        env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C while the first sweep starts (its child ends 130 before creating the store):
    the reproduction stops resumable, not with an error about the missing store."""
    home, out = tmp_path / "home", tmp_path / "out"
    monkeypatch.setattr(reproduce, "run_child", lambda argv, env: 130)
    argv = ["reproduce", "kutsuna", "--profile", "smoke", "--home", str(home), "--out",
            str(out)]
    assert main(argv) == 130
    # the command that resumes it names the store and the pages' folder it was given
    assert (f"interrupted: `ortho reproduce kutsuna --profile smoke --home {home} --out {out}` "
            "resumes it" in capsys.readouterr().err)
    assert not home.exists() and not out.exists()


@pytest.mark.parametrize("uri", ["http://127.0.0.1:5000", "postgresql://u:pw@db.internal/runs"])
def test_a_sweep_child_gets_the_store_where_its_hints_name_it_and_no_password_in_argv(
        env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uri: str) -> None:
    """A URI without a password goes on the sweep child's command line, one with a password
    only in its environment; what the child prints to run later (``resume with: ortho sweep
    resume ID ...``) names the first, and leaves the second to the user's environment (its
    masked form would not open the store)."""
    from sweeps import contract

    where = reproduce.Where(tracking_uri=uri, home=str(tmp_path))
    argv = where.child_argv("sweeps.cli", "sweep", "run", SPEC, "--profile", "smoke")
    child_env = where.child_env()
    given = argv[argv.index("--tracking-uri") + 1] if "--tracking-uri" in argv else None
    assert "pw" not in " ".join(argv)
    assert given == (uri if "pw" not in uri else None)
    assert child_env.get("ORTHO_TRACKING_URI") == (uri if "pw" in uri else None)
    monkeypatch.setattr("os.environ", child_env)  # as the child resolves its store
    hint = contract.store_options(tmp_path, contract.tracking_uri(given, tmp_path))
    assert ("--tracking-uri" in hint) == ("pw" not in uri)  # masked, it would not open


def _runs(home: Path) -> int:
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    return len(client.search_runs([e.experiment_id for e in client.search_experiments()]))


@pytest.mark.slow
def test_smoke_reproduction_then_reuse(env: None, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capfd: pytest.CaptureFixture[str]) -> None:
    home, out = tmp_path / "home", tmp_path / "out"
    argv = ["reproduce", "kutsuna", "--profile", "smoke", "--home", str(home), "--out",
            str(out)]
    assert main(argv) == 0
    first = capfd.readouterr().out
    sweep_id, = re.findall(rf"sweep (\S+): {SPEC}/smoke, \d+ configurations", first)  # child
    page = out / "kutsuna.html"
    # K-F13 on the smoke profile's ReLU MLP(20, 256): its gradients at initialisation hold;
    # in one epoch on 256 images the plain net does not train, and LCW stays near chance with
    # a finite loss: it does not explode
    assert first.splitlines()[-2:] == [
        f"kutsuna: 1 hold, 2 do not (2 explained), 12 not measured; wrote {page}",
        "  do not hold: K-F13* ×2 (*: the page says why)"]
    runs = _runs(home)

    def no_child(*args: object) -> int:
        raise AssertionError(f"a child was started: {args}")

    built = []

    def spy(*args: object) -> list:
        built.extend(reports(*args))
        return built

    reports = reproduce.reports
    monkeypatch.setattr(reproduce, "run_child", no_child)
    monkeypatch.setattr(reproduce, "reports", spy)
    page.unlink()
    assert main([*argv, "--ui", "http://127.0.0.1:5001"]) == 0  # `ortho ui --port 5001`'s
    assert f"[1/1] {SPEC}: already finished: sweep {sweep_id}" in capfd.readouterr().out
    assert _runs(home) == runs

    text = page.read_text()
    (step, report), = built
    assert step.sweep_id == sweep_id and report.runs.sweep.sweep_id == sweep_id
    assert f'<section id="{SPEC}">' in text and f"sweep {sweep_id} (reuse)" in text
    assert 'href="http://127.0.0.1:5001/#/experiments/' in text and ":5000" not in text
    for statement in kutsuna.PUBLISHED.values():
        assert html.escape(statement) in text
    statuses = [c.status for c in report.claims]
    assert (statuses.count("holds"), statuses.count("does not hold"),
            statuses.count("not measured")) == (1, 2, 12)
    figures = dict(re.findall(r'<figure id="figure-([^"]+)"><img [^>]*src="data:image/png;'
                              r'base64,([^"]+)"', text))
    drawn = [f for f in report.figures if not f.empty]
    assert sorted(figures) == sorted(f.name for f in drawn)
    assert text.count("<img") == len(drawn) > 0
    for figure in report.figures:  # nothing to plot: the caption says what is missing
        if figure.empty:
            assert (f'<figure id="figure-{figure.name}" class="empty"><figcaption>'
                    f"{html.escape(figure.title)}<br>") in text and figure.notes
    assert all(base64.b64decode(png)[:8] == b"\x89PNG\r\n\x1a\n" for png in figures.values())

    # A sweep of a spec that has changed since (its hash is not the spec's now) is not
    # reused: a new sweep runs.
    started: list[list[str]] = []

    def record(argv: list[str], env: dict[str, str]) -> int:
        started.append(argv)
        return 0

    MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}").set_tag(
        report.runs.sweep.parent_run_id, "ortho.spec_sha256", "0" * 64)
    monkeypatch.setattr(reproduce, "run_child", record)
    assert main(argv) == 0
    assert (f"[1/1] {SPEC}: running its smoke profile anew: the spec changed since sweep "
            f"{sweep_id}") in capfd.readouterr().out
    (child,) = started
    assert f"sweeps.cli sweep run {SPEC} --profile smoke" in " ".join(child)
