"""Optuna studies in a storage beside the MLflow store: where it is, what a resume sets right
in it (trials left RUNNING by a dead driver, points to ask again, the budget spent), and a
packed Optuna sweep that a user can open with ``optuna.load_study``."""

from __future__ import annotations

import io
import json
import logging
import re

import optuna
import pytest

from analysis.cli import ui_command
from analysis.html import provenance_items
from analysis.report import build_report
from analysis.store import open_store
from ortho_core import experiments
from ortho_core.errors import ConfigError
from ortho_core.reporting import Outcome, Result
from sweeps import contract, tracking
from sweeps.cli import main
from sweeps.lookup import sweep_status
from sweeps.plan import build_plan
from sweeps.runner import resume_sweep, run_sweep
from sweeps.searcher import SweepSearcher
from sweeps.spec import load_spec, resolve
from sweeps.status import format_status
from sweeps.studies import (
    INTERRUPTED_ATTR,
    KEY_ATTR,
    create_studies,
    resume_studies,
    storage_url,
    study_name,
    sweep_storage,
)
from sweeps.testing import track
from sweeps.tune_run import FitEnd
from tests.sweeps.helpers import TOY_MODULE, child_runs, new_home, store, toy_ray, write_spec

STATE = optuna.trial.TrialState


@pytest.fixture(autouse=True)
def _toy(monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    monkeypatch.delenv("ORTHO_OPTUNA_STORAGE", raising=False)


def test_the_storage_is_beside_the_embedded_store_or_named(tmp_path, monkeypatch):
    assert storage_url(None, f"sqlite:///{tmp_path}/mlflow.db") == (
        f"sqlite:///{tmp_path}/optuna.db")
    assert storage_url("postgresql://u:pw@db/optuna", "http://mlflow:5000") == (
        "postgresql+psycopg2://u:pw@db/optuna")  # the driver installed, not psycopg 3
    assert storage_url("postgresql+psycopg://db/optuna", "http://mlflow:5000") == (
        "postgresql+psycopg://db/optuna")  # a driver the user names is kept
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORTHO_OPTUNA_STORAGE", "sqlite:///studies.db")
    assert storage_url(None, "http://mlflow:5000") == f"sqlite:///{tmp_path}/studies.db"
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("ORTHO_HOME", str(tmp_path / "a-file"))  # no home, and none needed
    assert storage_url(None, "http://mlflow:5000") == f"sqlite:///{tmp_path}/studies.db"
    monkeypatch.delenv("ORTHO_OPTUNA_STORAGE")
    with pytest.raises(ConfigError, match="--optuna-storage") as err:
        storage_url(None, "http://u:secret@mlflow:5000")
    assert err.value.field == "optuna_storage" and "secret" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        create_studies("nosuchdb://x", "s", build_plan(_spec(tmp_path)), _spec(tmp_path).optuna,
                       "max")
    assert err.value.field == "optuna_storage"


def test_a_masked_recorded_storage_needs_the_real_url(monkeypatch):
    monkeypatch.delenv("ORTHO_OPTUNA_STORAGE", raising=False)
    recorded = "postgresql://ortho:***@db.internal/optuna"
    with pytest.raises(ConfigError, match="--optuna-storage") as err:
        sweep_storage(recorded, None, "20261126-000000-abcd", "")
    assert err.value.field == "optuna_storage"
    given = "postgresql://ortho:secret@127.0.0.1:5433/optuna"
    opened = "postgresql+psycopg2://ortho:secret@127.0.0.1:5433/optuna"  # the driver installed
    assert sweep_storage(recorded, given, "20261126-000000-abcd", "") == opened
    monkeypatch.setenv("ORTHO_OPTUNA_STORAGE", given)
    assert sweep_storage(recorded, None, "20261126-000000-abcd", "") == opened
    assert sweep_storage("postgresql://db.internal/optuna", "", "x", "") == opened


def test_a_moved_home_finds_its_studies_beside_its_store(tmp_path, monkeypatch):
    """The recorded storage is a SQLite file that is gone (the home was moved or copied):
    ``optuna.db`` beside the store as it is now is used; with neither, the one-line refusal
    names the recorded file, and nothing is created."""
    monkeypatch.delenv("ORTHO_OPTUNA_STORAGE", raising=False)
    recorded = f"sqlite:///{tmp_path}/old/optuna.db"
    home = tmp_path / "new"
    home.mkdir()
    uri = f"sqlite:///{home}/mlflow.db"
    with pytest.raises(ConfigError, match="does not exist") as err:
        sweep_storage(recorded, None, "s", uri)
    assert err.value.field == "optuna_storage" and f"{tmp_path}/old/optuna.db" in str(err.value)
    assert not (home / "optuna.db").exists()
    (home / "optuna.db").touch()
    assert sweep_storage(recorded, None, "s", uri) == f"sqlite:///{home}/optuna.db"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "optuna.db").touch()
    assert sweep_storage(recorded, None, "s", uri) == recorded  # where it was recorded first


