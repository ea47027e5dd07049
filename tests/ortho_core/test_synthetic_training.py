"""The synthetic-problem trainer (M §III-A): solving, packs equal to members alone, divergence,
the max-length protocol, reproducibility and configuration errors."""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import pytest
import torch

from ortho_core.config import from_dict
from ortho_core.errors import ConfigError, PretrainError
from ortho_core.experiments import get
from ortho_core.experiments.synthetic import PACK_FIELDS, Config, train
from ortho_core.experiments.synthetic_stage import Stage, stream_seed
from ortho_core.reporting import Outcome, Report

SMALL = {"hidden": 16, "val_size": 200, "eval_every": 50, "max_iters": 150, "protocol": "fixed"}
"""A small network and budget that keep every run well under a second."""


def run(configs: list[Config]) -> tuple[list, dict[int, list[Report]]]:
    reports: dict[int, list[Report]] = {}
    results = train(configs, lambda r: reports.setdefault(r.member, []).append(r))
    return results, reports


def make(**kw) -> Config:
    return Config(**{**SMALL, **kw})


def test_registered_and_every_field_documented():
    from ortho_core.config import field_docs
    assert get("synthetic").train is train
    docs = field_docs(Config)
    assert set(docs) == {f for f in Config.__dataclass_fields__}
    assert set(PACK_FIELDS) <= set(docs)
    for free in ("lr", "penalty", "variant", "seed", "clip", "spectral_radius", "init"):
        assert free not in PACK_FIELDS


def test_oinit_solves_temporal_order_at_10():
    cfg = make(variant="oinit", lr=0.1, hidden=32, max_iters=1000, seq_len=10)
    (result,), reports = run([cfg])
    assert result.outcome is Outcome.SOLVED
    assert result.summary["max_seq_len_solved"] == 10
    assert result.summary["iters_to_solve"] <= 300
    assert result.summary["val_error"] == 0.0
    assert result.summary["pretrain_steps"] > 10
    last = reports[0][-1]
    assert last.step == result.summary["iters_to_solve"]
    assert last.metrics["val_error"] == 0.0 and last.metrics["val_accuracy"] == 1.0
    assert last.metrics["seq_len"] == 10.0
    expected = {"train_loss", "val_loss", "val_error", "val_accuracy", "spectral_radius",
                "grad_norm_whh", "ortho_error", "grad_norm", "seq_len"}
    assert set(last.metrics) == expected
    assert all(math.isfinite(v) for v in last.metrics.values())


