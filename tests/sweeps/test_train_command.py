"""``ortho train``: bad input exits 2 naming the field; a run prints progress and a summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sweeps.cli import main


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
        (["synthetic", "--set", "seq_len=10,20"], "seq_len"),  # a pack must share its shape
        (["synthetic", "--set", "lr"], "--set"),
    ],
)
def test_bad_input_exits_2_naming_the_field(args, field, capsys):
    assert main(["train", *args]) == 2
    err = capsys.readouterr().err
    assert f"invalid {field}:" in err


def test_keys_lists_every_field_with_its_meaning(capsys):
    assert main(["train", "synthetic", "--keys"]) == 0
    out = capsys.readouterr().out
    for key in ("lr = ", "penalty = ", "pretrain_lr = ", "spectral_radius = ", "seq_len = "):
        assert key in out
    assert "learning rate" in out.lower()


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
