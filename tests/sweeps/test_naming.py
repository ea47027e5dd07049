"""Runs named for people (issue 15): a configuration's run is named by the keys that vary
within its sweep, in the papers' symbols, uniquely within the sweep and the same on resume;
a parent run by its spec and profile, described by the spec's description line."""

from __future__ import annotations

import io

import pytest

from ortho_core import experiments
from sweeps import contract, naming, tracking
from sweeps.plan import build_plan
from sweeps.runner import resume_sweep, run_sweep
from sweeps.searcher import SweepSearcher
from sweeps.spec import load_spec, resolve
from sweeps.studies import create_studies
from tests.sweeps.helpers import TOY_MODULE, child_runs, new_home, toy_ray, write_spec


def _names(spec_name: str, profile: str) -> dict[str, str]:
    plan = build_plan(resolve(load_spec(spec_name), profile))
    return {m.key: m.name for pack in plan.packs for m in pack}


def test_values_are_shown_short():
    assert [contract.format_value(v) for v in (0.01, 1.0, 1e-5, 2.5e10, 0.012345678, [20, 256],
                                             True, None)] == \
        ["0.01", "1", "1e-5", "2.5e10", "0.01235", "20,256", "true", "None"]


def test_a_shipped_sweep_names_each_run_by_what_varies_in_the_papers_symbols():
    """synthetic-max-length/cpu: α, λ and the variant vary (λ only where OPEN sets it); the
    two OPEN groups differ in a key only one sets (penalty_form), which names them apart; the
    fixed keys (task, hidden, T, ...) name nothing."""
    names = sorted(_names("synthetic-max-length", "cpu").values())
    assert len(names) == 18 and len(set(names)) == 18
    assert names[:3] == ["OINIT α=0.0001", "OINIT α=0.001", "OINIT α=0.01"]
    for lr in ("0.01", "0.001", "0.0001"):
        assert f"plain α={lr}" in names
        for penalty in ("1", "0.1"):
            assert f"OPEN α={lr} λ={penalty}" in names
            assert f"OPEN α={lr} λ={penalty} penalty_form=unsquared" in names
    assert not any(fixed in n for n in names for fixed in ("Temporal", "hidden", "T=", "["))


def test_every_problem_of_the_paper_profile_is_named_and_no_two_runs_alike():
    names = list(_names("synthetic-max-length", "paper").values())
    assert len(names) == 112 == len(set(names))
    assert "OPEN α=0.01 λ=0.0001 Adding" in names
    assert "OINIT α=0.1 Random Permutation" in names
    assert sum(n.endswith(" 3-bit Temporal Order") for n in names) == 28


GROUP_DEFAULT = """\
name: mine
experiment: synthetic
metric: {name: max_seq_len_solved, mode: max}
fixed: {hidden: 8, max_seq_len: 20, variant: open}
space: {lr: [0.01], penalty: [1.0, 0.1]}
groups:
  - fixed: {max_iters: 50}
  - fixed: {max_iters: 100, task: adding}
profiles: {smoke: {}, cpu: {}, paper: {}}
"""


def test_a_key_one_group_fixes_and_another_leaves_at_its_default_names_its_runs(tmp_path):
    """task is set by the second group only; the first trains synthetic's default
    (temporal order): task varies across the sweep, and the adding runs say so."""
    path = tmp_path / "mine.yaml"
    path.write_text(GROUP_DEFAULT)
    plan = build_plan(resolve(load_spec(str(path)), "smoke"))
    assert plan.varying == ("max_iters", "penalty", "task")
    assert sorted(m.name for pack in plan.packs for m in pack) == [
        "λ=0.1 max_iters=100 Adding", "λ=0.1 max_iters=50",
        "λ=1 max_iters=100 Adding", "λ=1 max_iters=50"]


class _Cell:
    def __init__(self, params: dict, optuna_space: tuple = ()) -> None:
        self.params, self.optuna_space = params, dict.fromkeys(optuna_space)


def test_a_defaulted_key_that_comes_with_a_variant_or_task_is_told_by_it():
    """penalty_form is unsquared in every OPEN cell and squared (the default) elsewhere: the
    variant tells it, so it does not vary; where OPEN has both forms, it does. A label
    (task) that varies only by its default varies whatever else tells it."""
    plain = {"variant": "plain"}
    cells = [_Cell(plain), _Cell({"variant": "open", "penalty_form": "unsquared"})]
    resolved = [{**plain, "penalty_form": "squared"}, cells[1].params]
    assert contract.varying_keys(cells) == ("variant",)
    assert contract.varying_keys(cells, resolved) == ("variant",)
    cells.append(_Cell({"variant": "open"}))
    resolved.append({"variant": "open", "penalty_form": "squared"})
    assert contract.varying_keys(cells, resolved) == ("variant", "penalty_form")
    labelled = [_Cell({"max_iters": 50}), _Cell({"max_iters": 100, "task": "adding"})]
    told = [{"max_iters": 50, "task": "temporal_order"}, {"max_iters": 100, "task": "adding"}]
    assert contract.varying_keys(labelled) == ("max_iters",)
    assert contract.varying_keys(labelled, told) == ("max_iters", "task")
    # a key the cells resolve alike (a group writes out the default) does not vary
    same = [_Cell({"variant": "open"}), _Cell({"variant": "oinit", "pretrain_lr": 0.1})]
    assert contract.varying_keys(same, [{"variant": "open", "pretrain_lr": 0.1},
                                      {"variant": "oinit", "pretrain_lr": 0.1}]) == ("variant",)