def test_one_iteration_is_clipped_sgd_plus_the_eq31_term():
    """W := W − α(min(1, τ/‖∇E‖)·∇E + 4λ(W_hhW_hhᵀ − I)W_hh) for W_hh (M eq. 31, G §3.4),
    checked against a plain autograd SRNN."""
    from ortho_core.data.synthetic import get_task
    from ortho_core.experiments.synthetic import initial_weights
    cfg = make(variant="open", lr=0.3, penalty=0.05, clip=0.01, dtype="float64", seq_len=8)
    task, cpu = get_task(cfg.task), torch.device("cpu")
    weights, _ = initial_weights([cfg], task, torch.float64, cpu)
    stage = Stage([cfg], task, 8, [w.clone() for w in weights], torch.float64, cpu)
    raw, y = stage.batches(1)
    stage.iteration(raw[0], y[0])

    w_xh, w_hh, b_h, w_hy, b_y = params = [w[0].clone().requires_grad_() for w in weights]
    x = task.encode(raw[0], torch.float64)
    h = torch.zeros(x.shape[0], 16, dtype=torch.float64)
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ w_xh.T + h @ w_hh.T + b_h)
    loss = torch.nn.functional.cross_entropy(h @ w_hy.T + b_y, y[0])
    grads = torch.autograd.grad(loss, params)
    factor = 0.01 / torch.sqrt(sum(g.square().sum() for g in grads))
    assert factor < 1
    with torch.no_grad():
        expected = [p - 0.3 * factor * g for p, g in zip(params, grads, strict=True)]
        eye = torch.eye(16, dtype=torch.float64)
        expected[1] -= 0.3 * 4 * 0.05 * (w_hh @ w_hh.T - eye) @ w_hh
    for got, want in zip(stage.params, expected, strict=True):
        torch.testing.assert_close(got.detach()[0], want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("form", ["squared", "unsquared"])
def test_logged_gradient_norms_include_the_open_term_before_clipping(form):
    """M's SRNN.py adds the penalty's gradient to gWhh before it logs the gradient norm (M
    Fig. 2's ‖∇W_hh‖ of SRNN+OPEN): an OPEN member's grad_norm and grad_norm_whh are those
    of the loss gradient plus the OPEN term, unclipped; a plain member's are the loss's."""
    from ortho_core.data.synthetic import get_task
    from ortho_core.experiments.synthetic import initial_weights
    common = dict(dtype="float64", seq_len=8, clip=0.01)
    pack = [make(variant="open", lr=0.3, penalty=0.5, penalty_form=form, seed=1, **common),
            make(variant="plain", lr=0.3, seed=2, **common)]
    task, cpu = get_task("temporal_order"), torch.device("cpu")
    weights, _ = initial_weights(pack, task, torch.float64, cpu)
    stage = Stage(pack, task, 8, [w.clone() for w in weights], torch.float64, cpu)
    raw, y = stage.batches(1)
    stage.iteration(raw[0], y[0])
    logged_norm, logged_whh = stage.sums[1], stage.sums[2]

    x = task.encode(raw[0], torch.float64)
    for k in range(2):
        w_xh, w_hh, b_h, w_hy, b_y = params = [w[k].clone().requires_grad_() for w in weights]
        h = torch.zeros(x.shape[0], 16, dtype=torch.float64)
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ w_xh.T + h @ w_hh.T + b_h)
        loss = torch.nn.functional.cross_entropy(h @ w_hy.T + b_y, y[0])
        grads = list(torch.autograd.grad(loss, params))
        loss_whh = grads[1].norm()
        if k == 0:
            residual = torch.linalg.matrix_norm(w_hh @ w_hh.T - torch.eye(16,
                                                                         dtype=torch.float64))
            term = 0.5 * (residual if form == "unsquared" else residual.square())
            grads[1] = grads[1] + torch.autograd.grad(term, w_hh)[0]
        expected = torch.sqrt(sum(g.square().sum() for g in grads))
        assert float(logged_norm[k]) == pytest.approx(float(expected), rel=1e-10)
        assert float(logged_whh[k]) == pytest.approx(float(grads[1].norm()), rel=1e-10)
        assert float(logged_norm[k]) > 0.01  # above τ: the logged norm is not the clipped one
        if k == 0:  # the OPEN term is no rounding error here: without it the test fails
            assert abs(float(logged_whh[k]) / float(loss_whh) - 1) > 0.1


def _assert_same_reports(a: list[Report], b: list[Report], rtol: float) -> None:
    assert [r.step for r in a] == [r.step for r in b]
    for ra, rb in zip(a, b, strict=True):
        assert ra.metrics.keys() == rb.metrics.keys()
        for key in ra.metrics:
            assert ra.metrics[key] == pytest.approx(rb.metrics[key], rel=rtol, abs=1e-12), key


def test_a_pack_member_gives_the_numbers_it_gives_alone():
    base = {"dtype": "float64", "task": "temporal_order", "seq_len": 20, "max_iters": 200}
    pack = [make(variant="plain", lr=0.1, seed=1, **base),
            make(variant="open", lr=0.05, penalty=0.01, seed=2, **base),
            make(variant="oinit", lr=0.2, seed=3, clip=0.5, **base)]
    results, reports = run(pack)
    for i, cfg in enumerate(pack):
        (alone,), alone_reports = run([cfg])
        _assert_same_reports(reports[i], alone_reports[0], rtol=1e-9)
        assert results[i].outcome == alone.outcome
        for key, value in alone.summary.items():
            if key != "wall_time":
                assert results[i].summary[key] == pytest.approx(value, rel=1e-9)


