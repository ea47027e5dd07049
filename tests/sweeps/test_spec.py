"""Sweep specs: grid expansion, groups, profiles, trial keys, the shipped specs, and bad specs
reported with the right field and line before any work starts."""

from __future__ import annotations

import collections
import importlib.util
import pickle
from pathlib import Path

import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

import sweeps
from ortho_core import experiments
from ortho_core.errors import ConfigError
from sweeps.spec import (
    PROFILES,
    SpecError,
    available_specs,
    expand_resolved,
    load_spec,
    resolve,
    trial_key,
)

BASE = """\
name: t
experiment: synthetic
description: a test spec
metric: {name: max_seq_len_solved, mode: max}
fixed:
  hidden: 8
  max_iters: 10
space:
  task: [temporal_order, adding]
  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}
groups:
  - fixed: {variant: plain}
  - fixed: {variant: open}
    space: {penalty: [1.0, 0.1]}
  - fixed: {variant: oinit, pretrain_lr: 0.1}
repeats: 1
seed: 0
profiles:
  smoke: {fixed: {task: adding}, repeats: 2}
  cpu: {space: {lr: [0.01]}, pack_size: 4}
  paper: {}
"""


def write(tmp_path: Path, text: str, name: str = "t") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def cells_of(tmp_path: Path, text: str, profile: str = "paper") -> list:
    return resolve(load_spec(write(tmp_path, text)), profile).cells()


# ---------------------------------------------------------------- expansion


def test_grid_is_the_cartesian_product_per_group(tmp_path):
    cells = cells_of(tmp_path, BASE)
    # 2 tasks x 3 rates x (plain + open x 2 penalties + oinit)
    assert len(cells) == 2 * 3 * (1 + 2 + 1)
    seen = collections.Counter(
        (c.params["variant"], c.params.get("penalty")) for c in cells)
    assert seen == {("plain", None): 6, ("open", 1.0): 6, ("open", 0.1): 6, ("oinit", None): 6}
    rates = sorted({c.params["lr"] for c in cells})
    assert rates == [0.001, 0.01, 0.1]
    expected = {(t, lr, v, p) for t in ("temporal_order", "adding") for lr in rates
                for v, p in (("plain", None), ("open", 1.0), ("open", 0.1), ("oinit", None))}
    assert {(c.params["task"], c.params["lr"], c.params["variant"], c.params.get("penalty"))
            for c in cells} == expected


def test_conditional_groups_keep_their_keys_to_themselves(tmp_path):
    for cell in cells_of(tmp_path, BASE):
        assert ("penalty" in cell.params) == (cell.params["variant"] == "open")
        assert ("pretrain_lr" in cell.params) == (cell.params["variant"] == "oinit")
        assert cell.params["hidden"] == 8 and cell.params["max_iters"] == 10
        assert cell.optuna_space == {}


def test_repeats_expand_seeds_and_share_the_data_seed(tmp_path):
    text = BASE.replace("repeats: 1\nseed: 0", "repeats: 3\nseed: 7")
    cells = cells_of(tmp_path, text)
    assert len(cells) == 24 * 3
    for i in range(0, len(cells), 3):
        block = cells[i:i + 3]
        assert [c.params["seed"] for c in block] == [7, 8, 9]
        assert {c.params["data_seed"] for c in block} == {7}
        assert all({k: v for k, v in c.params.items() if k != "seed"}
                   == {k: v for k, v in block[0].params.items() if k != "seed"} for c in block)


def test_a_fixed_data_seed_is_kept(tmp_path):
    cells = cells_of(tmp_path, BASE.replace("  hidden: 8\n", "  hidden: 8\n  data_seed: 5\n"))
    assert {c.params["data_seed"] for c in cells} == {5}


def test_group_keys_override_the_top_level(tmp_path):
    text = BASE.replace("  - fixed: {variant: oinit, pretrain_lr: 0.1}",
                        "  - fixed: {variant: oinit, pretrain_lr: 0.1, lr: 0.5, hidden: 4}")
    oinit = [c for c in cells_of(tmp_path, text) if c.params["variant"] == "oinit"]
    assert len(oinit) == 2  # the lr dimension is fixed in this group
    assert {(c.params["lr"], c.params["hidden"]) for c in oinit} == {(0.5, 4)}