def _spec(tmp_path, n_trials=3, pack_size=3, **fields):
    path = write_spec(tmp_path, fixed={"steps": 1}, space={"x": {"low": 0.0, "high": 1.0}},
                      pack_size=pack_size, search={"kind": "optuna", "sampler": "random",
                                                   "n_trials": n_trials, "seed": 0}, **fields)
    return resolve(load_spec(str(path)), "smoke")


def test_a_resume_ends_running_trials_and_asks_unfinished_points_again(tmp_path):
    """A driver died with a pack of 3 in flight, one member's run FINISHED in MLflow and one
    FAILED: the resume tells the first trial its value, fails the other two (the one whose
    run was cut short marked interrupted) and queues their points first; resuming again
    queues nothing twice."""
    spec = _spec(tmp_path, n_trials=5)
    url = f"sqlite:///{tmp_path}/optuna.db"
    plan = build_plan(spec)
    searcher = SweepSearcher(plan, "score", "max", create_studies(url, "s1", plan,
                                                                  spec.optuna, "max"))
    members = searcher.suggest("a")["members"]
    assert len(members) == 3  # 5 trials in packs of at most 3: 3 and 2
    done, *lost = members
    values = {done["key"]: 7.0}

    for _ in range(2):
        opened = resume_studies(url, "s1", plan, spec.optuna, values, {lost[1]["key"]})
        assert opened.done == {0: 1} and opened.known == values
    study = optuna.load_study(study_name=study_name("s1", 0), storage=url)
    trials = study.get_trials()
    assert [t.state for t in trials] == [STATE.COMPLETE, STATE.FAIL, STATE.FAIL,
                                         STATE.WAITING, STATE.WAITING]
    assert [t.user_attrs.get(INTERRUPTED_ATTR, False) for t in trials[:3]] == [
        False, True, False]
    assert trials[0].value == 7.0 and trials[0].user_attrs[KEY_ATTR] == done["key"]

    resumed = build_plan(spec, done=opened.done)
    again = SweepSearcher(resumed, "score", "max", opened).suggest("b")["members"]
    assert [m["key"] for m in again[:2]] == [m["key"] for m in lost]  # same points, first
    assert len(again) == 2 and again[1]["params"]["x"] == lost[1]["params"]["x"]
    assert resumed.remaining(0) == 4 and resumed.n_tune_trials == 2


def _one_pack_of_three(tmp_path, monkeypatch, ends: list[str], interrupted: bool,
                       errored: bool = False, optuna_storage: str | None = None):
    """An Optuna sweep of one pack of 3 whose Tune part is replaced: the searcher's pack is
    asked, member i's run tracked and ended ``ends[i]`` with score 7 + i (``"none"``: never
    claimed), then (``errored``) Tune tells the searcher the trial errored, and Tune's fit
    returns ``interrupted``; the studies in ``optuna_storage`` (default: beside the store).
    The final progress, the study's trials, the members asked, the sweep's configuration runs
    by trial key, what the sweep printed and its home."""
    asked = []

    def one_pack(spec, plan, ref, uri, store, run_name, max_concurrent, progress, stream,
                 run_tags, studies, begun, trial_env) -> FitEnd:
        searcher = SweepSearcher(plan, spec.metric, spec.mode, studies)
        members = searcher.suggest("a")["members"]
        searcher.on_trial_start("a")
        tracker = tracking.tracker(uri)
        for i, member in enumerate(members):
            if ends[i] != "none":
                track(tracker, ref, member["key"], member["params"], end=ends[i],
                      result=Result(Outcome.SOLVED, {"score": 7.0 + i}))
        if errored:  # as Tune's loop does once the trial's retries are spent: no result
            searcher.on_trial_complete("a", error=True)
        asked.extend(members)
        return FitEnd(interrupted, searcher.errored)

    monkeypatch.setattr("sweeps.runner.execute", one_pack)
    path = write_spec(tmp_path, fixed={"steps": 1}, space={"x": {"low": 0.0, "high": 1.0}},
                      pack_size=3, search={"kind": "optuna", "sampler": "random",
                                           "n_trials": 3, "seed": 0})
    home = new_home(tmp_path)
    out = io.StringIO()
    final = run_sweep(str(path), "smoke", home=home, stream=out, max_concurrent=1,
                      optuna_storage=optuna_storage)
    uri = tracking.tracking_uri(None, home)
    trials = optuna.load_study(study_name=study_name(final.sweep_id, 0),
                               storage=storage_url(optuna_storage, uri)).trials
    return final, trials, asked, _runs(home, final.sweep_id), out.getvalue(), home