def test_members_leaving_a_stage_do_not_change_the_others():
    """Member 0 solves early and leaves the pack; member 1 must train on as if alone."""
    base = {"dtype": "float64", "seq_len": 10, "max_iters": 300}
    fast = make(variant="oinit", lr=0.1, seed=0, **base)
    slow = make(variant="plain", lr=0.001, seed=1, **base)
    _results, reports = run([fast, slow])
    assert len(reports[0]) < len(reports[1])
    _, alone = run([slow])
    _assert_same_reports(reports[1], alone[0], rtol=1e-9)


def test_without_settle_early_a_member_that_solves_trains_its_whole_budget():
    """The probe's mode: the same training, reported at every validation to the budget's
    end, the outcome taken from the last validation."""
    base = {"dtype": "float64", "seq_len": 10, "max_iters": 300}
    fast = make(variant="oinit", lr=0.1, seed=0, **base)
    (settled,), early = run([fast])
    (whole,), kept = run([replace(fast, settle_early=False)])
    assert settled.outcome is Outcome.SOLVED and settled.summary["iters_to_solve"] < 300
    assert [r.step for r in kept[0]][-1] == 300 and len(kept[0]) > len(early[0])
    _assert_same_reports(kept[0][:len(early[0])], early[0], rtol=0)
    solved_last = kept[0][-1].metrics["val_error"] == 0.0
    assert whole.outcome is (Outcome.SOLVED if solved_last else Outcome.UNSOLVED)
    assert whole.summary["total_iters"] == 300


def test_a_diverging_member_is_reported_and_does_not_disturb_the_pack():
    base = {"seq_len": 20, "max_iters": 200}
    wild = make(variant="plain", lr=1e37, **base)
    calm = make(variant="plain", lr=0.1, seed=4, **base)
    results, reports = run([wild, calm])
    assert results[0].outcome is Outcome.DIVERGED
    assert results[0].summary["diverged"] == 1.0
    assert results[0].summary["total_iters"] < 200
    assert results[1].outcome is not Outcome.DIVERGED
    assert results[1].summary["total_iters"] == 200
    _, alone = run([calm])
    _assert_same_reports(reports[1], alone[0], rtol=1e-5)


def test_a_diverging_member_stops_before_the_bad_update():
    (result,), reports = run([make(variant="open", lr=1.0, penalty=1e4, seq_len=20)])
    assert result.outcome is Outcome.DIVERGED
    assert len(reports[0]) == 1
    assert math.isfinite(reports[0][0].metrics["spectral_radius"])


def test_seeded_runs_repeat_exactly_and_seeds_matter():
    cfg = make(variant="open", lr=0.05, penalty=0.1, task="adding", seq_len=15)
    _, first = run([cfg])
    _, second = run([cfg])
    assert [r.metrics for r in first[0]] == [r.metrics for r in second[0]]
    _, other = run([make(variant="open", lr=0.05, penalty=0.1, task="adding", seq_len=15,
                         seed=9)])
    assert [r.metrics for r in first[0]] != [r.metrics for r in other[0]]
    _, other_data = run([make(variant="open", lr=0.05, penalty=0.1, task="adding",
                              seq_len=15, data_seed=9)])
    assert [r.metrics for r in first[0]] != [r.metrics for r in other_data[0]]


