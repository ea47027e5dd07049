"""Resolving: the resolved text and its hash, the profile named, every cell's Config built
(Optuna dimensions at both ends), and samplers that need a package."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from ortho_core.errors import ConfigError
from sweeps.spec import SpecError, load_spec, resolve
from tests.sweeps.spec.helpers import BASE, OPTUNA, cells_of, write


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
    assert (smoke.metric, smoke.mode, smoke.optuna) == ("max_seq_len_solved", "max", None)


def test_unknown_profile_names_the_profile_asked_for_not_the_file(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    with pytest.raises(ConfigError) as info:
        resolve(spec, "gpu")
    assert not isinstance(info.value, SpecError)
    assert str(info.value) == (f"profile: expected one of the profiles of {spec.source.file}: "
                               f"{', '.join(spec.profiles)} (got 'gpu')")


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


def test_a_key_left_at_its_default_is_refused_at_the_line_of_the_key_its_check_names(
        tmp_path):
    """``direction: simplex_switch`` without ``switch_norm``: the check names direction,
    whose line the error gives (it gave line 1, the file's top, in a spec with no groups)."""
    text = BASE[:BASE.index("groups:")] + "repeats: 1\nseed: 0\n"
    text = text.replace("  max_iters: 10\n", "  max_iters: 10\n  direction: simplex_switch\n")
    with pytest.raises(SpecError) as info:
        resolve(load_spec(write(tmp_path, text)), "smoke")
    assert info.value.field == "switch_norm"
    assert info.value.line == text.splitlines().index("  direction: simplex_switch") + 1
    assert "the spec leaves switch_norm at its default" in str(info.value)