def _runs(home, sweep_id: str) -> dict:
    """The configuration runs of sweep ``sweep_id`` in ``home``, by trial key."""
    tracker = tracking.tracker(tracking.tracking_uri(None, home))
    return {r.data.tags[tracking.TRIAL_KEY]: r for r in tracker.configurations(
        tracker.find_sweep(sweep_id).ref)}


@pytest.mark.usefixtures(toy_ray.__name__)
def test_an_interrupted_sweep_leaves_no_trial_running(tmp_path, monkeypatch):
    """Ctrl-C while a pack of 3 trains, one member's run already FINISHED in MLflow (a member
    that ends before its pack): before the sweep exits, that trial is told its value and the
    other two are failed, as Optuna's ``optimize`` fails a trial a Ctrl-C stops, so the
    study shows what MLflow holds until a resume."""
    final, trials, asked, *_ = _one_pack_of_three(tmp_path, monkeypatch,
                                                  ["finished", "killed", "killed"],
                                                  interrupted=True)  # as fit returns on Ctrl-C
    assert final.state == "interrupted" and len(asked) == 3
    assert [t.state for t in trials] == [STATE.COMPLETE, STATE.FAIL, STATE.FAIL]
    assert [t.user_attrs.get(INTERRUPTED_ATTR, False) for t in trials] == [False, True, True]
    assert trials[0].value == 7.0
    assert [t.user_attrs[KEY_ATTR] for t in trials] == [m["key"] for m in asked]


@pytest.mark.usefixtures(toy_ray.__name__)
def test_packs_that_finish_after_a_ctrl_c_are_told_to_their_study(tmp_path, monkeypatch):
    """Ctrl-C during the last pack: Tune lets it finish, so the sweep ends FINISHED with
    every run FINISHED in MLflow, but Tune, stopping, no longer reports those trials to the
    searcher. Before the sweep exits, each of their Optuna trials is told its run's value,
    not left RUNNING (a user review found half a study RUNNING after such a sweep)."""
    final, trials, *_ = _one_pack_of_three(tmp_path, monkeypatch, ["finished"] * 3,
                                           interrupted=False)  # every trial ended
    assert final.state == "finished" and final.done == 3
    assert [(t.state, t.value) for t in trials] == [(STATE.COMPLETE, 7.0 + i) for i in range(3)]


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_pack_that_errors_after_its_endings_tells_its_study_what_mlflow_holds(
        tmp_path, monkeypatch):
    """A pack's trial errors, its retries spent, after two of its members' runs ended
    FINISHED (its actor lost between the endings and its last report): Tune reports no
    result, yet those two trials are told their runs' values, and only the member whose run
    failed is FAIL (told at once, every member was FAIL beside its FINISHED run, in a sweep
    that ends FINISHED, so no resume would mend it)."""
    final, trials, asked, *_ = _one_pack_of_three(tmp_path, monkeypatch,
                                                  ["finished", "finished", "failed"],
                                                  interrupted=False, errored=True)
    assert final.state == "finished" and (final.done, final.failed) == (3, 1)
    assert [(t.state, t.value) for t in trials] == [
        (STATE.COMPLETE, 7.0), (STATE.COMPLETE, 8.0), (STATE.FAIL, None)]
    assert [t.user_attrs[KEY_ATTR] for t in trials] == [m["key"] for m in asked]
    assert INTERRUPTED_ATTR not in trials[2].user_attrs  # its run failed: a failure