def test_max_length_advances_while_solved_and_stops_at_the_first_failure():
    cfg = make(variant="oinit", lr=0.1, hidden=32, protocol="max_length", seq_len=10,
               seq_len_step=10, max_iters=100, max_seq_len=500)
    (result,), reports = run([cfg])
    stages = result.artifacts["stages"]
    lengths = [s["seq_len"] for s in stages]
    assert len(stages) >= 2
    assert lengths == list(range(10, 10 * len(stages) + 1, 10))
    assert all(s["outcome"] == "solved" for s in stages[:-1])
    assert stages[-1]["outcome"] != "solved"
    solved = [s for s in stages if s["outcome"] == "solved"]
    assert result.summary["max_seq_len_solved"] == (solved[-1]["seq_len"] if solved else 0)
    assert result.summary["seq_lens_tried"] == len(stages)
    # the last evaluation's error is that of the last length tried, which the summary names
    assert result.summary["last_seq_len"] == stages[-1]["seq_len"]
    assert result.summary["val_error"] == stages[-1]["val_error"]
    assert result.summary["total_iters"] == sum(s["iters"] for s in stages)
    steps = [r.step for r in reports[0]]
    assert steps == sorted(steps) and steps[-1] == result.summary["total_iters"]
    assert [r.metrics["seq_len"] for r in reports[0]] == sorted(
        r.metrics["seq_len"] for r in reports[0])
    assert result.outcome is (Outcome.SOLVED if solved else Outcome.UNSOLVED)


def test_max_length_stops_at_max_seq_len():
    cfg = make(variant="oinit", lr=0.1, hidden=32, protocol="max_length", seq_len=10,
               seq_len_step=5, max_iters=500, max_seq_len=15)
    (result,), _ = run([cfg])
    assert [s["seq_len"] for s in result.artifacts["stages"]] == [10, 15]
    assert result.summary["max_seq_len_solved"] == 15
    assert result.outcome is Outcome.SOLVED


def test_fresh_network_per_length_unless_warm_start():
    """With warm_start=False every length starts from the same initial weights, so the first
    report of a length depends only on that length's data; warm starts differ."""
    common = {"variant": "plain", "lr": 0.1, "hidden": 32, "protocol": "max_length",
              "seq_len": 10, "max_iters": 100, "max_seq_len": 20, "seq_len_step": 10,
              "dtype": "float64"}
    (fresh,), fresh_reports = run([make(**common)])
    (_warm,), warm_reports = run([make(**common, warm_start=True)])
    assert fresh.artifacts["stages"][0]["outcome"] == "solved"
    first_20 = next(r for r in fresh_reports[0] if r.metrics["seq_len"] == 20)
    (_single,), single_reports = run([make(**{**common, "seq_len": 20})])
    assert first_20.metrics == single_reports[0][0].metrics
    warm_20 = next(r for r in warm_reports[0] if r.metrics["seq_len"] == 20)
    assert warm_20.metrics != first_20.metrics


@pytest.fixture
def models(monkeypatch) -> list:
    """Every PackedSRNN the trainer builds, to read the recurrent matrix it really holds."""
    from ortho_core.experiments import synthetic_stage
    built = []

    class Recorded(synthetic_stage.PackedSRNN):
        def __init__(self, *weights):
            super().__init__(*weights)
            built.append(self)

    monkeypatch.setattr(synthetic_stage, "PackedSRNN", Recorded)
    return built


def numpy_radius(w: torch.Tensor) -> float:
    """ρ(W) = max |λ| by numpy's eigvals, independent of ``ortho_core.metrics``."""
    return float(np.abs(np.linalg.eigvals(w.detach().double().numpy())).max())


def test_spectral_radius_is_the_rescaled_one_at_the_start(models):
    """G Alg. 3.1: the W_hh the model trains from has ρ = 1.2 (numpy's eigenvalues of the
    matrix it holds), and the reported ``spectral_radius`` is that matrix's."""
    cfg = make(variant="plain", lr=1e-9, init="gaussian", init_std=0.1, spectral_radius=1.2,
               max_iters=1, eval_every=1, dtype="float64")
    _, reports = run([cfg])
    (model,) = models
    held = numpy_radius(model.w_hh[0])
    assert held == pytest.approx(1.2, rel=1e-6)
    assert reports[0][0].metrics["spectral_radius"] == pytest.approx(held, rel=1e-12)


