"""``ortho report`` and ``ortho ui`` through the ``ortho`` entry point: output, files, exit
statuses; and the report of a REAL smoke sweep checked cell by cell against its runs."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from analysis import cli
from analysis.claims import claims_markdown
from analysis.html import provenance_items
from analysis.load import Histories, load_sweep
from analysis.published.manchev import PRETRAIN, TABLE_I
from analysis.report import build_report
from analysis.reports import max_length
from analysis.tables import SUFFIX
from sweeps.cli import main
from tests.analysis.conftest import PRETRAIN_SPEC, SPEC, Store, copy_store
from tests.servers import START_TIMEOUT, _http_ok, _wait_until, free_port

ROOT = Path(__file__).resolve().parents[2]


def md_rows(text: str) -> list[list[str]]:
    """The cells of every row of the markdown tables in ``text`` (padding stripped)."""
    return [[cell.strip() for cell in line.strip()[1:-1].split(" | ")]
            for line in text.splitlines()
            if line.startswith("| ") and line.endswith(" |")]


@pytest.fixture
def uri(store: Store, tmp_path: Path) -> str:
    """A copy of the hand-built store (a report writes its cache beside the database)."""
    return copy_store(store, tmp_path / "store")


def test_report_prints_markdown_of_the_latest_sweep(uri: str, capsys) -> None:
    assert main(["report", SPEC, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### M Table I — maximal sequence length by model\n")
    assert "profile cpu · sweep sw-1 · 16 runs → 14 configurations of 16 expected" in out
    pub = TABLE_I[("adding", "oinit")]
    assert ["Adding", "SRNN+OINIT", "missing", str(pub.max_len), "missing", format(pub.lr, "g"),
            "–", "–", "0/2"] in md_rows(out)
    assert "wrote" not in out


def test_sweep_option_selects_an_older_sweep(uri: str, capsys) -> None:
    assert main(["report", SPEC, "--sweep", "sw-0", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "profile smoke · sweep sw-0 · 1 run → 1 configuration of 1 expected" in out
    pub = TABLE_I[("temporal_order", "plain")]
    assert ["Temporal Order", "SRNN", "20", str(pub.max_len), "0.1", format(pub.lr, "g"), "–",
            "–", "1/1"] in md_rows(out)
    assert "All cells complete." in out


@pytest.mark.parametrize("fmt", ["md", "latex", "csv"])
def test_out_writes_tables_and_figures_and_says_where(uri: str, tmp_path: Path, fmt: str,
                                                      capsys) -> None:
    out_dir = tmp_path / "report"
    assert main(["report", SPEC, "--tracking-uri", uri, "--format", fmt,
                 "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    names = [f"max-length{SUFFIX[fmt]}", "fig2-spectral-radius.png", "max-length-bars.png",
             f"{SPEC}-verdicts.md"]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(names)
    assert out.endswith(f"wrote 4 files under {out_dir}:\n"
                        + "".join(f"  {n}\n" for n in names))
    report = build_report(SPEC, tracking_uri=uri, use_cache=False, figures=True)
    table = report.tables[0]
    assert (out_dir / names[0]).read_text(encoding="utf-8") == table.render(fmt)
    assert table.render(fmt) in out
    for png in names[1:3]:
        assert (out_dir / png).read_bytes()[:4] == b"\x89PNG"
    verdicts = (out_dir / f"{SPEC}-verdicts.md").read_text(encoding="utf-8")
    assert verdicts == claims_markdown(report.claims) and "M-F2 · " in verdicts


def test_without_figures_the_figures_claim_is_listed_as_not_measured(uri: str, capsys) -> None:
    """The terminal report reads no history: M-F2, judged on Fig. 2, is named and says how
    to have it judged, so that every claim of the spec is listed either way."""
    assert main(["report", SPEC, "--tracking-uri", uri]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("- M-")]
    assert [line[2:6] for line in lines] == ["M-T1"] * 4 + ["M-F2"]
    assert lines[-1].startswith(f"- M-F2 · not measured — {max_length.FIG2_CLAIM}: ")
    assert "`ortho report --out DIR`" in lines[-1]


def test_pretrain_report(uri: str, capsys) -> None:
    assert main(["report", PRETRAIN_SPEC, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    pub = PRETRAIN["normal"]
    assert ["normal", "91.67%†", format(pub.success_rate, ".0%"), "22.64†", "23.64†",
            format(pub.mean_steps, ".2f")] in [row[:6] for row in md_rows(out)]


def test_exit_2_names_what_exists(uri: str, tmp_path: Path, capsys) -> None:
    def run(*argv: str) -> str:
        assert main(["report", *argv]) == 2
        return capsys.readouterr().err

    err = run("ff-mnist", "--tracking-uri", uri)
    assert "invalid spec" in err and f"{PRETRAIN_SPEC}, {SPEC}" in err
    err = run("manchev", "--tracking-uri", uri)  # a paper, not a spec: the page's command
    assert err == ("ortho report: invalid spec: expected one spec of a paper (manchev's: "
                   "orth-pretrain-convergence, synthetic-max-length, pixel-mnist, ff-mnist); "
                   "`ortho reproduce manchev` writes the paper's page (got 'manchev')\n")
    err = run(SPEC, "--sweep", "nope", "--tracking-uri", uri)
    assert "invalid sweep" in err and "sw-1 (cpu), sw-0 (smoke) (got 'nope')" in err
    empty = tmp_path / "empty-home"
    err = run(SPEC, "--home", str(empty))
    assert "invalid tracking_uri" in err and str(empty / "mlflow.db") in err
    assert not empty.exists()
    client = MlflowClient(tracking_uri=uri)
    parent = client.search_runs(
        [client.get_experiment_by_name(PRETRAIN_SPEC).experiment_id],
        "tags.`ortho.role` = 'sweep'")[0]
    client.delete_run(parent.info.run_id)
    err = run(PRETRAIN_SPEC, "--tracking-uri", uri)
    assert "invalid spec" in err and f"sweeps in this store: {SPEC} (got '{PRETRAIN_SPEC}')" in err
    for run_ in client.search_runs([e.experiment_id for e in client.search_experiments()],
                                   "tags.`ortho.role` = 'sweep'"):
        client.delete_run(run_.info.run_id)
    err = run(SPEC, "--tracking-uri", uri)
    assert "invalid tracking_uri" in err and "holds none" in err and uri in err


def test_a_spec_file_that_does_not_exist_is_named_so(uri: str, tmp_path: Path, capsys) -> None:
    """Not taken for the name of a spec the store lacks (``expected a spec with sweeps in
    this store ... (got 'nonexist')``): the path was mistyped, as ``ortho sweep run`` says."""
    missing = tmp_path / "nonexist.yaml"
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(missing), "--tracking-uri", uri])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"ortho report: error: argument spec: expected an existing YAML file (got '{missing}') "
        "(see ortho report --help)\n")
    (tmp_path / f"{SPEC}.yml").write_text("")  # an existing file's stem names its sweeps
    assert main(["report", str(tmp_path / f"{SPEC}.yml"), "--tracking-uri", uri]) == 0
    assert capsys.readouterr().out.startswith("### M Table I")


def test_ui_runs_mlflow_on_loopback_with_one_worker(store: Store, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    calls = []

    class Server:
        def __init__(self, argv: list[str], env: dict[str, str], **options: object) -> None:
            calls.append((argv, env, options))

        def wait(self) -> int:
            return 0

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(cli.subprocess, "Popen", Server)
    assert main(["ui", "--tracking-uri", store.uri, "--port", "5077"]) == 1  # ended by itself
    assert "the MLflow UI stopped by itself (exit status 0)" in capsys.readouterr().err
    (argv, env, options), = calls
    assert argv == [sys.executable, "-m", "mlflow", "ui", "--host", "127.0.0.1", "--port",
                    "5077", "--workers", "1", "--uvicorn-opts", "--log-level warning"]
    assert env["MLFLOW_BACKEND_STORE_URI"] == store.uri  # not on the command line
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert env["PYTHONWARNINGS"].endswith(cli.UI_WARNINGS)  # after any filters of the user
    assert options == {"process_group": 0}  # Ctrl-C reaches `ortho ui` only
    assert main(["ui", "--home", str(tmp_path / "nothing")]) == 2
    assert len(calls) == 1


def test_ctrl_c_stops_the_ui_and_its_server_with_one_line(store: Store,
                                                          tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the terminal's foreground process group) once the UI answers: exit
    status 130 and ``interrupted``, with no traceback of the server, no shutdown log and no
    starlette deprecation warning; the server is gone with the command."""
    port = free_port()
    log = tmp_path / "ui.err"
    with log.open("w") as err:
        ui = subprocess.Popen([sys.executable, "-m", "sweeps.cli", "ui", "--tracking-uri",
                               store.uri, "--port", str(port)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        _wait_until(lambda: _http_ok(f"http://127.0.0.1:{port}/health"), "ortho ui",
                    lambda: ui.poll() is None, log, START_TIMEOUT)
        started = log.read_text()
        os.killpg(ui.pid, signal.SIGINT)  # as a terminal sends Ctrl-C
        assert ui.wait(timeout=60) == 130
    finally:
        if ui.poll() is None:
            ui.terminate()  # `ortho ui` stops its server on SIGTERM
            ui.wait(timeout=60)
    printed = log.read_text()
    assert "Traceback" not in printed and "Warning" not in printed, printed
    assert printed[len(started):] == "ortho ui: interrupted\n"
    assert not _http_ok(f"http://127.0.0.1:{port}/health")


def test_ui_refuses_where_it_cannot_listen_before_starting_mlflow(
        store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A port out of range, a port in use, or a host that does not resolve is bad input (exit
    2 naming it); MLflow's server would print a traceback there and exit 0."""
    monkeypatch.setattr(cli.subprocess, "Popen", lambda *a, **k: pytest.fail("server started"))
    with pytest.raises(SystemExit) as exit_:
        main(["ui", "--tracking-uri", store.uri, "--port", "99999"])
    assert exit_.value.code == 2
    assert "argument --port: expected a port from 1 to 65535 (got '99999')" in \
        capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--tracking-uri", store.uri, "--port", str(port)]) == 2
        assert f"invalid port: expected a port free on 127.0.0.1 (address already in use) " \
               f"(got {port})" in capsys.readouterr().err
    assert main(["ui", "--tracking-uri", store.uri, "--host", "no-such-host.invalid"]) == 2
    assert "invalid host: expected an address or name of this machine" in \
        capsys.readouterr().err
    # an address no machine has (TEST-NET-1): the host is wrong, whatever the port
    assert main(["ui", "--tracking-uri", store.uri, "--host", "192.0.2.1"]) == 2
    assert capsys.readouterr().err == (
        "ortho ui: invalid host: expected an address or name of this machine (cannot assign "
        "requested address) (got '192.0.2.1')\n")


@pytest.mark.parametrize("command", [["report", "orth-pretrain-convergence"],
                                     ["reproduce", "manchev"]])
def test_an_out_folder_that_cannot_be_made_is_bad_input(command: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for out in (blocker, blocker / "below"):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--home", str(tmp_path), "--out", str(out)])
        assert exit_.value.code == 2
        assert (f"argument --out: expected a folder, or a path where one can be made (got "
                f"'{out}': {blocker} is a file)") in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]
    with pytest.raises(SystemExit) as exit_:  # writable to root, yet no folder can be made
        main([*command, "--home", str(tmp_path), "--out", "/proc/ortho-report"])
    assert exit_.value.code == 2
    assert ("argument --out: expected a folder" in (err := capsys.readouterr().err)
            and "(got '/proc/ortho-report': " in err and "Traceback" not in err)


@pytest.mark.parametrize("command", [["report", "orth-pretrain-convergence"],
                                     ["reproduce", "manchev"]])
@pytest.mark.parametrize("ui", ["127.0.0.1:5001", "ftp://host", "http://", "http://u:p@host",
                                "http://h:99999", "http://h:abc", "http://h:5000/#x",
                                "http://h:5000/?a=1"])
def test_a_ui_that_is_no_web_address_is_bad_input(command: list[str], ui: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--home", str(tmp_path), "--ui", ui])
    assert exit_.value.code == 2
    assert (f"argument --ui: expected the MLflow UI's address, http://HOST:PORT (got {ui!r})"
            in capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_report_links_its_page_to_the_ui_given(uri: str, tmp_path: Path) -> None:
    assert main(["report", "orth-pretrain-convergence", "--tracking-uri", uri, "--format",
                 "html", "--out", str(tmp_path), "--ui", "http://127.0.0.1:5001/"]) == 0
    page = (tmp_path / "orth-pretrain-convergence.html").read_text(encoding="utf-8")
    assert 'href="http://127.0.0.1:5001/#/experiments/' in page
    assert "127.0.0.1:5000" not in page


def test_the_cli_module_loads_no_heavy_library_before_a_command_runs() -> None:
    """``ortho`` builds its parser from ``analysis.cli``, so importing it must stay light."""
    code = ("import sys, analysis.cli; print(sorted(m for m in ('pandas', 'mlflow', "
            "'matplotlib', 'ray', 'analysis.report') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


# --- a real store: the smoke sweep of synthetic-max-length (``smoke_home``) --------------

def rule_key(run) -> tuple:
    """M Table I's choice rule, restated on raw MLflow runs."""
    m, p = run.data.metrics, run.data.params
    return (-m["max_seq_len_solved"], m.get("iters_to_solve", math.inf), float(p["lr"]),
            float(p["penalty"]), run.info.run_id)


@pytest.mark.slow
@pytest.mark.smoke_sweep(SPEC)
def test_report_of_a_real_smoke_sweep_matches_its_runs(smoke_home: Path, tmp_path: Path,
                                                       capsys) -> None:
    uri = f"sqlite:///{smoke_home / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(SPEC).experiment_id
    parent, = client.search_runs([exp], "tags.`ortho.role` = 'sweep'")
    sweep_id = parent.data.tags["ortho.sweep_id"]
    children = client.search_runs(
        [exp], f"tags.`ortho.sweep_id` = '{sweep_id}' and tags.`ortho.role` = 'configuration'")
    assert len(children) == int(parent.data.tags["ortho.n_configs"]) == 8

    runs = load_sweep(client, SPEC)
    # configurations finished per hour, as the sweep's command logged it and the page says
    per_hour = parent.data.metrics["configs_per_hour"]
    finished = sum(c.info.status == "FINISHED" for c in children)
    assert runs.sweep.per_hour == per_hour == pytest.approx(
        finished / parent.data.metrics["run_seconds"] * 3600)
    assert runs.sweep.run_seconds == parent.data.metrics["run_seconds"]
    wall = provenance_items(runs)["wall time"]
    said = f"; {per_hour:,.0f} configurations finished per hour by the command that ran it last ("
    assert said in wall and wall.endswith("s)")  # that command's wall time
    table = max_length.max_length_table(runs)
    prov = table.provenance
    assert (prov.sweep_id, prov.profile, prov.n_runs, prov.n_expected) == (
        sweep_id, "smoke", 8, 8)
    outcomes = [c.data.tags["ortho.outcome"] for c in children]
    assert {k: v for k, v in prov.outcomes.items() if v} == {
        o: outcomes.count(o) for o in set(outcomes)}
    ran = [row for row in table.rows if row[-1].text() != "not in profile"]
    assert len(table.rows) - len(ran) == 9  # the published problems the smoke profile skips
    rows = {row[1].value: [c.marked() for c in row] for row in ran}
    assert set(rows) == {"SRNN", "SRNN+OPEN", "SRNN+OINIT"}
    best = {}
    for variant, model in max_length.MODELS.items():
        mine = [c for c in children if c.data.params["variant"] == variant]
        best[variant] = min(mine, key=rule_key)
        want_t = int(best[variant].data.metrics["max_seq_len_solved"])
        assert rows[model][2] == str(want_t)
        assert rows[model][4] == format(float(best[variant].data.params["lr"]), "g")
        assert rows[model][6] == (format(float(best[variant].data.params["penalty"]), "g")
                                  if variant == "open" else "–")
        diverged = sum(c.data.tags["ortho.outcome"] == "diverged" for c in mine)
        assert rows[model][8] == f"{len(mine)}/{len(mine)}" + (
            f" ({diverged} diverged)" if diverged else "")
    assert table.incomplete() == []

    data, used, _ = max_length.fig2_data(runs, Histories(client, runs))
    assert used is not None and set(data["variant"]) == set(max_length.MODELS)  # every model
    for variant, run_id in data.groupby("variant")["run_id"].first().items():
        lengths = {m.step: m.value for m in client.get_metric_history(run_id, "seq_len")}
        for metric in max_length.FIG2_METRICS:
            series = data[(data["variant"] == variant) & (data["metric"] == metric)]
            logged = {m.step: m.value for m in client.get_metric_history(run_id, metric)}
            want = sorted((s, v) for s, v in logged.items() if lengths.get(s) == used)
            assert list(zip(series["step"], series["value"], strict=True)) == want

    out_dir = tmp_path / "report"
    assert main(["report", SPEC, "--home", str(smoke_home), "--out", str(out_dir)]) == 0
    assert f"wrote 4 files under {out_dir}" in capsys.readouterr().out
    assert (out_dir / "max-length.md").read_text(encoding="utf-8") == table.to_markdown()