def test_repeats_that_differ_only_by_seed_read_seed_n():
    names = set(_names("spectral-temporal-gradients", "smoke").values())
    assert {"ρ=0.8 seed=0", "ρ=0.8 seed=1"} <= names and len(names) == 10


def test_names_that_still_collide_get_their_trial_keys_first_characters():
    keys = ("variant", "lr")
    named = [("aaaaaa11", {"variant": "open", "lr": 0.012345671}),
             ("bbbbbb22", {"variant": "open", "lr": 0.012345679}),
             ("cccccc33", {"variant": "oinit", "lr": 0.1})]
    assert naming.unique_names(named, keys) == {
        "aaaaaa11": "OPEN α=0.01235 [aaaaaa]", "bbbbbb22": "OPEN α=0.01235 [bbbbbb]",
        "cccccc33": "OINIT α=0.1"}


def test_a_resumed_plan_names_what_remains_as_the_first_plan_did():
    spec = resolve(load_spec("synthetic-max-length"), "cpu")
    first = {m.key: m.name for pack in build_plan(spec).packs for m in pack}
    finished = dict.fromkeys(list(first)[::2], 1.0)
    rest = {m.key: m.name for pack in build_plan(spec, finished).packs for m in pack}
    assert rest == {k: v for k, v in first.items() if k not in finished} and len(rest) == 9


def test_optuna_members_are_named_by_their_cell_and_chosen_values(tmp_path, monkeypatch):
    """Optuna chooses x in each of two cells (steps 1 and 2): both keys vary, and each
    member's name holds its own x (to four digits) and its key's first characters."""
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    path = write_spec(tmp_path, fixed={}, space={"steps": [1, 2],
                                                 "x": {"low": 0.0, "high": 1.0}},
                      search={"kind": "optuna", "sampler": "random", "n_trials": 2, "seed": 0})
    spec = resolve(load_spec(str(path)), "smoke")
    plan = build_plan(spec)
    assert plan.varying == ("steps", "x")
    searcher = SweepSearcher(plan, "score", "max",
                             create_studies(None, "sweep", plan, spec.optuna, spec.mode))
    members = []
    for i in range(4):
        members += searcher.suggest(f"t{i}")["members"]
        searcher.on_trial_start(f"t{i}")
    assert [m["name"] for m in members] == [
        f"steps={m['params']['steps']} x={m['params']['x']:.4g} [{m['key'][:6]}]"
        for m in members]
    assert len({m["name"] for m in members}) == 4


@pytest.mark.slow
@pytest.mark.usefixtures(toy_ray.__name__)
def test_mlflow_shows_the_names_and_a_resume_keeps_them(tmp_path):
    """A toy sweep (x ∈ {0.1, 0.4}; x = 0.4 fails at its first attempt, by a key only its
    group sets, which the other leaves at its default 0): each child run is named by x, and
    x = 0.4 by that key too (it varies by value), the trial key stays a tag, the parent is
    ``smoke · <id>``, described by the spec's description, profile and sweep id; the
    resume's new run of the failed configuration carries the same name."""
    counters = tmp_path / "counters"
    counters.mkdir()
    spec = write_spec(tmp_path, fixed={"steps": 1, "counter_dir": str(counters)}, space={},
                      groups=[{"fixed": {"x": 0.1}}, {"fixed": {"x": 0.4, "fail": 1}}],
                      max_failures=0, pack_size=1,
                      description="toy sweep: x against seed")
    home = new_home(tmp_path)
    first = run_sweep(str(spec), "smoke", home=home, stream=io.StringIO())
    runs = {r.info.run_name: r for r in child_runs(home, first.sweep_id)}
    assert {n: r.info.status for n, r in runs.items()} == {"x=0.1": "FINISHED",
                                                          "x=0.4 fail=1": "FAILED"}
    tracker = tracking.tracker(tracking.tracking_uri(None, home))
    record = tracker.find_sweep(first.sweep_id)
    assert record is not None
    parent = tracker.client.get_run(record.ref.parent_run_id)
    assert parent.info.run_name == f"smoke · {first.sweep_id.rsplit('-', 1)[1]}"
    assert parent.data.tags[contract.NOTE] == (
        f"toy sweep: x against seed\n\nprofile `smoke`, sweep `{first.sweep_id}`")

    final = resume_sweep(first.sweep_id, home=home, stream=io.StringIO())
    assert (final.done, final.failed) == (2, 0)
    after = {r.info.run_name: r for r in child_runs(home, first.sweep_id)}
    assert sorted(after) == sorted(runs)
    for name, run in after.items():
        assert run.data.tags[tracking.TRIAL_KEY] == runs[name].data.tags[tracking.TRIAL_KEY]
        assert (run.info.run_id == runs[name].info.run_id) == (name == "x=0.1")