def test_oinit_makes_w_hh_orthogonal_before_training():
    cfg = make(variant="oinit", lr=1e-12, max_iters=1, eval_every=1, hidden=24)
    _, reports = run([cfg])
    assert reports[0][0].metrics["ortho_error"] < 1e-5
    assert reports[0][0].metrics["spectral_radius"] == pytest.approx(1.0, abs=1e-3)


def test_oinit_pretrains_the_matrices_it_is_told_to():
    from ortho_core.data.synthetic import get_task
    from ortho_core.experiments.synthetic import initial_weights
    from ortho_core.models.srnn import SRNNInit, init_srnn
    from ortho_core.penalty import ortho_error
    task, cpu = get_task("temporal_order"), torch.device("cpu")
    pack = [make(variant="oinit", seed=1), make(variant="oinit", seed=2, pretrain_weights="all"),
            make(variant="plain", seed=3)]
    weights, steps = initial_weights(pack, task, torch.float64, cpu)
    drawn = init_srnn(6, 16, 4, [SRNNInit(c.seed) for c in pack], dtype=torch.float64)
    w_xh, w_hh, w_hy = weights[0], weights[1], weights[3]
    assert (ortho_error(w_hh[:2]) < 1e-6).all() and steps[0] > 0 and steps[1] > 0
    assert steps[2] == 0 and torch.equal(w_hh[2], drawn.w_hh.detach()[2])
    assert torch.equal(w_xh[0], drawn.w_xh.detach()[0])
    assert torch.equal(w_hy[0], drawn.w_hy.detach()[0])
    assert ortho_error(w_xh[1]) < 1e-6 and ortho_error(w_hy[1]) < 1e-6
    assert ortho_error(w_xh[0]) > 1e-2


def test_pretraining_that_cannot_converge_raises():
    with pytest.raises(PretrainError, match="pretrain_tol"):
        train([make(variant="oinit", pretrain_max_steps=2)], lambda r: None)


@pytest.mark.parametrize("task", ["temporal_order", "temporal_order_3bit", "adding",
                                  "permutation"])
def test_every_task_reports_the_losses_and_errors_of_a_plain_recomputation(task):
    """At a rate too small to move the weights, every report must equal what a plain loop
    computes from the member's initial weights on the documented data streams: the mean
    training loss over the batches since the last report (stream 0) and the loss and error
    rate on the validation set (stream 1), with the task's own loss and error rule (softmax
    CE and argmax; for adding, squared error summed over outputs and (y − t)² > 0.04)."""
    from ortho_core.data.synthetic import get_task
    from ortho_core.models.srnn import SRNNInit, init_srnn
    cfg = make(task=task, seq_len=12, max_iters=20, eval_every=10, val_size=50,
               lr=1e-300, dtype="float64", seed=3, data_seed=5)
    (result,), reports = run([cfg])
    spec = get_task(task)
    net = init_srnn(spec.n_in, cfg.hidden, spec.n_out, [SRNNInit(cfg.seed)], torch.float64)
    w_xh, w_hh, b_h, w_hy, b_y = (p.detach()[0] for p in net.parameters())

    def outputs(raw: torch.Tensor) -> torch.Tensor:
        x = spec.encode(raw, torch.float64)
        h = torch.zeros(x.shape[0], cfg.hidden, dtype=torch.float64)
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ w_xh.T + h @ w_hh.T + b_h)
        return h @ w_hy.T + b_y

    def loss_and_wrong(raw: torch.Tensor, target: torch.Tensor) -> tuple[float, torch.Tensor]:
        y = outputs(raw)
        if task == "adding":
            squared = (y - target.double()).square().sum(-1)
            return float(squared.mean()), squared > 0.04
        ce = torch.nn.functional.cross_entropy(y, target)
        return float(ce), y.argmax(-1) != target

    train_gen = torch.Generator().manual_seed(stream_seed(cfg.data_seed, 12, 0))
    val_loss, wrong = loss_and_wrong(*spec.sample(cfg.val_size, 12, torch.Generator()
                                                  .manual_seed(stream_seed(5, 12, 1))))
    assert [r.step for r in reports[0]] == [10, 20]
    for report in reports[0]:
        train_loss = sum(loss_and_wrong(*spec.sample(cfg.batch_size, 12, train_gen))[0]
                         for _ in range(cfg.eval_every)) / cfg.eval_every
        m = report.metrics
        assert m["train_loss"] == pytest.approx(train_loss, rel=1e-9)
        assert m["val_loss"] == pytest.approx(val_loss, rel=1e-9)
        assert m["val_error"] == float(wrong.double().mean())
        assert m["val_accuracy"] == 1.0 - m["val_error"]
    assert 0.0 < result.summary["val_error"] == float(wrong.double().mean())
    assert result.outcome is Outcome.UNSOLVED


