"""What the feedforward trainers (``ff-mnist``, ``lcw-mlp``) share: their data splits, and the
SGD iteration they and their benchmark (``benchmarks/ff_throughput.py``) run.

One iteration of a pack: forward the shared minibatch through the K members, the mean softmax
cross-entropy of each, one backward pass for all (the sum of the members' losses has each
member's own gradient), optionally M's orthogonality penalty (OPEN, M eq. 30), and the update
p := p − α·g of every member still training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ortho_core.data.datasets import load_dataset
from ortho_core.data.mnist import Preprocessing
from ortho_core.models.mlp import PackedMLP, member_cross_entropy
from ortho_core.optim import sgd_step
from ortho_core.penalty import ortho_penalty_grad


@dataclass
class Splits:
    """The (possibly subsampled) data of one run, on the training device."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor


def load_splits(dataset: str, data_dir: str | Path | None, train_size: int | None,
                test_size: int | None, generator: torch.Generator,
                device: torch.device, preprocessing: Preprocessing = "unit") -> Splits:
    """``dataset`` flattened and preprocessed (``unit``: values in [0, 1]; ``standardise``:
    M's per-pixel standardisation, MNIST only), the training and test sets subsampled to
    ``train_size`` and ``test_size`` images (None: all) with ``generator``.

    Each split is preprocessed whole, with its own statistics, before it is subsampled, so a
    subset keeps the statistics of its full split (as M's runs, which use the full splits).
    """
    x_train, y_train = load_dataset(dataset, "train", preprocessing=preprocessing,
                                    data_dir=data_dir)
    x_test, y_test = load_dataset(dataset, "test", preprocessing=preprocessing,
                                  data_dir=data_dir)
    if train_size is not None:
        keep = torch.randperm(len(y_train), generator=generator)[:train_size]
        x_train, y_train = x_train[keep], y_train[keep]
    if test_size is not None:
        keep = torch.randperm(len(y_test), generator=generator)[:test_size]
        x_test, y_test = x_test[keep], y_test[keep]
    return Splits(x_train.to(device), y_train.to(device), x_test.to(device), y_test.to(device))


def open_gradients(model: PackedMLP, loss_grads: Sequence[Tensor], penalty: Tensor,
                   members: Tensor | None = None, in_place: bool = False) -> list[Tensor]:
    """The gradients of CE + Σ_l λ‖W_l W_lᵀ − I‖²_F (M eq. 30) from those of CE alone.

    ``loss_grads`` match ``model.parameters()``; each weight matrix's gets 4λ(WWᵀ − I)W, or
    4λW(WᵀW − I) for a tall matrix (:mod:`ortho_core.penalty`), so non-square matrices are
    pushed to semi-orthogonality; ``penalty`` is λ per member (K,). ``members`` (indices into
    the pack) limits the term to those members, the OPEN ones of a pack that mixes variants:
    the others' gradients are CE's alone and cost no penalty product. ``in_place`` adds the
    terms into ``loss_grads`` themselves (the same sums, without a copy of every weight
    gradient).
    """
    weights = {id(w) for w in model.weight_params()}
    grads = []
    for p, g in zip(model.parameters(), loss_grads, strict=True):
        if id(p) not in weights:
            grads.append(g)
        elif members is None:
            grads.append(ortho_penalty_grad(p.detach(), penalty, out=g if in_place else g.clone()))
        else:
            term = ortho_penalty_grad(p.detach()[members], penalty[members])
            grads.append(g.index_add_(0, members, term) if in_place
                         else g.index_add(0, members, term))
    return grads


def train_step(model: PackedMLP, params: Sequence[Tensor], x: Tensor, y: Tensor, lr: Tensor,
               active: Tensor, penalty: Tensor | None = None, penalised: Tensor | None = None,
               keep_loss_grads: bool = True) -> tuple[Tensor, list[Tensor], Tensor]:
    """One SGD iteration of the pack on the minibatch (x, y).

    ``params`` is ``list(model.parameters())``; ``lr`` is α per member (K,); with ``penalty``
    (λ per member) the step follows CE + λΣ‖WWᵀ − I‖²_F (OPEN), for the members ``penalised``
    (indices; default every member: :func:`open_gradients`). A member whose loss is not
    finite is cleared from ``active`` (in place) before the step and not updated. Returns the
    losses (K,), the gradients of the cross-entropy alone (with ``keep_loss_grads``; else an
    empty list), and the logits (K, B, C), detached. Without ``keep_loss_grads`` the step
    consumes those gradients: the OPEN terms are added into them and the steps α·g written
    over them (:func:`~ortho_core.optim.sgd_step`'s ``overwrite_grads``), which saves a copy
    of every gradient per step.
    """
    logits = model(x)
    loss = member_cross_entropy(logits, y)
    # The gradient of Σ_k loss_k, seeded with ones (no separate sum in the graph).
    loss_grads = list(torch.autograd.grad(loss, params, torch.ones_like(loss)))
    grads = loss_grads if penalty is None else open_gradients(
        model, loss_grads, penalty, penalised, in_place=not keep_loss_grads)
    loss = loss.detach()
    active &= torch.isfinite(loss)
    sgd_step(params, grads, lr, active, overwrite_grads=not keep_loss_grads)
    return loss, loss_grads if keep_loss_grads else [], logits.detach()
