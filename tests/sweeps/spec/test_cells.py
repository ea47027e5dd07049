"""Cells: grid expansion per group, repeats and seeds, Optuna dimensions kept out of the grid,
trial keys, and a resolved text expanding to the cells the runner ran."""

from __future__ import annotations

import collections

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ortho_core import experiments
from sweeps.spec import (
    PROFILES,
    SpecError,
    available_specs,
    expand_resolved,
    load_spec,
    resolve,
    resolved_params,
    trial_key,
)
from tests.sweeps.spec.helpers import BASE, OPTUNA, cells_of, write


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


def test_optuna_dimensions_are_kept_out_of_the_grid(tmp_path):
    spec = resolve(load_spec(write(tmp_path, OPTUNA)), "paper")
    cells = spec.cells()
    assert len(cells) == 2 * (1 + 2 + 1)  # tasks x groups; lr, hidden, init are Optuna's
    assert (spec.optuna.n_trials, spec.optuna.seed, spec.optuna.sampler) == (5, 3, "tpe")
    for cell in cells:
        assert not {"lr", "hidden", "init"} & set(cell.params)
        assert set(cell.optuna_space) == {"lr", "hidden", "init"}
    dims = cells[0].optuna_space
    assert dims["lr"].distribution() == FloatDistribution(1e-4, 0.1, log=True)
    assert dims["hidden"].distribution() == IntDistribution(4, 16)
    assert dims["init"].distribution() == CategoricalDistribution(("normalised", "gaussian"))


def test_groups_searching_one_dimension_over_different_ranges_are_distinct_cells(tmp_path):
    text = OPTUNA.replace("  - fixed: {variant: oinit, pretrain_lr: 0.1}",
                          "  - fixed: {variant: plain}\n"
                          "    space: {hidden: {low: 2, high: 6, int: true}}")
    plain = [c for c in cells_of(tmp_path, text) if c.params["variant"] == "plain"]
    assert sorted(c.optuna_space["hidden"].distribution().high for c in plain) == [6, 6, 16, 16]


def test_trial_key_is_stable_and_canonical():
    params = {"task": "adding", "variant": "open", "lr": 1, "penalty": 0.1, "seed": 0}
    key = trial_key("synthetic", params)
    assert len(key) == 16 and int(key, 16) >= 0
    assert trial_key("synthetic", dict(reversed(params.items()))) == key
    assert trial_key("synthetic", {**params, "lr": 1.0}) == key
    default_seq_len = experiments.get("synthetic").Config().seq_len
    assert trial_key("synthetic", {**params, "seq_len": default_seq_len}) == key
    assert trial_key("synthetic", {**params, "device": "auto"}) == key
    assert trial_key("synthetic", {**params, "subnormals": "keep"}) == key


def test_fields_added_later_keep_the_keys_already_stored():
    """Keys stored by sweeps tracked before G's options existed (``ortho.trial_key`` of
    release 0.1) stay the same while those options hold their defaults, so a resumed sweep
    does not train its finished configurations again; setting one gives a new key."""
    stored = trial_key("synthetic", {"task": "adding", "lr": 0.01})
    assert stored == "1bf35656ab6b3885"
    assert trial_key("synthetic", {"task": "adding", "lr": 0.01, "direction": "gradient",
                                   "penalty_form": "squared", "patience": None}) == stored
    changed = {trial_key("synthetic", {"task": "adding", "lr": 0.01, **extra})
               for extra in ({"direction": "simplex"}, {"penalty_form": "unsquared"},
                             {"length_jitter": True}, {"success": "under_one_percent"},
                             {"patience": 1000})}
    assert len(changed) == 5 and stored not in changed


def test_a_changed_default_keeps_the_keys_already_stored():
    """ff-mnist's λ of FF and FF+OINIT went from 0.01 to 0 (``FORMER_DEFAULTS``): the keys of
    configurations tracked before (these, computed at d7db2ce) stay, so a sweep resumed across
    the change trains none of its finished configurations again; OPEN's keys never moved."""
    assert trial_key("ff-mnist", {"variant": "plain", "lr": 0.1}) == "87c43ba254175c8d"
    assert trial_key("ff-mnist", {"variant": "oinit", "lr": 0.01}) == "98c57c7eb223666b"
    assert trial_key("ff-mnist", {"variant": "open", "lr": 0.1, "penalty": 0.01}) == \
        "1d93a8de9b6d594b"
    assert trial_key("ff-mnist", {"variant": "plain", "lr": 0.01}) != \
        trial_key("ff-mnist", {"variant": "plain", "lr": 0.1})


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


@pytest.mark.parametrize("profile", PROFILES)
def test_a_resolved_text_expands_to_the_resolved_cells(tmp_path, profile):
    """What analysis reads back from MLflow gives the cells the runner ran, Optuna
    dimensions included, for the test specs and every shipped one."""
    specs = [load_spec(write(tmp_path, text)) for text in (BASE, OPTUNA)]
    specs += [load_spec(name) for name in available_specs()]
    for spec in specs:
        resolved = resolve(spec, profile)
        assert expand_resolved(resolved.text) == resolved.cells()


GROUP_DEFAULT = """\
name: t
experiment: synthetic
metric: {name: max_seq_len_solved, mode: max}
fixed: {hidden: 8, max_seq_len: 20}
space: {lr: [1, 0.1]}
groups:
  - fixed: {max_iters: 50}
  - fixed: {max_iters: 100, task: adding}
profiles: {smoke: {}, cpu: {}, paper: {}}
"""
"""A key (``task``) one group fixes and the other leaves at synthetic's default."""


def test_resolved_params_fill_a_key_another_group_sets_with_the_trainer_s_default(tmp_path):
    cells = cells_of(tmp_path, GROUP_DEFAULT)
    assert ["task" in c.params for c in cells] == [False, False, True, True]
    resolved = resolved_params("synthetic", cells)
    assert [(p["task"], p["max_iters"], p["lr"]) for p in resolved] == [
        ("temporal_order", 50, 1.0), ("temporal_order", 50, 0.1),
        ("adding", 100, 1.0), ("adding", 100, 0.1)]
    assert isinstance(resolved[0]["lr"], float)  # as the Config converts lr: 1
    # only the keys some cell sets: not the Config's other fields
    assert set(resolved[0]) == set(cells[2].params) and "penalty" not in resolved[0]


def test_resolved_params_leave_out_what_optuna_chooses(tmp_path):
    """OPTUNA's cells search lr, hidden and init; penalty (OPEN's) is filled in elsewhere,
    pretrain_lr (OINIT's) likewise, and no key Optuna chooses appears."""
    cells = cells_of(tmp_path, OPTUNA)
    resolved = resolved_params("synthetic", cells)
    assert all(not set(c.optuna_space) & set(p) for c, p in zip(cells, resolved, strict=True))
    assert {(p["variant"], p["penalty"], p["pretrain_lr"]) for p in resolved} == {
        ("plain", 0.0, 0.1), ("open", 1.0, 0.1), ("open", 0.1, 0.1), ("oinit", 0.0, 0.1)}


def test_a_malformed_resolved_text_names_the_field():
    with pytest.raises(SpecError) as info:
        expand_resolved("groups:\n  - space: {lr: {log_range: [1, -1], num: 2}}\n")
    assert info.value.field == "groups[0].space.lr.log_range"
    with pytest.raises(SpecError):
        expand_resolved("[1, 2]")