def test_validation_in_chunks_of_the_states_bound_gives_the_one_chunk_numbers(monkeypatch):
    """The validation chunk holds b sequences with K·b·H states (no earlier states are kept
    without gradients), so where those outnumber the inputs' T·I numbers per sequence,
    EVAL_ELEMENTS = 7·K·H gives chunks of 7 whatever T, and the chunked numbers are those of
    one chunk: wrong counts exactly, losses to rounding."""
    from ortho_core.data.synthetic import get_task
    from ortho_core.experiments import synthetic_stage
    from ortho_core.experiments.synthetic import initial_weights
    task = get_task("temporal_order")
    configs = [make(seq_len=40, hidden=100, val_size=300, dtype="float64", seed=s)
               for s in range(3)]
    assert 40 * task.n_in < len(configs) * 100
    weights, _ = initial_weights(configs, task, torch.float64, torch.device("cpu"))

    def evaluate() -> tuple[torch.Tensor, int]:
        stage = Stage(configs, task, 40, weights, torch.float64, torch.device("cpu"))
        calls = []
        forward = stage.model.forward
        monkeypatch.setattr(stage.model, "forward", lambda x: calls.append(len(x)) or forward(x))
        return stage.evaluate(), calls

    whole, whole_calls = evaluate()
    monkeypatch.setattr(synthetic_stage, "EVAL_ELEMENTS", 7 * len(configs) * configs[0].hidden)
    chunked, chunk_calls = evaluate()
    assert whole_calls == [300]
    assert chunk_calls == [7] * 42 + [6]
    wrong = len(synthetic_stage.EVAL_KEYS) + 1
    assert chunked[:, wrong].tolist() == whole[:, wrong].tolist()
    assert 0 < whole[0, wrong] < 300
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=0)


def test_stream_seeds_differ_by_stream_length_and_data_seed():
    seeds = {stream_seed(d, t, s) for d in (0, 1) for t in (10, 20) for s in (0, 1)}
    assert len(seeds) == 8
    # the same in every process and on every machine (SeedSequence's own stability),
    # which resumed and retried trials on other nodes rely on
    assert stream_seed(3, 40, 1) == 7779079512376703039


def test_spectral_radius_metric_matches_numpy_on_the_weights_evaluated(models):
    """ρ(W_hh) reported at every evaluation, float32 training, members packed: numpy's
    eigenvalues of each member's W_hh as the model holds it after its last step."""
    pack = [make(lr=1e-12, max_iters=1, eval_every=1, seed=5),
            make(lr=0.5, max_iters=1, eval_every=1, seed=6, init="gaussian", init_std=0.3)]
    _, reports = run(pack)
    (model,) = models
    for member in (0, 1):
        assert reports[member][-1].metrics["spectral_radius"] == pytest.approx(
            numpy_radius(model.w_hh[member]), rel=1e-6)
    assert reports[0][-1].metrics["spectral_radius"] != pytest.approx(
        reports[1][-1].metrics["spectral_radius"], rel=1e-3)


