"""Experiment ``polyphonic``: a tanh RNN predicts the next frame of a piano roll (G §4.2,
Tables 4.2-4.3, Fig. 4.3).

Run one configuration (or a pack) with ``ortho train polyphonic --set hidden=50 --set
epochs=1``. G's protocol on MuseData: 88 inputs, a tanh hidden layer of 50, 100, 200 or 300
units, 88 logistic outputs (eq. 4.1), the NLL per time step of eq. 4.2 as the loss, SGD with
μ = 10⁻³ along the anti-gradient and the clipped step of threshold τ = 3 (G Alg. 3.2 line 14:
the step is μ·g when ‖g‖ ≤ τ, μτ·g/‖g‖ above; :func:`ortho_core.optim.clip_factors` and
:func:`ortho_core.optim.sgd_step`), minibatches of songs "up to 300 steps, cutting the
original songs if they are longer". G Fig. 4.3 follows the train and validation losses and
marks the best validation value; Table 4.2 reports train and test NLL.

Where G's text is ambiguous, G's code (GiulioGx/RNNs, ``sources/datasets/MuseDataset.py``)
decides the defaults, and the other reading is a key:

- ``cut``: how a song is cut. ``window`` (G's code, its default ``split`` mode): every
  minibatch takes from each of its songs a window of min(300, its shortest song's steps)
  steps at an offset drawn uniformly, so that over the epochs every part of a song is
  trained on; ``truncate``: a song's first 300 steps only (the literal reading of
  "cutting", under which most of MuseData's frames are never trained on); ``split``:
  consecutive pieces of 300.
- ``predict_first``: False (G's code): a song's first frame is read only, so a song of L
  frames has L − 1 predictions, in training and evaluation alike (G: "predict which notes
  are going to be played next"); True: the first frame too, from a silent input.

G's code draws a minibatch's songs with replacement and counts iterations; here an epoch is
one pass over the shuffled songs (one window of each).

Choices where G is silent (each a key): the initialisation (G Alg. 3.2 draws every matrix
from N(0, σ²) and rescales W_hh to ρ; σ = 0.1 and ρ = 1.2, the ρ of G's synthetic
experiments, are the defaults); the minibatch size; the number of epochs; and whether the
evaluation sees whole songs (the default, as G's code and Boulanger-Lewandowski et al.
evaluate) or songs cut as for training. G does not stop early: the summaries hold the last
evaluation and the one with the lowest validation NLL (Fig. 4.3's stars), named
``selected_*``.

Packs: configurations that differ only in α (``lr``), τ (``clip``), the initialisation (σ, ρ)
or ``seed`` train together on the same minibatches; each member gives the numbers it would
give alone (up to float rounding of batched matrix products).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from ortho_core.config import (
    check_pack,
    integer_at_least,
    non_negative,
    one_of,
    optional_count,
    positive,
    require,
    seed_value,
)
from ortho_core.data.music import CUTS, FORMATS, N_NOTES, Songs, cut, load_music, music_dataset
from ortho_core.devices import DTYPES, check_runtime, resolve_device
from ortho_core.errors import DataError
from ortho_core.experiments.data_check import DataFile, music_files
from ortho_core.experiments.polyphonic_eval import marginal_nll, pad, split_nll
from ortho_core.metrics import member_norm, spectral_radius
from ortho_core.models.note_rnn import init_note_rnn, lead_frames, next_frame_pairs, song_nll
from ortho_core.models.srnn import SRNNInit
from ortho_core.optim import clip_factors, sgd_step
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import Subnormals, honours_subnormals

SPLIT_NAMES = ("train", "valid", "test")
"""The splits evaluated, in the order of the metric names."""


@dataclass
class Config:
    """One configuration of G's polyphonic music experiment (G §4.2, Tables 4.2-4.3)."""

    dataset: str = "musedata"
    """The piano rolls: ``musedata`` (G), ``jsb_chorales``, ``nottingham`` or
    ``piano_midi`` (Boulanger-Lewandowski et al.'s four sets, with their splits)."""
    data_format: Literal["pickle", "mat"] = "pickle"
    """Which file of the dataset to read (both hold the same rolls)."""
    hidden: int = 50
    """Hidden tanh units (G: 50, 100, 200, 300)."""
    lr: float = 1e-3
    """μ (α): SGD learning rate (G: 10⁻³)."""
    clip: float | None = 3.0
    """τ: the step is μτ·g/‖g‖ when the gradient norm ‖g‖ exceeds τ (G: 3); None or 0: no
    clipping."""
    init: Literal["gaussian", "normalised"] = "gaussian"
    """Initial W_xh, W_hh, W_hy: ``gaussian`` N(0, σ²) (G Alg. 3.2) or ``normalised``
    (Glorot uniform); biases 0."""
    init_std: float = 0.1
    """σ of the ``gaussian`` initialisation (G does not give it)."""
    spectral_radius: float | None = 1.2
    """ρ: rescale the initial W_hh to this spectral radius (G Alg. 3.1; 1.2 in G's
    synthetic experiments, not stated for music); None: no rescaling."""
    batch_size: int = 20
    """Songs per minibatch (G does not give it)."""
    epochs: int = 100
    """Passes over the training songs (G does not give it)."""
    max_len: int | None = 300
    """Training pieces have at most this many predicted steps (G: 300); None: whole songs."""
    cut: Literal["window", "truncate", "split"] = "window"
    """How a longer song is cut: ``window`` (G's code: for every minibatch, a window of
    min(``max_len``, the steps of its shortest song) steps at a random offset of each song),
    ``truncate`` (its first ``max_len`` steps) or ``split`` (consecutive pieces of
    ``max_len``, none lost)."""
    predict_first: bool = False
    """Predict a song's first frame too, from a silent input frame; False (G's code): the
    first frame is read only, and frames 2 … L are predicted."""
    eval_whole: bool = True
    """Evaluate the NLL on whole songs (as G's code and Boulanger-Lewandowski et al.); False:
    on songs cut as for training (not with ``cut: window``, whose windows are drawn per
    minibatch)."""
    eval_every: int = 1
    """Epochs between evaluations of the train, valid and test NLL (the last epoch always)."""
    train_size: int | None = None
    """Train on a random subset of this many training songs (drawn with ``data_seed``) and
    evaluate the train NLL on them; None: all. For cheap profiles."""
    data_dir: str | None = None
    """Directory holding ``music/``; None: ``$ORTHO_DATA_DIR``, else
    ``~/.cache/ortho-sweeps/data``."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the data stream (the subset and every epoch's shuffle), shared by a pack."""
    device: str = "cpu"
    """Where to train: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""
    subnormals: Subnormals = "flush"
    """CPU arithmetic on subnormal numbers (below 1.2e-38 in float32): ``flush`` reads and
    writes them as 0, several times faster where gradients vanish; ``keep`` computes them as
    IEEE 754 does (:mod:`ortho_core.subnormals`). No effect on a GPU."""
    dtype: Literal["float32", "float64"] = "float32"
    """Training precision."""

    def __post_init__(self) -> None:
        info = music_dataset(self.dataset)
        one_of(self.data_format, FORMATS, "data_format")
        for name in ("hidden", "batch_size", "epochs", "eval_every"):
            integer_at_least(getattr(self, name), name, 1)
        positive(self.lr, "lr")
        if self.clip is not None:
            non_negative(self.clip, "clip")
        one_of(self.init, ("gaussian", "normalised"), "init")
        positive(self.init_std, "init_std")
        if self.spectral_radius is not None:
            positive(self.spectral_radius, "spectral_radius")
        optional_count(self.max_len, "max_len", 1_000_000)
        one_of(self.cut, CUTS, "cut")
        require(isinstance(self.predict_first, bool), "predict_first", "true or false",
                self.predict_first)
        require(isinstance(self.eval_whole, bool), "eval_whole", "true or false",
                self.eval_whole)
        require(self.eval_whole or self.cut != "window", "eval_whole",
                "true with cut window (its windows are drawn per minibatch)", self.eval_whole)
        optional_count(self.train_size, "train_size", info.songs[0])
        seed_value(self.seed, "seed")
        seed_value(self.data_seed, "data_seed")
        check_runtime(self.device, self.subnormals)
        one_of(self.dtype, tuple(DTYPES), "dtype")


PACK_FIELDS: tuple[str, ...] = (
    "dataset", "data_format", "hidden", "batch_size", "epochs", "max_len", "cut",
    "predict_first", "eval_whole", "eval_every", "train_size", "data_dir", "data_seed",
    "device", "subnormals", "dtype",
)
"""Fields equal across a pack; α, τ, the initialisation (scheme, σ, ρ) and seed may differ."""


@dataclass
class _Data:
    """The songs of one run as uint8 tensors: training pieces, and what each split is
    evaluated on."""

    train: list[Tensor]
    evaluate: dict[str, list[Tensor]]


def training_songs(cfg: Config, generator: torch.Generator) -> Songs:
    """The training songs of ``cfg``, uncut: the training split, or the subset of
    ``train_size`` of them drawn with ``generator`` (in the split's order)."""
    songs = load_music(cfg.dataset, "train", data_format=cfg.data_format,
                       data_dir=cfg.data_dir)
    if cfg.train_size is None:
        return songs
    chosen = torch.randperm(len(songs), generator=generator)[:cfg.train_size]
    return [songs[i] for i in sorted(chosen.tolist())]


def planned_steps(config: Config) -> int:
    """The ``step`` (training iterations, one per minibatch) of the last report of a member
    that trains all its ``epochs``: each epoch takes every training piece once in minibatches
    of ``batch_size``, the last one smaller, and the last epoch is always evaluated. A piece is
    a song (``train_size`` of them, or the split's published count), except with ``cut:
    split`` and a ``max_len``, where a song gives as many pieces as its length asks: those are
    counted on the songs themselves, so this reads the dataset (the training subset drawn from
    ``data_seed`` as :func:`train` draws it). G does not stop early, so only a diverging
    member ends before it."""
    if config.cut == "split" and config.max_len is not None:
        songs = training_songs(config, torch.Generator().manual_seed(config.data_seed))
        pieces = len(cut(songs, config.max_len, config.cut, lead_frames(config.predict_first)))
    else:
        pieces = config.train_size or music_dataset(config.dataset).songs[0]
    return config.epochs * math.ceil(pieces / config.batch_size)


def load_data(cfg: Config, generator: torch.Generator) -> _Data:
    """Read the dataset, draw the training subset with ``generator`` and cut the songs
    (``window``: left whole, :func:`windows` draws from them)."""
    raw = {split: training_songs(cfg, generator) if split == "train"
           else load_music(cfg.dataset, split, data_format=cfg.data_format,
                           data_dir=cfg.data_dir) for split in SPLIT_NAMES}

    def tensors(songs: Sequence) -> list[Tensor]:
        return [torch.from_numpy(song.copy()) for song in songs]

    lead = lead_frames(cfg.predict_first)
    for split, songs in raw.items():
        short = next((i for i, song in enumerate(songs) if len(song) <= lead), None)
        if short is not None:
            raise DataError(f"{cfg.dataset} ({split} song {short})",
                            "a song of at least 2 frames (predict_first is false)", "1 frame")
    train = tensors(cut(raw["train"], cfg.max_len, cfg.cut, lead))
    evaluate = {split: tensors(songs if cfg.eval_whole else cut(songs, cfg.max_len, cfg.cut,
                                                                  lead))
                for split, songs in raw.items()}
    return _Data(train, evaluate)


def windows(songs: Sequence[Tensor], max_len: int | None, lead: int,
            generator: torch.Generator) -> list[Tensor]:
    """One window of each of a minibatch's ``songs``, as G's code cuts them: min(``max_len``,
    the predicted steps of the shortest song) steps (``lead`` frames more, read only), at an
    offset drawn uniformly from every offset that fits in its song."""
    steps = min(len(song) for song in songs) - lead
    if max_len is not None:
        steps = min(steps, max_len)
    frames = steps + lead
    starts = [int(torch.randint(len(song) - frames + 1, (), generator=generator))
              for song in songs]
    return [song[start:start + frames] for song, start in zip(songs, starts, strict=True)]


def _evaluate(model, data: _Data, dtype: torch.dtype, device: torch.device,
              predict_first: bool) -> dict[str, Tensor]:
    """``{split}_nll`` and ``{split}_nll_frame`` for every split, each (K,) float64."""
    out = {}
    for split in SPLIT_NAMES:
        measured = split_nll(model, data.evaluate[split], dtype, device, predict_first)
        out[f"{split}_nll"], out[f"{split}_nll_frame"] = measured.nll, measured.nll_frame
    return out


def data_files(config: Config) -> tuple[DataFile, ...]:
    """The file ``config`` reads: its ``dataset`` in its ``data_format``
    (:mod:`ortho_core.experiments.data_check`)."""
    return music_files(config.dataset, config.data_format)


METRICS: dict[str, str] = {
    "epoch": "epochs trained",
    **{f"{split}_nll": f"G eq. 4.2 on the {split} set: the mean over songs of each song's "
       "NLL per step" for split in ("train", "valid", "test")},
    **{f"{split}_nll_frame": f"NLL of all the {split} set's frames over their number"
       for split in ("train", "valid", "test")},
    "batch_loss": "the mean minibatch loss since the last evaluation",
    "grad_norm": "mean ‖g‖ before clipping since the last evaluation",
    "clipped_fraction": "of those steps, the fraction with ‖g‖ > τ",
    "spectral_radius": "ρ(W_hh)",
}
"""Every key a report's metrics can hold, with its meaning (what a spec's
``scheduler.metric_step`` may name): see :func:`train`."""

SUMMARY: dict[str, str] = {
    **{f"{split}_{kind}": f"{split} NLL {per} at the last evaluation"
       for split in SPLIT_NAMES
       for kind, per in (("nll", "per time step"), ("nll_frame", "per frame"))},
    **{f"selected_{split}_{kind}": f"{split} NLL {per} at the evaluation of best valid_nll"
       for split in SPLIT_NAMES
       for kind, per in (("nll", "per time step"), ("nll_frame", "per frame"))},
    "selected_epoch": "the epoch of the best valid_nll",
    "baseline_valid_nll": "valid NLL per time step of the training notes' marginals",
    "baseline_valid_nll_frame": "the same per frame",
    "epochs": "epochs trained",
    "iterations": "training iterations",
    "wall_time": "seconds the pack trained",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack of polyphonic configurations; evaluate every ``eval_every`` epochs.

    An epoch is one pass over the shuffled training pieces in minibatches of ``batch_size``
    (the last one smaller; with ``cut: window``, one window of each song of the minibatch,
    :func:`windows`). The loss of a minibatch is the mean over its songs of G eq. 4.2.
    A member whose loss or gradient norm becomes NaN or inf is ``diverged`` and frozen.

    Metrics per evaluation: ``epoch``; ``train_nll``, ``valid_nll``, ``test_nll`` (G eq. 4.2:
    the mean over songs of each song's NLL per step) and ``train_nll_frame``,
    ``valid_nll_frame``, ``test_nll_frame`` (Boulanger-Lewandowski et al.: NLL of all frames
    over their number); ``batch_loss`` (the mean minibatch loss since the last evaluation);
    ``grad_norm`` (mean ‖g‖ before clipping) and ``clipped_fraction`` (of those steps, the
    fraction with ‖g‖ > τ); ``spectral_radius`` ρ(W_hh).

    Summary: the six NLLs of the last evaluation; the same with the prefix ``selected_`` and
    ``selected_epoch`` at the evaluation with the lowest ``valid_nll`` (G Fig. 4.3's stars);
    ``baseline_valid_nll`` and ``baseline_valid_nll_frame`` (notes independent of the past,
    sounding with their training frequency); ``epochs``, ``iterations``, ``wall_time``. A
    member is ``solved`` when its selected ``valid_nll`` beats the baseline's.
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    device, dtype = resolve_device(cfg.device), DTYPES[cfg.dtype]
    k = len(configs)
    data_gen = torch.Generator().manual_seed(cfg.data_seed)
    data = load_data(cfg, data_gen)
    lead = lead_frames(cfg.predict_first)
    inits = [SRNNInit(c.seed, c.init, c.init_std, c.spectral_radius) for c in configs]
    model = init_note_rnn(cfg.hidden, inits, N_NOTES, dtype, device)
    params = model.params
    lr = torch.tensor([c.lr for c in configs], dtype=dtype, device=device)
    clips = [c.clip or 0.0 for c in configs]
    clip = torch.tensor(clips, dtype=dtype, device=device) if any(clips) else None
    active = torch.ones(k, dtype=torch.bool, device=device)
    baseline = marginal_nll(data.train, data.evaluate["valid"], cfg.predict_first)
    sums = torch.zeros(4, k, dtype=torch.float64, device=device)
    best: dict[str, Tensor] = {}
    last: dict[str, Tensor] = {}
    iterations = 0
    epochs_run = torch.zeros(k, dtype=torch.long, device=device)
    n = len(data.train)
    for epoch in range(1, cfg.epochs + 1):
        order = torch.randperm(n, generator=data_gen).tolist()
        for start in range(0, n, cfg.batch_size):
            songs = [data.train[i] for i in order[start:start + cfg.batch_size]]
            if cfg.cut == "window":
                songs = windows(songs, cfg.max_len, lead, data_gen)
            inputs, targets, mask = next_frame_pairs(*pad(songs, dtype, device),
                                                     cfg.predict_first)
            logits, _ = model.logits(inputs)
            losses = song_nll(logits, targets, mask).mean(dim=1)
            grads = list(torch.autograd.grad(losses.sum(), params))
            norm = member_norm(grads)
            factor = clip_factors(norm, clip)
            sums += torch.stack([losses.detach(), norm, (factor < 1).to(norm.dtype),
                                 torch.ones_like(norm)]).double()
            active &= torch.isfinite(losses.detach()) & torch.isfinite(norm)
            grads = [g * factor.view(-1, *[1] * (g.dim() - 1)) for g in grads]
            sgd_step(params, grads, lr, active, overwrite_grads=True)
            iterations += 1
        epochs_run += active
        if epoch % cfg.eval_every and epoch != cfg.epochs:
            continue
        last = _evaluate(model, data, dtype, device, cfg.predict_first)
        radius = spectral_radius(model.w_hh.detach())
        improved = active & ~(last["valid_nll"] >= best.get("valid_nll", math.inf))
        improved &= torch.isfinite(last["valid_nll"])
        best["epoch"] = torch.where(improved, epoch, best.get("epoch", torch.zeros_like(
            epochs_run))).to(torch.float64)
        for key, value in last.items():
            best[key] = torch.where(improved, value, best.get(key, torch.full_like(value,
                                                                              math.nan)))
        means = sums[:3] / sums[3]
        for member in active.nonzero().flatten().tolist():
            metrics = {"epoch": float(epoch), "batch_loss": float(means[0, member]),
                       "grad_norm": float(means[1, member]),
                       "clipped_fraction": float(means[2, member]),
                       "spectral_radius": float(radius[member])}
            metrics.update({key: float(value[member]) for key, value in last.items()})
            reporter(Report(member=member, step=iterations, metrics=metrics))
        sums.zero_()
        if not bool(active.any()):
            break
    wall = time.monotonic() - started
    return [_result(member, bool(active[member]), last, best, baseline, float(epochs_run[member]),
                    iterations, wall) for member in range(k)]


def _result(member: int, alive: bool, last: dict[str, Tensor], best: dict[str, Tensor],
            baseline: tuple[float, float], epochs: float, iterations: int,
            wall: float) -> Result:
    summary = {key: float(value[member]) for key, value in last.items()}
    summary |= {f"selected_{key}": float(value[member]) for key, value in best.items()}
    summary |= {"baseline_valid_nll": baseline[0], "baseline_valid_nll_frame": baseline[1],
                "epochs": epochs, "iterations": float(iterations), "wall_time": wall}
    selected = summary.get("selected_valid_nll", math.nan)
    if not alive:
        outcome = Outcome.DIVERGED
    elif selected < baseline[0]:
        outcome = Outcome.SOLVED
    else:
        outcome = Outcome.UNSOLVED
    return Result(outcome=outcome, summary=summary)
