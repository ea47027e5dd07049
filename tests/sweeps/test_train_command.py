"""``ortho train``: bad input exits 2 naming the field; a run prints progress and a summary."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from ortho_core import experiments
from ortho_core.experiments import synthetic
from ortho_core.reporting import Report
from sweeps.cli import main
from sweeps.train_command import ProgressPrinter, plain_text
from tests.sweeps import toy_experiment
from tests.sweeps.helpers import TOY_MODULE


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["no-such-experiment"], "experiment"),
        (["synthetic", "--set", "colour=red"], "colour"),
        (["synthetic", "--set", "task=sorting"], "task"),
        (["synthetic", "--set", "lr=0"], "lr"),
        (["synthetic", "--set", "lr=-0.1"], "lr"),
        (["synthetic", "--set", "lr=fast"], "lr"),
        (["synthetic", "--set", "seq_len=1"], "seq_len"),
        (["synthetic", "--set", "spectral_radius=0"], "spectral_radius"),
        (["synthetic", "--set", "variant=plain", "--set", "penalty=0.1"], "penalty"),
        (["synthetic", "--set", "hidden=2.5"], "hidden"),
        (["synthetic", "--set", "lr"], "--set"),
        (["synthetic", "--set", "lr=0.1", "--set", "lr=0.2"], "lr"),  # not the last silently
        (["synthetic", "--set", "lr=0.1,0.1"], "lr"),  # not two members alike
    ],
)
def test_bad_input_exits_2_naming_the_field(args, field, capsys):
    assert main(["train", *args]) == 2
    err = capsys.readouterr().err
    assert f"invalid {field}:" in err


def test_values_of_a_key_a_pack_shares_train_one_pack_after_another(monkeypatch, capsys):
    """``steps`` is one of the toy's ``PACK_FIELDS``: 2 × 2 values make two packs of two,
    trained in turn, and the summary lists the four in the order of the product."""
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    packs = []
    train = toy_experiment.train

    def spy(configs, reporter):
        packs.append([(c.steps, c.x) for c in configs])
        return train(configs, reporter)

    monkeypatch.setattr(toy_experiment, "train", spy)
    assert main(["train", "toy", "--json", "--set", "steps=1,2", "--set", "x=0.1,0.2"]) == 0
    assert packs == [[(1, 0.1), (1, 0.2)], [(2, 0.1), (2, 0.2)]]
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [(d["config"]["steps"], d["config"]["x"], d["summary"]["score"]) for d in doc] == [
        (1, 0.1, pytest.approx(1.0)), (1, 0.2, pytest.approx(2.0)),
        (2, 0.1, pytest.approx(1.0)), (2, 0.2, pytest.approx(2.0))]
    assert err.splitlines()[-1].startswith("4 configuration(s) done in ")


def test_ctrl_c_in_a_later_pack_gives_the_outcomes_of_the_packs_that_ended(monkeypatch,
                                                                          capsys):
    """Three packs (steps = 1, 2, 3); Ctrl-C while the second trains: the first pack's
    members are given their outcomes, the second's what they reached, the third's that
    they had not started."""
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    train = toy_experiment.train

    def second_interrupted(configs, reporter):
        if configs[0].steps == 2:
            reporter(Report(member=1, step=1, metrics={"value": 0.5}))
            raise KeyboardInterrupt
        return train(configs, reporter)

    monkeypatch.setattr(toy_experiment, "train", second_interrupted)
    assert main(["train", "toy", "--set", "steps=1,2,3", "--set", "x=0.1,0.2"]) == 130
    lines = capsys.readouterr().err.splitlines()
    start = next(i for i, line in enumerate(lines) if "reached so far:" in line)
    assert lines[start + 1:start + 7] == [
        "  [0] steps=1 x=0.1: unsolved at step 0 loss=0.1 value=0.1",
        "  [1] steps=1 x=0.2: unsolved at step 0 loss=0.2 value=0.2",
        "  [2] steps=2 x=0.1: nothing reported yet",
        "  [3] steps=2 x=0.2: step 1 value=0.5",
        "  [4] steps=3 x=0.1: not started",
        "  [5] steps=3 x=0.2: not started"]


@pytest.mark.parametrize(("error", "detail"), [
    (RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
                  "allocate memory: you tried to allocate 8000000000000 bytes. Error code 12"),
     "7.28 TiB asked"),
    (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                  "104857600 bytes. Error code 12"), "100 MiB asked"),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a "
                            "total capacity of 79.1 GiB"), "20.00 GiB asked"),
    (MemoryError(), "MemoryError"),
])
def test_sizes_beyond_the_machine_s_memory_end_in_one_line_exit_1(error, detail, monkeypatch,
                                                                  capsys):
    """An allocation that fails was a traceback (``hidden=1000000``: 8 TB)."""
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)

    def allocate(configs, reporter):
        raise error

    monkeypatch.setattr(toy_experiment, "train", allocate)
    assert main(["train", "toy", "--set", "steps=3"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"ortho train: out of memory ({detail}): "
        "the settings steps=3 need more than this machine has; smaller sizes (hidden, "
        "batch_size, seq_len, the pack) need less")
    assert "Traceback" not in err


def test_a_runtime_error_that_is_no_allocation_still_raises(monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)

    def broken(configs, reporter):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(toy_experiment, "train", broken)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        main(["train", "toy"])


def test_a_later_packs_missing_data_stops_before_the_first_pack_trains(monkeypatch, capsys):
    """The files of every pack are checked first: a dataset missing for the second pack
    stops the command (exit 2) before the first one trains."""
    from ortho_core.errors import DataError

    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    trained = []
    monkeypatch.setattr(toy_experiment, "train", lambda configs, reporter: trained.append(1))

    def check(module, configs):
        raise DataError("data/second.bin", "an existing file (no such file)")

    monkeypatch.setattr("sweeps.train_command.check_data", check)
    assert main(["train", "toy", "--set", "steps=1,2"]) == 2
    assert "invalid data/second.bin" in capsys.readouterr().err and trained == []


def test_an_unknown_key_is_named_and_the_known_ones_listed(capsys):
    """The message quotes no value: the key is what is wrong, and it leads the message."""
    assert main(["train", "synthetic", "--set", "nosuchkey=1"]) == 2
    known = sorted(f.name for f in dataclasses.fields(synthetic.Config) if f.init)
    assert capsys.readouterr().err == ("ortho train: invalid nosuchkey: expected a known key: "
                                       + ", ".join(known) + "\n")


def test_ctrl_c_prints_what_each_member_reached_then_interrupted(monkeypatch, capsys):
    """A trainer interrupted after some reports: each member's last step and latest metrics
    (a metric left out of its last report keeps its earlier value), then exit status 130."""

    def interrupted(configs, reporter):
        reporter(Report(0, 10, {"train_loss": 0.5, "val_error": 0.25, "other": 1.0}))
        reporter(Report(1, 10, {"loss": 0.75}))
        reporter(Report(0, 20, {"train_loss": 0.125}))
        raise KeyboardInterrupt

    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    monkeypatch.setattr(toy_experiment, "train", interrupted)
    assert main(["train", "toy", "--json", "--set", "x=0.1,0.2,0.3"]) == 130
    out, err = capsys.readouterr()
    assert out == ""  # no summary, no JSON: nothing ended
    head, *members, last = err.splitlines()[-5:]
    assert head.startswith("ortho train toy: stopped after ")
    assert head.endswith(" s; reached so far:")
    assert members == ["  [0] x=0.1: step 20 train_loss=0.125 val_error=0.25",
                       "  [1] x=0.2: step 10 loss=0.75",
                       "  [2] x=0.3: nothing reported yet"]
    assert last == "ortho train: interrupted"


def test_keys_lists_every_field_with_its_meaning_in_a_table(capsys):
    assert main(["train", "synthetic", "--keys"]) == 0
    out = capsys.readouterr().out
    config_part, _, summary_part = out.partition("\n\nWhat a member's summary holds")
    lines = config_part.splitlines()
    assert lines[0].split() == ["key", "default", "meaning"]
    meaning_at = lines[0].index("meaning")
    rows = {line.split()[0]: line for line in lines[2:] if line[:1].strip()}
    assert {"lr", "penalty", "pretrain_lr", "spectral_radius", "seq_len"} <= set(rows)
    assert rows["lr"].split()[1] == "0.01"
    assert rows["lr"].index("α: SGD learning rate") == meaning_at  # aligned under its header
    assert rows["task"].split()[1:3] == ["*", "'temporal_order'"]
    text = "\n".join(lines)
    assert "``" not in text and ":func:`" not in text and ":meth:`" not in text  # plain text
    assert "(see stream_seed)" in " ".join(text.split())
    # the keys every member of a pack shares are marked, and the mark is explained
    assert {k for k, line in rows.items() if line.split()[1] == "*"} == set(
        synthetic.PACK_FIELDS)
    assert lines[-1] == "* shared by a pack: several values train one pack after another"
    # then every key of a member's summary, which a spec's metric may name, and every key of
    # its reports, which a scheduler's metric_step may name
    summary_part, _, metrics_part = summary_part.partition("\n\nWhat its reports hold")
    summary_rows = {line.split()[0]: line for line in summary_part.splitlines()[4:]
                    if line[:1].strip()}
    assert set(summary_rows) == set(synthetic.SUMMARY)
    assert "longest sequence length T solved" in summary_rows["max_seq_len_solved"]
    metric_rows = {line.split()[0]: line for line in metrics_part.splitlines()[4:]
                   if line[:1].strip()}
    assert set(metric_rows) == set(synthetic.METRICS)
    assert "scheduler.metric_step" in metrics_part.splitlines()[0]


@pytest.mark.parametrize(("doc", "plain"), [
    ("``adding`` or ``xor``", "adding or xor"),
    ("see :func:`~ortho_core.a.stream_seed` and :mod:`ortho_core.data`",
     "see stream_seed and ortho_core.data"),
])
def test_docstring_markup_reads_as_plain_text(doc, plain):
    assert plain_text(doc) == plain


def _report(step: int, member: int = 0) -> Report:
    return Report(member=member, step=step, metrics={"train_loss": 0.5, "other": 1.0})


def test_progress_on_a_terminal_is_a_live_step_counter():
    stream = Terminal()
    progress = ProgressPrinter(2, stream)
    assert progress.bar is not None
    progress(_report(100, member=1))
    time.sleep(0.2)  # tqdm redraws at most every 0.1 s
    progress(_report(200))
    progress.close()
    shown = stream.getvalue()
    assert "200step" in shown.replace(" ", "")
    assert "member 0/2 train_loss=0.5" in shown
    assert "other=" not in shown  # the known metrics only


def test_progress_counts_toward_the_pack_s_planned_steps():
    bar = ProgressPrinter(2, Terminal(), planned=400)
    assert bar.bar is not None
    bar(_report(100))
    assert (bar.bar.n, bar.bar.total) == (100, 400)  # the bar shows 25 % and a time left
    bar.close()
    stream = io.StringIO()
    ProgressPrinter(1, stream, planned=400)(_report(100))
    assert stream.getvalue().rstrip().endswith("step 100/400 train_loss=0.5")


def test_a_progress_line_shows_the_training_accuracy_an_experiment_reports():
    """lcw-mlp reports K Fig. 12's curve, the training accuracy per epoch, beside its loss and
    test accuracy: the line shows it, and none of the epoch's bookkeeping."""
    stream = io.StringIO()
    ProgressPrinter(1, stream, planned=312)(Report(member=0, step=156, metrics={
        "epoch": 0.0, "lr": 0.1, "train_loss": 0.75, "train_accuracy": 0.625,
        "test_accuracy": 0.5, "epoch_time": 6.0}))
    assert stream.getvalue().rstrip().endswith(
        "step 156/312 train_loss=0.75 train_accuracy=0.625 test_accuracy=0.5")


