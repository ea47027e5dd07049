"""A pack of K tanh RNNs that predict the next frame of a piano roll (G §4.2), and their
negative log-likelihood per time step (G eq. 4.2).

Member k reads frame x_t and computes h_t = tanh(W_xh x_t + W_hh h_{t−1} + b_h) from h_0 = 0,
and y_t = σ(W_hy h_t + b_y): 88 logistic outputs (G eq. 4.1), the probability that each note
sounds at step t + 1. A song of L frames is predicted in one of two ways
(:func:`next_frame_pairs`): frames 2 … L from frames 1 … L − 1, L − 1 predictions, as G's
code does (GiulioGx/RNNs, ``MuseDataset``: outputs are the inputs shifted by one step); or
every frame, the first from a silent input frame (h_1 alone), L predictions, as the
generative models of Boulanger-Lewandowski et al. score a whole song.

Unlike the SRNN of the synthetic problems (:mod:`ortho_core.models.srnn`, a last-step readout
with hand-written BPTT), every step has an output here; the recurrence is plain batched
matrix products (``bmm`` over the pack) differentiated by autograd, which is fast enough for
songs cut at a few hundred steps. Songs of one batch have different lengths: they are padded
with silence and a mask (B, T) marks the real steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ortho_core.models.srnn import SRNNInit, init_srnn


class PackedNoteRNN:
    """K independent next-frame RNNs; parameters carry a leading K.

    ``w_xh`` (K, H, I), ``w_hh`` (K, H, H), ``b_h`` (K, H), ``w_hy`` (K, O, H), ``b_y``
    (K, O), all leaf tensors that require gradients.
    """

    def __init__(self, w_xh: Tensor, w_hh: Tensor, b_h: Tensor, w_hy: Tensor, b_y: Tensor):
        self.params = [t.detach().clone().requires_grad_(True)
                       for t in (w_xh, w_hh, b_h, w_hy, b_y)]

    @property
    def w_hh(self) -> Tensor:
        """The recurrent matrices (K, H, H)."""
        return self.params[1]

    def logits(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Output pre-activations (K, B, T, O) for the shared inputs ``x`` (B, T, I), and the
        last hidden state (K, B, H) to continue from; ``h0`` (K, B, H) defaults to zeros."""
        w_xh, w_hh, b_h, w_hy, b_y = self.params
        k, n_hidden = w_hh.shape[:2]
        batch, steps, n_in = x.shape
        drive = torch.matmul(x.reshape(1, batch * steps, n_in), w_xh.transpose(1, 2))
        drive = (drive + b_h.unsqueeze(1)).reshape(k, batch, steps, n_hidden)
        h = x.new_zeros(k, batch, n_hidden) if h0 is None else h0
        w_hh_t = w_hh.transpose(1, 2)
        states = []
        for t in range(steps):
            h = torch.tanh(torch.baddbmm(drive[:, :, t], h, w_hh_t))
            states.append(h)
        hs = torch.stack(states, dim=2).reshape(k, batch * steps, n_hidden)
        out = torch.baddbmm(b_y.unsqueeze(1), hs, w_hy.transpose(1, 2))
        return out.reshape(k, batch, steps, -1), h


def init_note_rnn(n_hidden: int, inits: Sequence[SRNNInit], n_notes: int = 88,
                  dtype: torch.dtype = torch.float32,
                  device: str | torch.device = "cpu") -> PackedNoteRNN:
    """A pack with one member per entry of ``inits``, drawn by
    :func:`~ortho_core.models.srnn.init_srnn`: W_xh, W_hh, W_hy from the member's seed
    (Glorot's normalised or N(0, σ²)), W_hh rescaled to ρ if given (G Alg. 3.1), biases 0
    (G Alg. 3.2, lines 1-4). A member's initial weights do not depend on the pack."""
    srnn = init_srnn(n_notes, n_hidden, n_notes, inits, dtype=dtype, device=device)
    return PackedNoteRNN(srnn.w_xh, srnn.w_hh, srnn.b_h, srnn.w_hy, srnn.b_y)


def lead_frames(predict_first: bool) -> int:
    """Frames at the start of a song that are read but not predicted: none with
    ``predict_first``, else its first frame (:func:`next_frame_pairs`)."""
    return 0 if predict_first else 1


def next_frame_pairs(rolls: Tensor, mask: Tensor, predict_first: bool) -> tuple[Tensor, Tensor,
                                                                                Tensor]:
    """Inputs, targets and the targets' mask for songs ``rolls`` (B, T, O) padded after their
    ``mask`` (B, T): with ``predict_first``, a silent frame then frames 1 … T − 1 predict
    frames 1 … T; without, frames 1 … T − 1 predict frames 2 … T (a song's first frame is
    read only)."""
    if predict_first:
        return F.pad(rolls[:, :-1], (0, 0, 1, 0)), rolls, mask
    return rolls[:, :-1], rolls[:, 1:], mask[:, 1:]


def step_nll(logits: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """−Σ_i [ȳ_i log y_i + (1 − ȳ_i) log(1 − y_i)] at every step (K, B, T), 0 where ``mask``
    (B, T) is False; ``logits`` (K, B, T, O), ``target`` (B, T, O) of 0/1.

    This is the summand of G eq. 4.2 with its sign turned (eq. 4.2 writes the log-likelihood;
    the tables report its negative), computed from the logits for stability."""
    bce = F.binary_cross_entropy_with_logits(logits, target.expand_as(logits), reduction="none")
    return bce.sum(dim=-1) * mask


def song_nll(logits: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """G eq. 4.2 for every song of the batch: its NLL summed over its predicted steps and
    divided by their number T (K, B)."""
    return step_nll(logits, target, mask).sum(dim=-1) / mask.sum(dim=-1)
