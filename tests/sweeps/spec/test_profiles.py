"""Profiles: overrides of settings and of fixed and swept keys at every level, and the checks
of the merged shape."""

from __future__ import annotations

import collections

import pytest

from ortho_core.config import MAX_SEED
from sweeps.spec import PROFILES, SpecError, load_spec, resolve
from sweeps.spec.profiles import MAX_CONFIGURATIONS, MAX_PACK_SIZE
from tests.sweeps.spec.helpers import BASE, OPTUNA, cells_of, write


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


def test_packs_under_a_scheduler_name_the_scheduler(tmp_path):
    text = BASE.replace("  paper: {}", "  paper:\n    pack_size: 3\n"
                        "    scheduler: {kind: asha, metric_step: val_error, mode: min}")
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


def _refused(tmp_path, text):
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    return info.value


def test_sizes_counted_before_expanding(tmp_path):
    """Configurations are counted exactly (per group, grid points x repeats x Optuna trials)
    and a profile over the limit is refused by load_spec, which expands nothing."""
    fits = MAX_CONFIGURATIONS // 24  # paper: 2 tasks x 3 rates x (1 + 2 + 1) group points
    load_spec(write(tmp_path, BASE.replace("  paper: {}", f"  paper: {{repeats: {fits}}}")))
    err = _refused(tmp_path, BASE.replace("  paper: {}", f"  paper: {{repeats: {fits + 1}}}"))
    assert (err.profile, err.field, err.value) == ("paper", "profiles.paper.repeats",
                                                   24 * (fits + 1))
    # smoke of OPTUNA: 1 task x 4 group points x 2 repeats, each searched n_trials times
    trials = MAX_CONFIGURATIONS // 8 + 1
    err = _refused(tmp_path, OPTUNA.replace("n_trials: 5", f"n_trials: {trials}"))
    assert (err.profile, err.field, err.value) == ("smoke", "search.n_trials", 8 * trials)
    err = _refused(tmp_path, BASE.replace("  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}",
                                          "  lr: {log_range: [1.0e-3, 1.0e-1], num: 1000000}"))
    assert (err.profile, err.field, err.value) == ("smoke", "space.lr", 8 * 10**6)


def test_a_spec_without_profiles_is_refused_as_itself_not_as_a_profile(tmp_path):
    """Its error named ``profile 'smoke'``, which the file does not have."""
    bare = BASE[:BASE.index("profiles:")]
    err = _refused(tmp_path, bare.replace("seed: 0\n",
                                          f"seed: 0\npack_size: {MAX_PACK_SIZE + 1}\n"))
    assert (err.profile, err.field) == (None, "pack_size")
    assert "profile '" not in str(err)


def test_pack_and_seed_bounds(tmp_path):
    err = _refused(tmp_path, BASE.replace("seed: 0\n",
                                          f"seed: 0\npack_size: {MAX_PACK_SIZE + 1}\n"))
    assert (err.field, err.value) == ("pack_size", MAX_PACK_SIZE + 1)
    load_spec(write(tmp_path, BASE.replace("seed: 0\n", f"seed: {MAX_SEED - 1}\n")))
    err = _refused(tmp_path, BASE.replace("seed: 0\n", f"seed: {MAX_SEED}\n"))
    assert (err.profile, err.field) == ("smoke", "seed")  # smoke's 2 repeats pass the bound


@pytest.mark.parametrize("seed", [-5, MAX_SEED + 1])
def test_an_optuna_seed_beyond_32_bits_is_refused_before_any_work(tmp_path, seed):
    """TPE's NumPy seeding raised ``ValueError`` once the sweep had started."""
    err = _refused(tmp_path, OPTUNA.replace("seed: 3}", f"seed: {seed}}}"))
    assert (err.field, err.value) == ("search.seed", seed)
    assert f"an integer in 0..{MAX_SEED} (seeds are 32-bit)" in str(err)


@pytest.mark.parametrize(("name", "near"), [("smok", "smoke"), ("Paper", "paper"),
                                            ("cpuu", "cpu")])
def test_a_misspelt_profile_is_refused_at_its_line(tmp_path, name, near):
    """``--profile smoke`` on a spec whose profile reads ``smok`` ran the spec with no
    override, silently; the misspelt profile itself still runs by its name."""
    text = BASE.replace(f"  {near}: ", "  other: ")  # the file writes no profile near ...
    text = text.replace("  other: {}" if near == "paper" else "  paper: {}", f"  {name}: {{}}")
    spec = load_spec(write(tmp_path, text))  # ... but the misspelt one, at line 21
    with pytest.raises(SpecError) as info:
        resolve(spec, near)
    assert (info.value.field, info.value.line, info.value.value) == (
        f"profiles.{name}", 21, name)
    assert info.value.expected.startswith(f"a profile named {near} (the file writes none")
    assert resolve(spec, name).profile == name
    text += f"  {near}: {{}}\n"  # written, bare on purpose
    assert resolve(load_spec(write(tmp_path, text)), near).profile == near


def test_a_profile_of_the_spec_s_own_name_is_taken(tmp_path):
    for name in ("gpu", "smoke2", "cpu-long", "quick"):
        spec = load_spec(write(tmp_path, BASE.replace("  paper: {}", f"  {name}: {{}}")))
        assert resolve(spec, name).profile == name


def test_an_error_under_a_profile_the_file_does_not_write_is_the_spec_s_own(tmp_path):
    """Resolving smoke checks the other profiles too: the base's hidden 0, which cpu and
    paper (not written) inherit, was reported as ``profile 'cpu'``."""
    text = BASE[:BASE.index("profiles:")].replace("  hidden: 8\n", "  hidden: 0\n")
    text += "profiles:\n  smoke: {fixed: {hidden: 8}}\n"
    with pytest.raises(SpecError) as info:
        resolve(load_spec(write(tmp_path, text)), "smoke")
    assert (info.value.profile, info.value.field) == (None, "fixed.hidden")