def test_progress_elsewhere_is_a_sparse_line():
    stream = io.StringIO()
    progress = ProgressPrinter(1, stream, interval=60.0)
    assert progress.bar is None
    for step in (0, 100, 200):
        progress(_report(step))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1  # the first report at once, then nothing for a minute
    assert lines[0].endswith("step 0 train_loss=0.5")


def test_pack_run_as_subprocess_prints_progress_and_json_summary(tmp_path):
    cmd = [sys.executable, "-m", "sweeps.cli", "train", "synthetic", "--json",
           "--set", "task=temporal_order", "--set", "protocol=fixed", "--set", "seq_len=10",
           "--set", "max_iters=60", "--set", "eval_every=30", "--set", "val_size=100",
           "--set", "variant=plain,oinit", "--set", "lr=0.01"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [d["config"]["variant"] for d in doc] == ["plain", "oinit"]
    assert all(d["outcome"] in ("solved", "unsolved", "diverged") for d in doc)
    assert doc[1]["summary"]["pretrain_steps"] > 0
    assert "step" in proc.stderr  # live progress went to stderr


@pytest.mark.parametrize("as_json", [False, True])
def test_a_member_that_cannot_pretrain_fails_alone_and_the_command_exits_1(as_json, capsys):
    """The issue's case (``--set variant=plain,oinit --set pretrain_max_steps=2``, small):
    the plain member trains, the oinit one ends failed with its error, exit status 1."""
    argv = ["train", "synthetic", "--set", "variant=plain,oinit", "--set",
            "pretrain_max_steps=2", "--set", "protocol=fixed", "--set", "seq_len=10",
            "--set", "hidden=16", "--set", "max_iters=20", "--set", "eval_every=10",
            "--set", "val_size=50"]
    assert main(argv + (["--json"] if as_json else [])) == 1
    out, err = capsys.readouterr()
    assert "1 of 2 configuration(s) failed (member 1;" in err
    if as_json:
        doc = json.loads(out)
        assert doc[0]["outcome"] in ("solved", "unsolved") and "error" not in doc[0]
        assert doc[0]["summary"]["total_iters"] == 20
        assert doc[1]["outcome"] == "failed" and doc[1]["summary"] == {}
        assert [d["name"] for d in doc] == ["plain", "OINIT"]
        assert "pretrain_tol: orthogonal pre-training did not reach" in doc[1]["error"]
        assert "member 1: 2 steps" in doc[1]["error"]
    else:
        assert "[1] OINIT: failed\n      error: pretrain_tol:" in out
        assert "total_iters = 20" in out  # the plain member's summary
