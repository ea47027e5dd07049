"""What the ``polyphonic`` trainer does with songs besides the SGD step: pad them into batches
with masks, and measure a pack's NLL per time step on a whole split in both conventions.

Two conventions of "NLL per time step" are in use, and the papers compare across them:

- G eq. 4.2 (``nll``): each song's NLL divided by its own number T of predicted steps, then
  the mean over the songs of the split. G's training loss is this quantity on a minibatch.
- Boulanger-Lewandowski et al. (ICML 2012; ``nll_frame``): the NLL of all predicted frames
  of the split divided by their number, so that long songs weigh more. The published
  references of G Table 4.3 are in this convention.

Which frames are predicted (every frame, or all but each song's first) is the trainer's
``predict_first`` (:func:`~ortho_core.models.note_rnn.next_frame_pairs`); both conventions
and the baseline count the same frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ortho_core.models.note_rnn import PackedNoteRNN, lead_frames, next_frame_pairs, step_nll

EVAL_BATCH = 64
"""Songs evaluated together (sorted by length, so that little is padding)."""
EVAL_WINDOW = 256
"""Steps forwarded at once when evaluating; the hidden state carries over, so memory does
not grow with the song."""


def pad(songs: Sequence[Tensor], dtype: torch.dtype, device: torch.device) -> tuple[Tensor,
                                                                                 Tensor]:
    """``songs`` (uint8 (T_b, 88) each) as rolls (B, T_max, 88) of ``dtype`` padded with
    silence, and the mask (B, T_max) of real steps (in ``dtype``, 1 or 0)."""
    longest = max(len(song) for song in songs)
    rolls = torch.zeros(len(songs), longest, songs[0].shape[1], dtype=dtype)
    mask = torch.zeros(len(songs), longest, dtype=dtype)
    for b, song in enumerate(songs):
        rolls[b, :len(song)] = song
        mask[b, :len(song)] = 1
    return rolls.to(device), mask.to(device)


@dataclass
class SplitNLL:
    """A pack's NLL per time step on one split, both conventions, each (K,)."""

    nll: Tensor
    """G eq. 4.2: the mean over songs of each song's NLL divided by its length."""
    nll_frame: Tensor
    """Boulanger-Lewandowski et al.: the NLL of all frames divided by the number of frames."""


def song_sums(model: PackedNoteRNN, songs: Sequence[Tensor], dtype: torch.dtype,
              device: torch.device, predict_first: bool) -> Tensor:
    """Every song's NLL summed over its predicted steps (K, S), in the order of ``songs``,
    without gradients; songs are batched by length and forwarded in windows of
    :data:`EVAL_WINDOW`."""
    order = sorted(range(len(songs)), key=lambda i: len(songs[i]), reverse=True)
    k = model.w_hh.shape[0]
    sums = torch.zeros(k, len(songs), dtype=torch.float64, device=device)
    with torch.no_grad():
        for start in range(0, len(order), EVAL_BATCH):
            index = order[start:start + EVAL_BATCH]
            rolls, mask = pad([songs[i] for i in index], dtype, device)
            inputs, targets, mask = next_frame_pairs(rolls, mask, predict_first)
            h = None
            total = torch.zeros(k, len(index), dtype=torch.float64, device=device)
            for t in range(0, inputs.shape[1], EVAL_WINDOW):
                window = slice(t, t + EVAL_WINDOW)
                logits, h = model.logits(inputs[:, window], h)
                total += step_nll(logits, targets[:, window], mask[:, window]).sum(-1).double()
            sums[:, torch.tensor(index, device=device)] = total
    return sums


def split_nll(model: PackedNoteRNN, songs: Sequence[Tensor], dtype: torch.dtype,
              device: torch.device, predict_first: bool) -> SplitNLL:
    """The pack's NLL per time step on ``songs`` in both conventions (:class:`SplitNLL`)."""
    sums = song_sums(model, songs, dtype, device, predict_first)
    lead = lead_frames(predict_first)
    lengths = torch.tensor([len(s) - lead for s in songs], dtype=torch.float64, device=device)
    return SplitNLL(nll=(sums / lengths).mean(dim=1), nll_frame=sums.sum(dim=1) / lengths.sum())


def marginal_nll(train: Sequence[Tensor], songs: Sequence[Tensor],
                 predict_first: bool) -> tuple[float, float]:
    """NLL per time step on the predicted frames of ``songs`` (G eq. 4.2, then frame
    convention) of the model that ignores time: every note sounds with its frequency in
    ``train``'s frames, clamped to [10⁻⁶, 1 − 10⁻⁶]. A trained RNN must beat it to have
    learned anything from the past."""
    frames = torch.cat([s.double() for s in train])
    p = frames.mean(dim=0).clamp(1e-6, 1 - 1e-6)
    on, off = -torch.log(p), -torch.log1p(-p)
    songs = [s[lead_frames(predict_first):] for s in songs]
    sums = torch.stack([(s.double() @ (on - off)).sum() + len(s) * off.sum() for s in songs])
    lengths = torch.tensor([len(s) for s in songs], dtype=torch.float64)
    return float((sums / lengths).mean()), float(sums.sum() / lengths.sum())