# ---------------------------------------------------------------- profiles


def test_profiles_override_fixed_space_and_settings(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    smoke, cpu, paper = (resolve(spec, p) for p in PROFILES)
    # smoke fixes task (no longer a grid dimension) and doubles the seeds
    assert len(smoke.cells()) == 1 * 3 * 4 * 2
    assert {c.params["task"] for c in smoke.cells()} == {"adding"}
    assert (smoke.repeats, paper.repeats) == (2, 1)
    # cpu replaces the lr dimension and pack_size
    assert len(cpu.cells()) == 2 * 1 * 4
    assert {c.params["lr"] for c in cpu.cells()} == {0.01}
    assert (cpu.pack_size, paper.pack_size) == (4, 1)
    assert {s.profile for s in (smoke, cpu, paper)} == set(PROFILES)


def test_a_profile_key_holds_in_every_group_of_the_spec(tmp_path):
    text = BASE.replace("  paper: {}", "  paper: {fixed: {penalty: 0.5, variant: open}}")
    cells = cells_of(tmp_path, text.replace("  - fixed: {variant: plain}\n", "").replace(
        "  - fixed: {variant: oinit, pretrain_lr: 0.1}\n", ""))
    assert {(c.params["variant"], c.params["penalty"]) for c in cells} == {("open", 0.5)}
    assert len(cells) == 2 * 3
    # ... so a profile fixing a group's key in the other groups is an error at its line
    with pytest.raises(SpecError) as info:
        cells_of(tmp_path, BASE.replace("  paper: {}", "  paper: {fixed: {penalty: 0.5}}"))
    assert (info.value.field, info.value.line) == ("profiles.paper.fixed.penalty", 21)


def test_a_profile_replaces_groups_whole(tmp_path):
    text = BASE.replace("  paper: {}", "  paper: {groups: [{fixed: {variant: open, penalty: 1}}]}")
    cells = cells_of(tmp_path, text)
    assert len(cells) == 2 * 3
    assert {(c.params["variant"], c.params["penalty"]) for c in cells} == {("open", 1)}


def test_a_profile_can_sweep_a_fixed_key(tmp_path):
    text = BASE.replace("  paper: {}", "  paper: {space: {hidden: [4, 8]}}")
    cells = cells_of(tmp_path, text)
    assert len(cells) == 2 * 24
    assert collections.Counter(c.params["hidden"] for c in cells) == {4: 24, 8: 24}


def test_resolved_text_and_hash(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    smoke, again, paper = resolve(spec, "smoke"), resolve(spec, "smoke"), resolve(spec, "paper")
    assert smoke.text == again.text and smoke.sha256 == again.sha256
    assert smoke.sha256 != paper.sha256
    doc = yaml.safe_load(smoke.text)
    assert doc["profile"] == "smoke" and doc["repeats"] == 2 and "profiles" not in doc
    open_group = doc["groups"][1]
    assert open_group["fixed"] == {"hidden": 8, "max_iters": 10, "task": "adding",
                                   "variant": "open"}
    assert open_group["space"] == {"lr": {"log_range": [0.001, 0.1], "num": 3},
                                   "penalty": [1.0, 0.1]}
    assert (smoke.metric, smoke.mode, smoke.search_kind, smoke.optuna) == (
        "max_seq_len_solved", "max", "grid", None)


# ---------------------------------------------------------------- optuna


OPTUNA = BASE.replace("  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}",
                      "  lr: {low: 1.0e-4, high: 0.1, log: true}\n"
                      "  hidden: {low: 4, high: 16, int: true}\n"
                      "  init: {choice: [normalised, gaussian]}"
                      ).replace("  hidden: 8\n", "").replace(
                          "metric:", "search: {kind: optuna, n_trials: 5, seed: 3}\nmetric:")


def test_optuna_dimensions_are_kept_out_of_the_grid(tmp_path):
    spec = resolve(load_spec(write(tmp_path, OPTUNA)), "paper")
    cells = spec.cells()
    assert len(cells) == 2 * (1 + 2 + 1)  # tasks x groups; lr, hidden, init are Optuna's
    assert (spec.search_kind, spec.optuna.n_trials, spec.optuna.seed, spec.optuna.sampler) == (
        "optuna", 5, 3, "tpe")
    for cell in cells:
        assert not {"lr", "hidden", "init"} & set(cell.params)
        assert set(cell.optuna_space) == {"lr", "hidden", "init"}
    dims = cells[0].optuna_space
    assert dims["lr"].distribution() == FloatDistribution(1e-4, 0.1, log=True)
    assert dims["hidden"].distribution() == IntDistribution(4, 16)
    assert dims["init"].distribution() == CategoricalDistribution(("normalised", "gaussian"))


# ---------------------------------------------------------------- trial keys


def test_trial_key_is_stable_and_canonical():
    params = {"task": "adding", "variant": "open", "lr": 1, "penalty": 0.1, "seed": 0}
    key = trial_key("synthetic", params)
    assert len(key) == 16 and int(key, 16) >= 0
    assert trial_key("synthetic", dict(reversed(params.items()))) == key
    assert trial_key("synthetic", {**params, "lr": 1.0}) == key
    default_seq_len = experiments.get("synthetic").Config().seq_len
    assert trial_key("synthetic", {**params, "seq_len": default_seq_len}) == key
    assert trial_key("synthetic", {**params, "device": "auto"}) == key


def test_trial_key_changes_with_any_param(tmp_path):
    cells = cells_of(tmp_path, BASE)
    keys = {trial_key("synthetic", c.params) for c in cells}
    assert len(keys) == len(cells)
    cell = next(c for c in cells if c.params["variant"] == "open")
    base = trial_key("synthetic", cell.params)
    changed = {"hidden": 9, "max_iters": 11, "task": "permutation", "lr": 0.2, "penalty": 0.5,
               "variant": "oinit", "seed": 1, "data_seed": 1}
    assert set(changed) >= set(cell.params)
    for key, value in changed.items():
        params = {**cell.params, key: value}
        if value == "oinit":
            params.pop("penalty")
        assert trial_key("synthetic", params) != base, key


# ---------------------------------------------------------------- shipped specs


SHIPPED_CELLS = {
    ("synthetic-max-length", "smoke"): 1 * 2 * (1 + 2 + 1),
    ("synthetic-max-length", "cpu"): 1 * 3 * (1 + 2 + 1),
    ("synthetic-max-length", "paper"): 4 * 4 * (1 + 5 + 1),
    ("orth-pretrain-convergence", "smoke"): 1,
    ("orth-pretrain-convergence", "cpu"): 1,
    ("orth-pretrain-convergence", "paper"): 1,
}


def test_available_specs_lists_every_shipped_file_sorted():
    shipped = sorted(p.stem for p in (Path(sweeps.__file__).parent / "specs").glob("*.yaml"))
    assert available_specs() == shipped
    assert {"orth-pretrain-convergence", "synthetic-max-length"} <= set(shipped)


@pytest.mark.parametrize(("name", "profile"), sorted(SHIPPED_CELLS))
def test_shipped_spec_resolves(name, profile):
    spec = resolve(load_spec(name), profile)
    cells = spec.cells()
    assert len(cells) == SHIPPED_CELLS[name, profile]
    assert spec.name == name and spec.search_kind == "grid"
    pack_fields = experiments.get(spec.experiment).PACK_FIELDS
    shapes = collections.Counter(
        tuple(getattr(_config(spec.experiment, c.params), f) for f in pack_fields)
        for c in cells)
    # a pack never exceeds the configurations that share a shape
    assert spec.pack_size <= max(shapes.values())


def _config(experiment, params):
    from ortho_core.config import from_dict

    return from_dict(experiments.get(experiment).Config, params)


def test_synthetic_max_length_paper_protocol():
    cells = resolve(load_spec("synthetic-max-length"), "paper").cells()
    first = _config("synthetic", cells[0].params)
    assert (first.hidden, first.batch_size, first.max_iters, first.eval_every, first.val_size,
            first.seq_len, first.seq_len_step, first.init, first.protocol) == (
        100, 20, 100_000, 100, 10_000, 10, 10, "normalised", "max_length")
    grid = {(c.params["task"], c.params["variant"], c.params["lr"], c.params.get("penalty"))
            for c in cells}
    tasks = ("temporal_order", "temporal_order_3bit", "adding", "permutation")
    rates = (1e-1, 1e-2, 1e-3, 1e-4)
    expected = {(t, v, a, p) for t in tasks for a in rates
                for v, p in [("plain", None), ("oinit", None)]
                + [("open", lam) for lam in (1.0, 0.1, 0.01, 0.001, 0.0001)]}
    assert grid == expected
    oinit = [_config("synthetic", c.params) for c in cells if c.params["variant"] == "oinit"]
    assert {(c.pretrain_lr, c.pretrain_tol) for c in oinit} == {(0.1, 1e-6)}


def test_shipped_smoke_covers_every_variant():
    cells = resolve(load_spec("synthetic-max-length"), "smoke").cells()
    assert {c.params["variant"] for c in cells} == {"plain", "open", "oinit"}
    configs = [_config("synthetic", c.params) for c in cells]
    assert max(c.max_seq_len for c in configs) <= 20 and {c.seq_len for c in configs} == {10}


def test_load_by_name_or_path():
    by_name = load_spec("synthetic-max-length")
    by_path = load_spec(str(by_name.source.path))
    assert by_name.model_dump() == by_path.model_dump()
    assert by_name.source.file == "synthetic-max-length.yaml"
    assert by_path.source.file == str(by_name.source.path)


def test_unknown_spec_lists_the_available_ones():
    with pytest.raises(ConfigError) as info:
        load_spec("no-such-spec")
    assert info.value.field == "spec"
    assert "synthetic-max-length" in str(info.value) and "no-such-spec" in str(info.value)


def test_missing_file():
    with pytest.raises(ConfigError) as info:
        load_spec("/no/such/dir/spec.yaml")
    assert info.value.field == "spec"


# ---------------------------------------------------------------- bad specs

# Each case edits BASE (old -> new, applied in order); the line marked "#<" is where the
# error must point.
LR = "  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}"
TASK = "  task: [temporal_order, adding]"
GROUPS = BASE[BASE.index("groups:"):BASE.index("repeats:")]
CPU = "  cpu: {space: {lr: [0.01]}, pack_size: 4}"
BAD = [
    ("unknown top-level key", [("seed: 0\n", "seed: 0\ncolour: red  #<\n")], "colour"),
    ("unknown nested key", [("mode: max}", "mode: max, best: 1}  #<")], "metric.best"),
    ("unknown profile key", [("  smoke: {fixed: {task: adding}, repeats: 2}",
                              "  smoke: {fixd: {task: adding}}  #<")], "profiles.smoke.fixd"),
    ("unknown dimension key", [(LR, LR[:-1] + ", base: 2}  #<")], "space.lr.base"),
    ("wrong type", [("repeats: 1", "repeats: three  #<")], "repeats"),
    ("wrong type in a dimension", [("num: 3}", "num: many}  #<")], "space.lr.num"),
    ("dimension of no known form", [(LR, "  lr: {from: 1, to: 2}  #<")], "space.lr"),
    ("negative rate in a log range", [(LR, "  lr: {log_range: [0.1, -1], num: 3}  #<")],
     "space.lr.log_range"),
    ("negative fixed rate", [("  max_iters: 10\n", "  max_iters: 10\n  lr: -0.1  #<\n"),
                             (LR + "\n", "")], "fixed.lr"),
    ("zero rate in a grid list", [(LR, "  lr:\n    - 0.1\n    - 0  #<")], "space.lr[1]"),
    ("negative penalty in a group", [("[1.0, 0.1]}", "[1.0, -0.1]}  #<")],
     "groups[1].space.penalty[1]"),
    ("zero cpu", [("seed: 0\n", "seed: 0\nresources: {cpu: 0}  #<\n")], "resources.cpu"),
    ("negative repeats in a profile", [("  paper: {}", "  paper: {repeats: -1}  #<")],
     "profiles.paper.repeats"),
    ("unknown experiment", [("experiment: synthetic", "experiment: synthetc  #<")],
     "experiment"),
    ("unknown config key in fixed", [("  max_iters: 10\n", "  max_iters: 10\n  colour: red  #<\n")],
     "fixed.colour"),
    ("unknown config key in space", [(TASK, TASK + "\n  colour: [red]  #<")], "space.colour"),
    ("unknown config key in a group", [("{variant: plain}", "{variant: plain, colour: red}  #<")],
     "groups[0].fixed.colour"),
    ("unknown task", [(TASK, "  task:\n    - temporal_order\n    - sorting  #<")],
     "space.task[1]"),
    ("bad value from a profile", [(CPU, "  cpu: {fixed: {task: sorting}}  #<")],
     "profiles.cpu.fixed.task"),
    ("conditional key outside its group",
     [("{variant: plain}", "{variant: plain, penalty: 0.5}  #<")], "groups[0].fixed.penalty"),
    ("missing profile", [("profiles:", "profiles:  #<"), (CPU + "\n", "")], "profiles.cpu"),
    ("empty list", [(TASK, "  task: []  #<")], "space.task"),
    ("empty groups", [(GROUPS, "groups: []  #<\n")], "groups"),
    ("optuna dimension in a grid search", [(LR, "  lr: {low: 1.0e-3, high: 0.1, log: true}  #<")],
     "space.lr"),
    ("optuna setting in a grid search", [("repeats: 1", "repeats: 1\nsearch: {n_trials: 4}  #<")],
     "search.n_trials"),
    ("malformed YAML", [("description: a test spec", "description: a: b  #<")], "yaml"),
    ("duplicate key", [("  max_iters: 10\n", "  max_iters: 10\n  hidden: 4  #<\n")],
     "fixed.hidden"),
    ("name not the file stem", [("name: t", "name: other  #<")], "name"),
    ("seed in fixed", [("  max_iters: 10\n", "  max_iters: 10\n  seed: 3  #<\n")], "fixed.seed"),
    ("key fixed and swept", [("  max_iters: 10\n", "  max_iters: 10\n  task: adding\n"),
                             (TASK, TASK + "  #<")], "space.task"),
    ("packs under a scheduler", [("seed: 0\n", "seed: 0\npack_size: 2  #<\n"
                                              "scheduler: {kind: asha, metric_step: loss, "
                                              "mode: min}\n")], "pack_size"),
    ("a profile's packs under the spec's scheduler",
     [("seed: 0\n", "seed: 0\nscheduler: {kind: asha, metric_step: loss, mode: min}\n"),
      (CPU, CPU + "  #<")], "profiles.cpu.pack_size"),
    ("the same configuration twice", [("  - fixed: {variant: oinit, pretrain_lr: 0.1}",
                                       "  - fixed: {variant: oinit, pretrain_lr: 0.1}\n"
                                       "  - fixed: {variant: plain}  #<")], "groups[3]"),
]


@pytest.mark.parametrize(("edits", "field"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_spec_names_field_and_line(tmp_path, edits, field):
    text = BASE
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    line = next(i for i, text_line in enumerate(text.splitlines(), 1) if "#<" in text_line)
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        spec = load_spec(path)
        for profile in spec.profiles:
            resolve(spec, profile)
    err = info.value
    assert (err.field, err.line) == (field, line), str(err)
    assert str(err).startswith(f"{path}:{line}: {field}: expected "), str(err)


def test_error_message_format(tmp_path):
    text = BASE.replace("  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}",
                        "  lr: {log_range: [0.1, -1], num: 4}")
    path = write(tmp_path, text, "synthetic-max-length")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == (f"{path}:10: space.lr.log_range: expected two positive numbers "
                               "low < high (got [0.1, -1])")
    assert isinstance(info.value, ConfigError)
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.field, copy.line) == (str(info.value), "space.lr.log_range", 10)


def test_unknown_profile(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    with pytest.raises(SpecError) as info:
        resolve(spec, "gpu")
    assert (info.value.field, info.value.line, info.value.value) == ("profiles", 18, "gpu")


def test_optuna_dimensions_are_checked_at_both_ends(tmp_path):
    bad_high = OPTUNA.replace("  init: {choice: [normalised, gaussian]}",
                              "  init: {choice: [normalised, glorot]}")
    with pytest.raises(SpecError) as info:
        cells_of(tmp_path, bad_high)
    assert info.value.field == "space.init"
    bad_low = OPTUNA.replace("{low: 4, high: 16, int: true}", "{low: 0, high: 16, int: true}")
    with pytest.raises(SpecError) as info:
        cells_of(tmp_path, bad_low)
    assert info.value.field == "space.hidden"


def test_exponent_without_dot_reads_as_a_float(tmp_path):
    text = BASE.replace("{log_range: [1.0e-3, 1.0e-1], num: 3}", "[1e-3, 1e-1]")
    assert sorted({c.params["lr"] for c in cells_of(tmp_path, text)}) == [1e-3, 1e-1]



def test_packs_under_a_scheduler_name_the_scheduler(tmp_path):
    text = BASE.replace("  paper: {}", "  paper:\n    pack_size: 3\n"
                        "    scheduler: {kind: asha, metric_step: loss, mode: min}")
    lines = text.splitlines()
    pack_line = lines.index("    pack_size: 3") + 1
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert (info.value.field, info.value.line, info.value.value) == (
        "profiles.paper.pack_size", pack_line, 3)
    assert str(info.value) == (
        f"{path}:{pack_line}: profiles.paper.pack_size: expected 1 when a scheduler is set "
        f"(line {pack_line + 1}: early stopping judges one configuration per trial) (got 3)")


@pytest.mark.parametrize("installed", [False, True])
def test_the_cmaes_sampler_needs_the_cmaes_package(tmp_path, monkeypatch, installed):
    text = OPTUNA.replace("search: {kind: optuna,", "search: {kind: optuna, sampler: cmaes,")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: (
        (object() if installed else None) if name == "cmaes" else find_spec(name, *args)))
    spec = load_spec(write(tmp_path, text))
    if installed:
        assert resolve(spec, "paper").optuna.sampler == "cmaes"
        return
    with pytest.raises(SpecError) as info:
        resolve(spec, "paper")
    search_line = text.splitlines().index(
        "search: {kind: optuna, sampler: cmaes, n_trials: 5, seed: 3}") + 1
    assert (info.value.field, info.value.line, info.value.value) == (
        "search.sampler", search_line, "cmaes")
    assert "cmaes package" in info.value.expected


# ---------------------------------------------------------------- resolved text


@pytest.mark.parametrize("profile", PROFILES)
def test_a_resolved_text_expands_to_the_resolved_cells(tmp_path, profile):
    """What analysis reads back from MLflow gives the cells the runner ran, Optuna
    dimensions included, for the test specs and every shipped one."""
    specs = [load_spec(write(tmp_path, text)) for text in (BASE, OPTUNA)]
    specs += [load_spec(name) for name in available_specs()]
    for spec in specs:
        resolved = resolve(spec, profile)
        assert expand_resolved(resolved.text) == resolved.cells()


def test_a_malformed_resolved_text_names_the_field():
    with pytest.raises(SpecError) as info:
        expand_resolved("groups:\n  - space: {lr: {log_range: [1, -1], num: 2}}\n")
    assert info.value.field == "groups[0].space.lr.log_range"
    with pytest.raises(SpecError):
        expand_resolved("[1, 2]")