class _HeldRadius(Future):
    """ρ(W_hh) that is never done before it is asked for (as if its thread were slow)."""

    def __init__(self, value):
        super().__init__()
        self._value = value

    def done(self) -> bool:
        return False

    def result(self, timeout=None):
        return self._value


def _emit(monkeypatch, pack: list[Config], later: bool, sent: list, begun: list,
          fail_at: int | None = None, radius: str = "thread",
          at_iteration: list | None = None) -> None:
    """Train ``pack``, appending to ``sent`` every report in the order the trainer sends it
    (NaN as None), to ``begun`` how many evaluations had begun at each and to
    ``at_iteration`` how many iterations had run, with ρ(W_hh) taken off the evaluation's
    path or not; with ``fail_at``, that iteration raises. Off the path, ρ comes from its
    thread (``radius="thread"``), is there at once (``"ready"``) or only when asked for
    (``"held"``)."""
    from ortho_core.experiments import synthetic, synthetic_stage
    monkeypatch.setattr(synthetic, "defers_radius", lambda device: later)
    radius_later = synthetic_stage.Stage.radius_later

    def controlled(self):
        value = radius_later(self).result()
        if radius == "held":
            return _HeldRadius(value)
        done = Future()
        done.set_result(value)
        return done

    if radius != "thread":
        monkeypatch.setattr(synthetic_stage.Stage, "radius_later", controlled)
    evaluations, iterations = [0], [0]
    evaluate, iteration = synthetic_stage.Stage.evaluate, synthetic_stage.Stage.iteration

    def counted(self, *args, **kw):
        evaluations[0] += 1
        return evaluate(self, *args, **kw)

    def failing(self, *args):
        iterations[0] += 1
        if iterations[0] == fail_at:
            raise RuntimeError("a failing iteration")
        return iteration(self, *args)

    monkeypatch.setattr(synthetic_stage.Stage, "evaluate", counted)
    monkeypatch.setattr(synthetic_stage.Stage, "iteration", failing)

    def reporter(r: Report) -> None:
        sent.append((r.member, r.step, {k: None if math.isnan(v) else v
                                        for k, v in r.metrics.items()}))
        begun.append(evaluations[0])
        if at_iteration is not None:
            at_iteration.append(iterations[0])

    train(pack, reporter)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


MIXED_BASE = {"protocol": "max_length", "seq_len": 10, "seq_len_step": 10, "max_seq_len": 30,
              "max_iters": 150}


def _mixed_pack(device: str = "cpu") -> list[Config]:
    """Members that solve lengths, fail and diverge."""
    return [make(variant="oinit", lr=0.1, seed=0, device=device, **MIXED_BASE),
            make(variant="plain", lr=0.001, seed=1, device=device, **MIXED_BASE),
            make(variant="plain", lr=1e37, seed=2, device=device, **MIXED_BASE)]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_radius_off_the_evaluation_path_reports_the_same_in_the_same_order(monkeypatch, device):
    """With ρ(W_hh) computed on a host thread (as on CUDA), an evaluation's reports go out
    after the evaluation and before the next one ends, and they are the reports, in the
    order, of ρ computed in the evaluation: members that solve lengths, fail and diverge."""
    pack = _mixed_pack(device)
    now, later, begun = [], [], []
    _emit(monkeypatch, pack, False, now, [])
    _emit(monkeypatch, pack, True, later, begun)
    assert later == now
    counts = [sum(1 for member, _, _ in now if member == i) for i in range(3)]
    assert counts[2] < counts[1]
    assert len({m["seq_len"] for _, _, m in now}) >= 2
    assert set(begun[:3]) <= {1, 2}