@pytest.mark.usefixtures(toy_ray.__name__)
def test_members_of_a_pack_that_errored_before_claiming_get_failed_runs(
        tmp_path, monkeypatch):
    """A pack's trial dies before two of its members claimed a run (its actor lost), retries
    spent: each gets a failed run tagged as its trial would have tagged it, so the sweep
    counts them failed and says how to resume, as for a grid pack (before, MLflow held no
    run of them and the sweep ended "finished" with exit status 0)."""
    final, trials, asked, runs, out, _ = _one_pack_of_three(
        tmp_path, monkeypatch, ["finished", "none", "none"], interrupted=False, errored=True)
    assert final.state == "finished" and (final.done, final.failed) == (3, 2)
    assert "resume with: ortho sweep resume" in out
    assert [(t.state, t.value) for t in trials] == [
        (STATE.COMPLETE, 7.0), (STATE.FAIL, None), (STATE.FAIL, None)]
    assert not any(INTERRUPTED_ATTR in t.user_attrs for t in trials)
    for member in asked[1:]:
        run = runs[member["key"]]
        assert (run.info.status, run.data.tags[tracking.OUTCOME]) == ("FAILED", "failed")
        assert json.loads(run.data.tags[tracking.OPTUNA_PARAMS]) == member["optuna"]
        assert run.data.tags[contract.RUN_NAME] == member["name"]


@pytest.mark.usefixtures(toy_ray.__name__)
def test_an_errored_pack_is_failed_not_interrupted_when_a_ctrl_c_follows(tmp_path, monkeypatch):
    """A pack errors before two members claimed runs, then a Ctrl-C stops the sweep: their
    trials are FAIL without the interrupted mark (their trial failed; a resume asks their
    points again all the same, and gives them no failed run meanwhile)."""
    final, trials, _, runs, *_ = _one_pack_of_three(
        tmp_path, monkeypatch, ["finished", "none", "none"], interrupted=True, errored=True)
    assert final.state == "interrupted" and len(runs) == 1
    assert [(t.state, INTERRUPTED_ATTR in t.user_attrs) for t in trials] == [
        (STATE.COMPLETE, False), (STATE.FAIL, False), (STATE.FAIL, False)]


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_refused_resume_deletes_no_run(tmp_path, monkeypatch):
    """A resume refused for a storage that holds none of the sweep's studies (a mistyped
    --optuna-storage) leaves the sweep's failed runs, their tracebacks with them, as they
    were, and creates no empty SQLite file: every check comes before a run is deleted."""
    final, _, asked, before, *_, home = _one_pack_of_three(
        tmp_path, monkeypatch, ["finished", "failed", "failed"], interrupted=False)
    assert (final.done, final.failed) == (3, 2)
    elsewhere = tmp_path / "elsewhere.db"
    with pytest.raises(ConfigError) as err:
        resume_sweep(final.sweep_id, home=home, optuna_storage=f"sqlite:///{elsewhere}",
                     stream=io.StringIO())
    assert err.value.field == "optuna_storage" and not elsewhere.exists()
    after = _runs(home, final.sweep_id)
    assert {k: r.info.status for k, r in after.items()} == {
        m["key"]: s for m, s in zip(asked, ["FINISHED", "FAILED", "FAILED"], strict=True)}
    assert {r.info.run_id for r in after.values()} == {r.info.run_id for r in before.values()}


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_resume_continues_the_studies_where_the_sweep_kept_them(tmp_path, monkeypatch):
    """A sweep run with --optuna-storage elsewhere is resumed without it: the resume opens
    the storage the parent run recorded (as ``ortho sweep studies`` does), asks the two
    failed points again first, in one pack, and tells the same study their new endings (the
    replaced Tune part ends the first FINISHED, score 7, the second failed again)."""
    url = f"sqlite:///{tmp_path}/studies/kept.db"
    (tmp_path / "studies").mkdir()
    final, _, asked, _, _, home = _one_pack_of_three(
        tmp_path, monkeypatch, ["finished", "failed", "failed"], interrupted=False,
        optuna_storage=url)
    assert not (home / "optuna.db").exists()
    resumed = resume_sweep(final.sweep_id, home=home, stream=io.StringIO(), max_concurrent=1)
    assert (resumed.state, resumed.done, resumed.failed) == ("finished", 3, 1)
    study = optuna.load_study(study_name=study_name(final.sweep_id, 0), storage=url)
    assert [(t.user_attrs[KEY_ATTR], t.state, t.value) for t in study.trials[3:]] == [
        (asked[1]["key"], STATE.COMPLETE, 7.0), (asked[2]["key"], STATE.FAIL, None)]


