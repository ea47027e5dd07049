"""The polyphonic trainer: G eq. 4.2 on a small piano roll computed by hand (every frame
predicted, or all but the first as in G's code), the pooled convention, G's code's random
windows, the clipped step, pack members equal to themselves alone, bad input through
``ortho train``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ortho_core.config import from_dict
from ortho_core.experiments import polyphonic
from ortho_core.experiments.polyphonic_eval import marginal_nll, pad, split_nll
from ortho_core.models.note_rnn import PackedNoteRNN, next_frame_pairs, song_nll
from ortho_core.reporting import Outcome
from sweeps.cli import main

ROLL = [[1, 0], [1, 1], [0, 1]]
"""A song of three steps over two notes."""
W_XH, W_HH, B_H, W_HY, B_Y = [[0.5], [-1.0]], 0.8, 0.1, [1.5, -0.7], [-0.2, 0.3]
"""A one-unit RNN reading and predicting two notes."""


def tiny_model() -> PackedNoteRNN:
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    w_xh = t([W_XH]).reshape(1, 1, 2)
    return PackedNoteRNN(w_xh, t([[[W_HH]]]), t([[B_H]]), t([W_HY]).reshape(1, 2, 1),
                         t([B_Y]))


def by_hand(roll: list[list[int]], predict_first: bool) -> float:
    """G eq. 4.2 with its sign turned, step by step in plain floats: frame t predicts frame
    t + 1; with ``predict_first`` a silent input first predicts frame 1."""
    h, total = 0.0, 0.0
    inputs = [[0, 0], *roll[:-1]] if predict_first else roll[:-1]
    targets = roll if predict_first else roll[1:]
    for previous, frame in zip(inputs, targets, strict=True):
        h = math.tanh(W_XH[0][0] * previous[0] + W_XH[1][0] * previous[1] + W_HH * h + B_H)
        for i in range(2):
            y = 1 / (1 + math.exp(-(W_HY[i] * h + B_Y[i])))
            total -= frame[i] * math.log(y) + (1 - frame[i]) * math.log(1 - y)
    return total / len(targets)


@pytest.mark.parametrize("predict_first", [True, False])
def test_song_nll_is_g_eq_4_2_by_hand(predict_first):
    roll = torch.tensor([ROLL], dtype=torch.float64)
    inputs, targets, mask = next_frame_pairs(roll, torch.ones(1, 3, dtype=torch.float64),
                                             predict_first)
    logits, _ = tiny_model().logits(inputs)
    nll = song_nll(logits, targets, mask).detach()
    assert float(nll[0, 0]) == pytest.approx(by_hand(ROLL, predict_first), rel=1e-12)
    assert by_hand(ROLL, True) != pytest.approx(by_hand(ROLL, False), rel=1e-3)


@pytest.mark.parametrize("predict_first", [True, False])
def test_split_nll_averages_songs_or_pools_frames_and_ignores_padding(predict_first):
    short_roll = ROLL[:1] if predict_first else ROLL[:2]
    songs = [torch.tensor(r, dtype=torch.uint8) for r in (ROLL, short_roll)]
    measured = split_nll(tiny_model(), songs, torch.float64, torch.device("cpu"),
                         predict_first)
    long, short = by_hand(ROLL, predict_first), by_hand(short_roll, predict_first)
    assert float(measured.nll[0]) == pytest.approx((long + short) / 2, rel=1e-12)
    n_long, n_short = (3, 1) if predict_first else (2, 1)  # predicted frames
    assert float(measured.nll_frame[0]) == pytest.approx(
        (n_long * long + n_short * short) / (n_long + n_short), rel=1e-12)


def test_marginal_nll_uses_training_frequencies_on_the_predicted_frames():
    train = [torch.tensor([[1, 0], [0, 0]], dtype=torch.uint8)]
    songs = [torch.tensor([[1, 1]], dtype=torch.uint8)]
    per_song, pooled = marginal_nll(train, songs, predict_first=True)
    assert per_song == pooled == pytest.approx(-math.log(0.5) - math.log(1e-6), rel=1e-9)
    # without the first frame only [1, 0] is predicted: note 0 at 1/2, note 1 off at 1 − 10⁻⁶
    songs = [torch.tensor([[1, 1], [1, 0]], dtype=torch.uint8)]
    per_song, pooled = marginal_nll(train, songs, predict_first=False)
    assert per_song == pooled == pytest.approx(-math.log(0.5) - math.log1p(-1e-6), rel=1e-9)


def test_windows_are_g_s_code_s_random_windows():
    """G's code (MuseDataset, split mode) gives each song of a minibatch a window of
    min(300, shortest − 1) predicted steps at an offset uniform over all that fit, inputs its
    frames and targets the same shifted by one."""
    songs = [torch.arange(n).reshape(n, 1) for n in (40, 12, 500)]
    gen = torch.Generator().manual_seed(0)
    starts: list[list[int]] = [[], [], []]
    for _ in range(2000):
        pieces = polyphonic.windows(songs, 300, 1, gen)
        assert [len(p) for p in pieces] == [12, 12, 12]  # 11 steps from the 12-frame song
        for b, piece in enumerate(pieces):
            first = int(piece[0, 0])
            assert piece[:, 0].tolist() == list(range(first, first + 12))
            starts[b].append(first)
    assert set(starts[1]) == {0}
    assert set(starts[0]) == set(range(29)) and set(starts[2]) <= set(range(489))
    assert sum(starts[2]) / 2000 == pytest.approx(244, abs=10)  # uniform over 0 … 488
    long = polyphonic.windows([songs[2], torch.arange(400).reshape(400, 1)], 300, 1, gen)
    assert [len(p) for p in long] == [301, 301]
    inputs, targets, mask = next_frame_pairs(*pad(long, torch.float64, torch.device("cpu")),
                                             False)
    assert inputs.shape[1] == targets.shape[1] == 300 and bool(mask.all())
    assert torch.equal(targets[:, :-1], inputs[:, 1:])


def small(**changes) -> polyphonic.Config:
    values = dict(dataset="jsb_chorales", hidden=6, epochs=2, train_size=12, max_len=20,
                  batch_size=4, dtype="float64") | changes
    return from_dict(polyphonic.Config, values)


def collect(configs):
    reports = []
    results = polyphonic.train(configs, reports.append)
    return reports, results


def test_pack_members_equal_training_alone(shared_data: Path):
    configs = [small(lr=0.01, seed=0), small(lr=0.05, seed=1, clip=None),
               small(lr=0.02, seed=2, spectral_radius=0.9, init="normalised")]
    pack_reports, pack_results = collect(configs)
    assert all(r.outcome is not Outcome.DIVERGED for r in pack_results)
    for member, cfg in enumerate(configs):
        alone_reports, (alone,) = collect([cfg])
        mine = [r for r in pack_reports if r.member == member]
        assert [r.step for r in mine] == [r.step for r in alone_reports] == [3, 6]
        for a, b in zip(mine, alone_reports, strict=True):
            assert a.metrics == pytest.approx(b.metrics, rel=1e-9)
        mine_summary, alone_summary = (
            {k: v for k, v in r.summary.items() if k != "wall_time"}
            for r in (pack_results[member], alone))
        assert mine_summary == pytest.approx(alone_summary, rel=1e-9)
    # the members differ, so equality above is not a pack of copies
    assert len({round(r.summary["test_nll"], 9) for r in pack_results}) == 3


def test_every_step_is_clipped_to_tau_and_training_lowers_the_nll(shared_data: Path):
    reports, (result,) = collect([small(lr=0.5, clip=1.0, epochs=3, eval_every=3)])
    (report,) = reports
    assert report.metrics["clipped_fraction"] == 1.0 and report.metrics["grad_norm"] > 1.0
    start = 88 * math.log(2)  # sigmoid(0) outputs; tiny initial weights stay close to it
    assert result.summary["train_nll"] < start - 10
    assert result.summary["selected_epoch"] == 3
    assert result.summary["epochs"] == 3 and result.summary["iterations"] == 9


@pytest.mark.parametrize(("args", "field"), [
    (["--set", "dataset=bach"], "dataset"),
    (["--set", "cut=fold"], "cut"),
    (["--set", "eval_whole=false"], "eval_whole"),  # windows are drawn per minibatch
    (["--set", "hidden=0"], "hidden"),
    (["--set", "lr=-1"], "lr"),
    (["--set", "train_size=300", "--set", "dataset=jsb_chorales"], "train_size"),
    (["--set", "hidden=50,0"], "hidden"),  # every member is checked before any trains
])
def test_bad_input_exits_2_naming_the_field(args, field, capsys):
    assert main(["train", "polyphonic", *args]) == 2
    assert f"invalid {field}:" in capsys.readouterr().err


def test_missing_or_malformed_file_exits_2_naming_it(tmp_path: Path, capsys):
    (tmp_path / "music").mkdir()
    base = ["train", "polyphonic", "--set", "dataset=jsb_chorales", "--set",
            f"data_dir={tmp_path}"]
    missing = tmp_path / "music" / "JSB Chorales.pickle"
    assert main(base) == 2
    assert f"invalid {missing}:" in capsys.readouterr().err
    bad = tmp_path / "music" / "JSB_Chorales.mat"
    bad.write_bytes(b"MATLAB? no")
    assert main([*base, "--set", "data_format=mat"]) == 2
    err = capsys.readouterr().err
    assert f"invalid {bad}:" in err and "dc87109f2b96bd44f9ce21d117766594" in err
