"""Bad specs are reported with the right file, line and field before any work starts, whichever
module finds them (schema, profiles, resolving against the trainer's Config)."""

from __future__ import annotations

import pytest

from sweeps.spec import SpecError, load_spec, resolve
from tests.sweeps.spec.helpers import BASE, write

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
    ("a boolean for an integer", [("seed: 0\n", "seed: true  #<\n")], "seed"),
    ("a boolean for a number", [("seed: 0\n", "seed: 0\nresources: {cpu: true}  #<\n")],
     "resources.cpu"),
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
    ("metric not in the trainer's summary",
     [("max_seq_len_solved, mode: max}", "max_seq_len_solvd, mode: max}  #<")], "metric.name"),
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
                                              "scheduler: {kind: asha, metric_step: val_error, "
                                              "mode: min}\n")], "pack_size"),
    ("a step metric the trainer does not report", [
        ("repeats: 2}", "repeats: 2,\n          scheduler: {kind: asha, metric_step: val_eror, "
                        "mode: min}}  #<")], "profiles.smoke.scheduler.metric_step"),
    ("a profile's packs under the spec's scheduler",
     [("seed: 0\n", "seed: 0\nscheduler: {kind: asha, metric_step: val_error, mode: min}\n"),
      (CPU, CPU + "  #<")], "profiles.cpu.pack_size"),
    ("the same configuration twice", [("  - fixed: {variant: oinit, pretrain_lr: 0.1}",
                                       "  - fixed: {variant: oinit, pretrain_lr: 0.1}\n"
                                       "  - fixed: {variant: plain}  #<")], "groups[3]"),
    ("the same configuration written two ways", [
        ("  - fixed: {variant: oinit, pretrain_lr: 0.1}",
         "  - fixed: {variant: oinit, pretrain_lr: 1}\n"
         "  - fixed: {variant: oinit, pretrain_lr: 1.0}  #<")], "groups[3]"),
    ("a key a group needs left at its default (named as it is, at its group)",
     [("  - fixed: {variant: open}\n    space: {penalty: [1.0, 0.1]}",
       "  - fixed: {variant: open}  #<")], "penalty"),
    ("the same configuration with a default written out", [
        ("  - fixed: {variant: oinit, pretrain_lr: 0.1}",
         "  - fixed: {variant: oinit, pretrain_lr: 0.1}\n"
         "  - fixed: {variant: plain, penalty: 0.0, init: normalised}  #<")], "groups[3]"),
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
    within = "" if err.profile is None else f"profile {err.profile!r}: "
    assert str(err).startswith(f"{path}:{line}: {within}{field}: expected "), str(err)


def test_a_metric_the_trainer_does_not_summarise_lists_those_it_does(tmp_path):
    path = write(tmp_path, BASE.replace("name: max_seq_len_solved", "name: val_los"))
    with pytest.raises(SpecError) as info:
        resolve(load_spec(path), "smoke")
    assert "expected a summary key of synthetic: max_seq_len_solved, last_seq_len, " \
           "val_error, val_loss," in str(info.value)
    assert str(info.value).endswith("(got 'val_los')")


def test_a_step_metric_the_trainer_does_not_report_lists_those_it_does(tmp_path):
    """ASHA compared NaN at every rung of a misspelled metric, and so stopped nothing."""
    def smoke_scheduler(metric: str) -> str:
        return BASE.replace("repeats: 2}", f"repeats: 2, scheduler: {{kind: asha, metric_step: "
                                           f"{metric}, mode: min}}}}")

    with pytest.raises(SpecError) as info:
        resolve(load_spec(write(tmp_path, smoke_scheduler("val_eror"))), "smoke")
    assert ("expected a metric synthetic reports at its evaluations: train_loss, grad_norm, "
            "grad_norm_whh, val_loss, val_error,") in str(info.value)
    assert str(info.value).endswith("(got 'val_eror')")
    spec = resolve(load_spec(write(tmp_path, smoke_scheduler("val_error_screen"))), "smoke")
    assert spec.scheduler is not None and spec.scheduler.metric_step == "val_error_screen"


def test_a_profile_left_out_overrides_nothing(tmp_path):
    """A spec of one's own may write no profiles: each of smoke, cpu and paper then runs the
    spec as written (the same cells); one written still overrides."""
    bare = BASE[:BASE.index("profiles:")]
    for text, smoke_lrs in ((bare, [1e-3, 1e-2, 1e-1]),
                            (bare + "profiles: {smoke: {space: {lr: [0.5]}}}\n", [0.5])):
        spec = load_spec(write(tmp_path, text))
        cells = {p: resolve(spec, p).cells() for p in ("smoke", "cpu", "paper")}
        assert sorted({c.params["lr"] for c in cells["smoke"]}) == pytest.approx(smoke_lrs)
        assert [c.params for c in cells["cpu"]] == [c.params for c in cells["paper"]]
        assert sorted({c.params["lr"] for c in cells["cpu"]}) == pytest.approx(
            [1e-3, 1e-2, 1e-1])
    explicit = load_spec(write(tmp_path, bare + "profiles: {smoke: {}, cpu: {}, paper: {}}\n"))
    bare_spec = load_spec(write(tmp_path, bare))  # the same spec without a profiles key
    for profile in ("smoke", "cpu", "paper"):  # groups, scheduler, everything resolved alike
        assert resolve(bare_spec, profile).text == resolve(explicit, profile).text