@pytest.mark.cluster
def test_a_storage_that_refuses_the_password_is_one_line_naming_it(tmp_path, postgres):
    """What the database said, on one line (not SQLAlchemy's link to its docs after a blank
    line), the password masked."""
    url = postgres.create_database("studies_refused").replace(postgres.password, "not-it")
    spec = _spec(tmp_path)
    with pytest.raises(ConfigError) as err:
        create_studies(url, "s", build_plan(spec), spec.optuna, "max")
    assert err.value.field == "optuna_storage"
    assert str(err.value).endswith(f'password authentication failed for user "{postgres.user}")'
                                   f" (got '{url.replace('not-it', '***')}')")
    assert "\n" not in str(err.value)


def test_a_missing_study_is_refused_naming_the_storage(tmp_path):
    spec = _spec(tmp_path)
    with pytest.raises(ConfigError, match="cell-0") as err:
        resume_studies(f"sqlite:///{tmp_path}/optuna.db", "nosuch", build_plan(spec),
                       spec.optuna, {})
    assert err.value.field == "optuna_storage"


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_packed_optuna_sweep_tracks_each_member_and_its_study(tmp_path, monkeypatch, caplog):
    """Two cells, 4 trials each in packs of 2: 8 child runs with their own trial keys, and
    studies in HOME/optuna.db that load_study opens, one COMPLETE trial per member holding
    the member's own score. The sweep's first line and its status name the storage and the
    studies, and its report names the search; Optuna's own line per study created is not
    printed."""
    monkeypatch.delenv("ORTHO_TRACKING_URI", raising=False)
    optuna.logging.set_verbosity(optuna.logging.INFO)
    optuna_logger = logging.getLogger("optuna")  # it does not propagate to the root
    monkeypatch.setattr(optuna_logger, "handlers", [*optuna_logger.handlers, caplog.handler])
    path = write_spec(tmp_path, fixed={}, space={"steps": [1, 2], "x": {"low": 0, "high": 1}},
                      pack_size=2, search={"kind": "optuna", "sampler": "tpe", "n_trials": 4,
                                           "seed": 1})
    home = new_home(tmp_path)
    out = io.StringIO()
    final = run_sweep(str(path), "smoke", home=home, stream=out)
    assert "8 configurations in 4 trials" in out.getvalue()
    runs = child_runs(home, final.sweep_id)
    assert final.done == len(runs) == 8 and len({r.data.tags[tracking.TRIAL_KEY]
                                                 for r in runs}) == 8
    url = f"sqlite:///{home}/optuna.db"
    parent = store(home).client.get_run(store(home).find_sweep(final.sweep_id).ref.parent_run_id)
    assert parent.data.tags[contract.OPTUNA_STORAGE] == url
    assert parent.data.tags[contract.OPTUNA_SAMPLER] == "tpe"
    report = build_report("toy", home=home)
    line = report.tables[0].provenance.line()
    assert "8 configurations of 8 expected" in line
    assert re.search(r"\) · Optuna TPE, 4 trials in each of 2 cells"
                     r"( · git [0-9a-f]{12}( with uncommitted changes)?)?$", line), line
    assert provenance_items(report.runs)["search"] == (
        f"Optuna TPE, 4 trials in each of 2 cells; its studies are in {url} (listed by `ortho "
        f"sweep studies {final.sweep_id}`)")
    where = (f"Optuna studies in {url}, one study per cell, named {final.sweep_id}/cell-N "
             "for cell N = 0, 1, …")
    assert where in out.getvalue().splitlines()[0]
    status = format_status(sweep_status(home=home))
    assert (f"  Optuna studies: {url}, one study per cell, named {final.sweep_id}/cell-N "
            "for cell N = 0, 1, … "
            f"(ortho sweep studies {final.sweep_id} shows them)") in status.splitlines()
    assert not [r.getMessage() for r in caplog.records
                if r.name.startswith("optuna") and r.levelno < logging.WARNING]
    for cell in (0, 1):
        study = optuna.load_study(study_name=f"{final.sweep_id}/cell-{cell}", storage=url)
        told = {t.user_attrs[KEY_ATTR]: (t.params["x"], t.value) for t in study.trials}
        assert [t.state for t in study.trials] == [STATE.COMPLETE] * 4
        mine = [r for r in runs if r.data.tags[tracking.CELL] == str(cell)]
        assert {r.data.tags[tracking.TRIAL_KEY]: (
            json.loads(r.data.tags[tracking.OPTUNA_PARAMS])["x"],
            pytest.approx(10 * float(r.data.params["x"]))) for r in mine} == told