def test_reports_go_out_once_their_radius_is_there_at_the_latest_at_the_next_evaluation(
        monkeypatch):
    """A ρ(W_hh) there at once: its evaluation's reports go out after the next iteration
    (an early-stopping scheduler sees them then, not a window later); one that is never
    done before it is asked for: at the next evaluation. The same reports either way."""
    pack, every = _mixed_pack(), SMALL["eval_every"]
    now, ready, held, begun_ready, begun_held, iters_ready, iters_held = ([] for _ in range(7))
    _emit(monkeypatch, pack, False, now, [])
    _emit(monkeypatch, pack, True, ready, begun_ready, radius="ready", at_iteration=iters_ready)
    _emit(monkeypatch, pack, True, held, begun_held, radius="held", at_iteration=iters_held)
    assert ready == now and held == now
    assert begun_ready[:3] == [1, 1, 1] and iters_ready[:3] == [every + 1] * 3
    assert begun_held[:3] == [2, 2, 2] and iters_held[:3] == [2 * every] * 3


def test_reports_held_for_their_radius_are_sent_when_training_fails(monkeypatch):
    """An iteration that raises after the first evaluation: that evaluation's reports, held
    for ρ(W_hh), still go out, with it."""
    pack = [make(lr=0.1, seed=s) for s in (0, 1)]
    whole, sent = [], []
    _emit(monkeypatch, pack, False, whole, [])
    with pytest.raises(RuntimeError, match="a failing iteration"):
        _emit(monkeypatch, pack, True, sent, [], fail_at=SMALL["eval_every"] + 2)
    assert sent == whole[:2]
    assert all(m["spectral_radius"] > 0 for _, _, m in sent)


@pytest.mark.parametrize(("values", "field"), [
    ({"task": "parity"}, "task"),
    ({"colour": "red"}, "colour"),
    ({"lr": "0"}, "lr"),
    ({"lr": "-0.1"}, "lr"),
    ({"lr": "fast"}, "lr"),
    ({"seq_len": "1"}, "seq_len"),
    ({"task": "temporal_order_3bit", "seq_len": "3"}, "seq_len"),
    ({"spectral_radius": "0"}, "spectral_radius"),
    ({"spectral_radius": "-1.2"}, "spectral_radius"),
    ({"penalty": "0.1"}, "penalty"),
    ({"variant": "open"}, "penalty"),
    ({"variant": "oinit", "penalty": "0.1"}, "penalty"),
    ({"variant": "lstm"}, "variant"),
    ({"hidden": "0"}, "hidden"),
    ({"batch_size": "0"}, "batch_size"),
    ({"max_iters": "0"}, "max_iters"),
    ({"eval_every": "0"}, "eval_every"),
    ({"val_size": "0"}, "val_size"),
    ({"seq_len": "50", "max_seq_len": "40"}, "max_seq_len"),
    ({"protocol": "forever"}, "protocol"),
    ({"init": "orthogonal"}, "init"),
    ({"init_std": "0"}, "init_std"),
    ({"pretrain_lr": "0"}, "pretrain_lr"),
    ({"pretrain_tol": "-1"}, "pretrain_tol"),
    ({"pretrain_weights": "some"}, "pretrain_weights"),
    ({"clip": "-1"}, "clip"),
    ({"error_threshold": "0"}, "error_threshold"),
    ({"dtype": "float16"}, "dtype"),
    ({"device": "tpu"}, "device"),
    ({"seed": "-1"}, "seed"),
    ({"warm_start": "maybe"}, "warm_start"),
    ({"settle_early": "maybe"}, "settle_early"),
])
def test_bad_configuration_names_the_field(values, field):
    with pytest.raises(ConfigError) as err:
        from_dict(Config, values)
    assert err.value.field == field


def test_good_strings_convert():
    cfg = from_dict(Config, {"variant": "open", "penalty": "0.1", "clip": "none",
                             "spectral_radius": "1.1", "warm_start": "true",
                             "protocol": "fixed", "seq_len": "2000"})
    assert cfg.penalty == 0.1 and cfg.clip is None and cfg.spectral_radius == 1.1
    assert cfg.warm_start is True


def test_a_pack_must_share_its_shape():
    with pytest.raises(ConfigError) as err:
        train([make(seq_len=10), make(seq_len=20)], lambda r: None)
    assert err.value.field == "seq_len"
