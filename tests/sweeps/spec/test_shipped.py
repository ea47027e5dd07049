"""The shipped specs: every profile resolves, with the paper's protocol and grid."""

from __future__ import annotations

import collections

import pytest
import yaml

from ortho_core import experiments
from sweeps.spec import PROFILES, available_specs, load_spec, resolve
from tests.sweeps.spec.helpers import config_of

SHIPPED_CELLS = {
    ("synthetic-max-length", "smoke"): 1 * 2 * (1 + 2 + 1),
    ("synthetic-max-length", "cpu"): 1 * 3 * (1 + 2 + 2 + 1),
    ("synthetic-max-length", "paper"): 4 * 4 * (1 + 5 + 1),
    ("orth-pretrain-convergence", "smoke"): 1,
    ("orth-pretrain-convergence", "cpu"): 1,
    ("orth-pretrain-convergence", "paper"): 1,
    ("spectral-temporal-gradients", "smoke"): 5 * 2,
    ("spectral-temporal-gradients", "cpu"): 5 * 20,
    ("spectral-temporal-gradients", "paper"): 5,
    ("spectral-init-success", "smoke"): 2 * 2 * 2,
    ("spectral-init-success", "cpu"): 4 * 2 * 5,
    ("spectral-init-success", "paper"): 11 * 2 * 5,
    ("simplex-direction", "smoke"): 3 * 2,
    ("simplex-direction", "cpu"): 3 * 3,
    ("simplex-direction", "paper"): 3 * 3,
    ("polyphonic-music", "smoke"): 1,
    ("polyphonic-music", "cpu"): 2 * 2,
    ("polyphonic-music", "paper"): 4 * 4,
    ("deep-orthogonal", "smoke"): (2 + 1 + 1 + 1 + 2) * 2,
    ("deep-orthogonal", "cpu"): (10 + 1 + 8 + 4 + 2) * 3,
    ("deep-orthogonal", "paper"): (10 + 1 + 36 + 9 + 2) * 3,
}


@pytest.mark.parametrize(("name", "profile"), sorted(SHIPPED_CELLS))
def test_shipped_spec_resolves(name, profile):
    spec = resolve(load_spec(name), profile)
    cells = spec.cells()
    assert len(cells) == SHIPPED_CELLS[name, profile]
    assert spec.name == name and spec.optuna is None
    pack_fields = experiments.get(spec.experiment).PACK_FIELDS
    shapes = collections.Counter(
        tuple(getattr(config_of(spec.experiment, c.params), f) for f in pack_fields)
        for c in cells)
    # a pack never exceeds the configurations that share a shape
    assert spec.pack_size <= max(shapes.values())


def test_synthetic_max_length_paper_protocol():
    cells = resolve(load_spec("synthetic-max-length"), "paper").cells()
    first = config_of("synthetic", cells[0].params)
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
    oinit = [config_of("synthetic", c.params) for c in cells if c.params["variant"] == "oinit"]
    assert {(c.pretrain_lr, c.pretrain_tol) for c in oinit} == {(0.1, 1e-6)}


@pytest.mark.parametrize(("profile", "weights"), [("smoke", "recurrent"), ("cpu", "recurrent"),
                                                  ("paper", "all")])
def test_synthetic_max_length_oinit_pretrains_as_each_profile_says(profile, weights):
    """paper follows M's code (rand_ortho on W_xh, W_hh and W_hy); smoke and cpu the text
    (W_hh only, M eq. 18), keeping their tracked trial keys."""
    cells = resolve(load_spec("synthetic-max-length"), profile).cells()
    oinit = [config_of("synthetic", c.params) for c in cells if c.params["variant"] == "oinit"]
    assert oinit and {c.pretrain_weights for c in oinit} == {weights}


def test_shipped_smoke_covers_every_variant():
    cells = resolve(load_spec("synthetic-max-length"), "smoke").cells()
    assert {c.params["variant"] for c in cells} == {"plain", "open", "oinit"}
    configs = [config_of("synthetic", c.params) for c in cells]
    assert max(c.max_seq_len for c in configs) <= 20 and {c.seq_len for c in configs} == {10}


def test_synthetic_max_length_penalty_forms_and_jitter():
    """cpu compares both OPEN forms; paper follows M's code (unsquared, adding jittered)."""
    cpu = [config_of("synthetic", c.params)
           for c in resolve(load_spec("synthetic-max-length"), "cpu").cells()]
    forms = collections.Counter(c.penalty_form for c in cpu if c.variant == "open")
    assert forms == {"squared": 6, "unsquared": 6}
    assert {c.penalty_form for c in cpu if c.variant != "open"} == {"squared"}
    paper = [config_of("synthetic", c.params)
             for c in resolve(load_spec("synthetic-max-length"), "paper").cells()]
    assert {c.penalty_form for c in paper if c.variant == "open"} == {"unsquared"}
    assert {(c.task, c.length_jitter) for c in paper} == {
        ("temporal_order", False), ("temporal_order_3bit", False), ("permutation", False),
        ("adding", True)}



@pytest.mark.parametrize("profile", PROFILES)
def test_lcw_deep_mlp_uses_kutsunas_eq7_basis(profile):
    """K §3.2: "In the experiments in Section 5, we used B_m in Equation (7)"; every profile
    reduces the data or the epochs, never the method."""
    cells = resolve(load_spec("lcw-deep-mlp"), profile).cells()
    lcw = [config_of("lcw-mlp", c.params) for c in cells if c.params["variant"] == "lcw"]
    assert lcw and {c.lcw_basis for c in lcw} == {"eq7"}


@pytest.mark.parametrize("name", available_specs())
def test_a_shipped_spec_writes_every_profile(name):
    """A spec of one's own may leave profiles out; a shipped one writes all three
    (EXPERIMENTS.md "Profiles")."""
    with open(load_spec(name).source.path) as f:
        assert set(yaml.safe_load(f)["profiles"]) >= set(PROFILES)