@pytest.mark.cluster
@pytest.mark.usefixtures(toy_ray.__name__)
def test_runs_and_studies_in_postgresql_by_the_urls_users_write(tmp_path, postgres, capsys,
                                                                 monkeypatch):
    """A cluster's sweep tracks into PostgreSQL and keeps its studies there, both named as
    users write them (``postgresql://user:password@host/db``, no driver: SQLAlchemy 2.1 would
    take psycopg 3, which is not installed). The sweep finishes; the parent run records the
    studies' URL with psycopg2 named and the password masked, and that URL, the password given
    back, opens the study in ``optuna.load_study``; ``ortho sweep studies`` lists it. The
    artifacts go under the home, not into ``./mlruns`` of the working directory (MLflow's
    default for a database tracked directly), and no file there holds the password."""
    def bare(uri: str) -> str:
        return uri.replace("postgresql+psycopg2://", "postgresql://")

    runs_url = bare(postgres.create_database("bare_url_runs"))
    studies_url = bare(postgres.create_database("bare_url_studies"))
    path = write_spec(tmp_path, fixed={"steps": 1}, space={"x": {"low": 0.0, "high": 1.0}},
                      pack_size=2, search={"kind": "optuna", "sampler": "tpe", "n_trials": 4,
                                           "seed": 0})
    monkeypatch.chdir(tmp_path)
    final = run_sweep(str(path), "smoke", home=tmp_path / "home", tracking_uri=runs_url,
                      optuna_storage=studies_url, stream=io.StringIO())
    assert final.state == "finished" and final.done == 4
    assert not (tmp_path / "mlruns").exists()
    assert (tmp_path / "home" / "artifacts" / "toy").is_dir()
    # no file under the home (shared by a cluster's nodes) holds the password: not Tune's
    # state either, which pickles the searcher
    assert (tmp_path / "home" / "ray").is_dir()
    assert not [f for f in (tmp_path / "home").rglob("*")
                if f.is_file() and postgres.password.encode() in f.read_bytes()]

    t = tracking.tracker(runs_url)
    record = t.find_sweep(final.sweep_id)
    runs = t.client.search_runs([record.ref.experiment_id],
                                f"tags.`{contract.PARENT}` = '{record.ref.parent_run_id}'")
    keys = {r.data.tags[tracking.TRIAL_KEY] for r in runs}
    assert len(keys) == 4
    recorded = t.client.get_run(record.ref.parent_run_id).data.tags[contract.OPTUNA_STORAGE]
    opened = contract.database_url(studies_url)
    assert opened.startswith("postgresql+psycopg2://")
    assert recorded == tracking.redact(opened) and postgres.password not in recorded
    study = optuna.load_study(study_name=study_name(final.sweep_id, 0),
                              storage=recorded.replace(contract.MASK, postgres.password))
    assert {tr.user_attrs[KEY_ATTR] for tr in study.trials} == keys
    assert [tr.state for tr in study.trials] == [STATE.COMPLETE] * 4

    reader = open_store(runs_url)  # `ortho report` and `ortho ui` open the runs too
    assert len(reader.search_runs([record.ref.experiment_id])) == 5  # the parent and 4
    assert ui_command(runs_url, "127.0.0.1", 5000)[1]["MLFLOW_BACKEND_STORE_URI"] == (
        contract.database_url(runs_url))

    capsys.readouterr()
    assert main(["sweep", "studies", final.sweep_id, "--tracking-uri", runs_url,
                 "--optuna-storage", studies_url]) == 0
    assert "cell-0: 4 trials (4 complete)" in capsys.readouterr().out


def test_a_cell_s_sampler_seed_stays_within_32_bits():
    """The spec's seed plus the cell's index: the last cells of a seed near 2³² - 1 wrap
    around rather than reach NumPy's ValueError."""
    from ortho_core.config import MAX_SEED
    from sweeps.spec.schema import OptunaSettings
    from sweeps.studies import _seed

    settings = OptunaSettings(sampler="tpe", n_trials=4, seed=MAX_SEED - 1)
    assert [_seed(settings, cell, 0) for cell in range(3)] == [MAX_SEED - 1, MAX_SEED, 0]
    assert 0 <= _seed(settings, 2, 1) <= MAX_SEED
