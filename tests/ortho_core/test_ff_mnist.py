"""The ff-mnist trainer (M §III-C): OPEN's gradients for non-square matrices against autograd,
OINIT's (semi-)orthogonal start, packs against members trained alone, the paper's qualitative
result on a short run (plain FF stays at the majority-class baseline, FF+OPEN leaves it), the
``preprocessing`` option (threaded to the data, statistics of the full split, trial keys of
default configurations unchanged), and bad inputs."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core.config import from_dict, to_dict
from ortho_core.data.mnist import load_mnist
from ortho_core.errors import ConfigError, DataError
from ortho_core.experiments import ff_mnist
from ortho_core.experiments.feedforward import load_splits, open_gradients, train_step
from ortho_core.models.mlp import PackedMLP, member_cross_entropy
from ortho_core.penalty import ortho_error
from ortho_core.reporting import Outcome, Report
from sweeps.cli import main
from sweeps.spec import load_spec, resolve, trial_key

pytestmark = pytest.mark.usefixtures("shared_data")


def test_open_gradients_equal_autograd_for_wide_tall_and_square_matrices():
    # Layers (9 × 6) tall, (4 × 9) wide, (4 × 4) square, (3 × 4) wide.
    torch.manual_seed(0)
    model = PackedMLP([6, 9, 4, 4, 3], 2, "tanh", dtype=torch.float64)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.4)
    x = torch.randn(10, 6, dtype=torch.float64)
    y = torch.randint(0, 3, (10,))
    penalty = torch.tensor([0.3, 2.0], dtype=torch.float64)
    params = list(model.parameters())
    ce = member_cross_entropy(model(x), y)
    ours = open_gradients(model, torch.autograd.grad(ce.sum(), params), penalty)
    objective = member_cross_entropy(model(x), y) + penalty * sum(
        ortho_error(w) for w in model.weight_params())
    expected = torch.autograd.grad(objective.sum(), params)
    for g, e in zip(ours, expected, strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("members", [None, [1]], ids=["all-open", "mixed"])
def test_a_step_that_consumes_the_gradients_updates_the_same(members):
    """``keep_loss_grads=False`` adds the OPEN terms into CE's gradients in place and writes
    the steps over them: the same weights, bit for bit, as the step that keeps CE's gradients
    (which equal autograd's of CE alone), and the penalty reaches the penalised members only."""
    configs = [ff_mnist.Config(layers=2, hidden=16, seed=s) for s in range(3)]
    models = [ff_mnist.build_model(configs, torch.device("cpu")) for _ in range(3)]
    x, y = torch.rand(20, 784), torch.randint(10, (20,))
    penalty = torch.tensor([0.5, 1.0, 2.0])
    penalised = None if members is None else torch.tensor(members)
    ce_grads = torch.autograd.grad(member_cross_entropy(models[0](x), y).sum(),
                                   list(models[0].parameters()))
    returned = []
    for model, keep, lam in zip(models, (True, False, False), (penalty, penalty, None),
                                strict=True):
        params = list(model.parameters())
        _, grads, _ = train_step(model, params, x, y, torch.full((3,), 0.1),
                                 torch.ones(3, dtype=torch.bool), lam, penalised,
                                 keep_loss_grads=keep)
        returned.append(grads)
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(a, b)
    for kept, ce in zip(returned[0], ce_grads, strict=True):
        torch.testing.assert_close(kept, ce)
    assert returned[1] == []
    first_open, first_plain = models[1].weight_params()[0], models[2].weight_params()[0]
    changed = (first_open - first_plain).abs().amax(dim=(1, 2)) > 0
    assert changed.tolist() == ([True] * 3 if members is None else [False, True, False])


def test_oinit_makes_every_matrix_semi_orthogonal():
    configs = [ff_mnist.Config(variant="oinit", layers=2, hidden=32, pretrain_lr=lr)
               for lr in (0.1, 0.05)]
    model = ff_mnist.build_model(configs, torch.device("cpu"))
    steps = ff_mnist.pretrain(model, configs)
    assert bool((steps > 0).all()) and int(steps[1]) > int(steps[0])
    for w in model.weight_params():
        w = w.detach()
        assert float(ortho_error(w.double()).max()) < 1e-5
        m, n = w.shape[1:]
        gram = w @ w.transpose(1, 2) if m <= n else w.transpose(1, 2) @ w
        torch.testing.assert_close(gram, torch.eye(min(m, n)).expand_as(gram), atol=1e-3, rtol=0)


def small(**overrides) -> ff_mnist.Config:
    base = dict(layers=3, hidden=16, epochs=2, train_size=200, test_size=300)
    return ff_mnist.Config(**{**base, **overrides})


def collect(configs):
    reports: list[Report] = []
    results = ff_mnist.train(configs, reports.append)
    return reports, results


@pytest.mark.parametrize("variants", [("open", "open"), ("oinit", "oinit"),
                                      ("plain", "open", "oinit")])
def test_pack_members_equal_training_alone(variants):
    """Each member of a pack, of one variant or mixed (FF, FF+OPEN and FF+OINIT together),
    gives what it gives alone: the penalty reaches the OPEN members only, pre-training the
    OINIT ones only."""
    settings = [dict(lr=0.1, penalty=0.5, init_std=0.05, seed=1),
                dict(lr=0.05, penalty=0.1, init_std=0.01, seed=2, pretrain_lr=0.05),
                dict(lr=0.1, penalty=0.1, init_std=0.05, seed=3)]
    configs = [small(variant=v, **(kw if v == "open" else {**kw, "penalty": 0.0}))
               for v, kw in zip(variants, settings, strict=False)]
    pack_reports, pack_results = collect(configs)
    assert all(r.outcome is not Outcome.DIVERGED for r in pack_results)
    for member, cfg in enumerate(configs):
        alone_reports, (alone,) = collect([cfg])
        mine = [r for r in pack_reports if r.member == member]
        assert [r.step for r in mine] == [r.step for r in alone_reports]
        for a, b in zip(mine, alone_reports, strict=True):
            assert a.metrics.keys() == b.metrics.keys()
            for key in a.metrics:
                assert a.metrics[key] == pytest.approx(b.metrics[key], rel=1e-4, abs=1e-6), key
        assert pack_results[member].summary.keys() == alone.summary.keys()
        for key in ("test_accuracy", "best_test_accuracy", "train_loss", "pretrain_steps"):
            if key in alone.summary:
                assert pack_results[member].summary[key] == pytest.approx(alone.summary[key],
                                                                          rel=1e-4)


def test_a_diverging_member_stops_and_leaves_the_others_alone():
    healthy = small(variant="open", lr=0.05, penalty=0.1, init_std=0.01, seed=2)
    exploding = small(variant="open", lr=0.1, penalty=0.5, init_std=0.3, seed=1)
    reports, (bad, good) = collect([exploding, healthy])
    _, (alone,) = collect([healthy])
    assert bad.outcome is Outcome.DIVERGED and bad.summary["epochs"] == 0
    assert math.isnan(bad.summary["train_loss"])  # no epoch completed: no loss, not 0
    assert all(r.member == 1 for r in reports)
    assert good.outcome is alone.outcome
    for key in ("test_accuracy", "train_loss"):
        assert good.summary[key] == pytest.approx(alone.summary[key], rel=1e-4)


def test_plain_stays_at_the_baseline_and_open_leaves_it():
    """M Table III in miniature: 10 layers of 100, σ = 0.001, 200 iterations of batch 20."""
    common = dict(epochs=2, train_size=2000, test_size=1000, lr=0.1)
    reports, (plain,) = collect([ff_mnist.Config(variant="plain", **common)])
    _, (open_,) = collect([ff_mnist.Config(variant="open", penalty=1.0, **common)])
    baseline = plain.summary["baseline_accuracy"]
    assert 0.09 < baseline < 0.14
    assert plain.outcome is Outcome.UNSOLVED
    assert plain.summary["best_test_accuracy"] <= baseline
    # The vanished gradient: the input layer's gradient is many orders below the output's.
    last = reports[-1].metrics
    assert last["grad_norm_layer1"] < 1e-6 * last["grad_norm_layer11"]
    assert open_.outcome is Outcome.SOLVED
    assert open_.summary["best_test_accuracy"] > 0.6
    assert open_.summary["epochs"] == 2


def test_summary_and_metrics_names():
    reports, (result,) = collect([small(epochs=1)])
    assert set(result.summary) == {"test_accuracy", "best_test_accuracy", "best_epoch",
                                   "best_samples", "train_loss", "epochs",
                                   "baseline_accuracy", "wall_time"}
    assert {"epoch", "samples", "train_loss", "test_accuracy", "ortho_error", "grad_norm",
            "grad_norm_layer1", "grad_norm_layer4"} <= set(reports[0].metrics)
    assert reports[0].step == 200 // 20
    # evaluated once an epoch: the summary's loss is the curve's last point to the bit, so
    # the tracker writes no second point at that step
    assert reports[-1].metrics["train_loss"] == result.summary["train_loss"]


def test_eval_every_evaluates_at_m_s_checkpoints_across_epochs():
    """M's code measures the test accuracy each time the samples trained reach a multiple of
    ``--chk``, across epoch boundaries, and reports the best of those checkpoints. Evaluating
    does not change the training: the checkpoints at the ends of epochs equal the per-epoch
    evaluations, and each window's train_loss is the mean over its own minibatches."""
    common = dict(lr=0.1, init_std=0.1, shuffle=False, epochs=3)
    per_epoch, (alone,) = collect([small(**common)])
    checked, (result,) = collect([small(eval_every=120, **common)])
    assert [r.metrics["samples"] for r in checked] == [120, 240, 360, 480, 600]
    assert [r.step for r in checked] == [6, 12, 18, 24, 30]
    assert [r.metrics["epoch"] for r in checked] == pytest.approx([0.6, 1.2, 1.8, 2.4, 3.0])
    # 600 samples = 3 epochs of 200: the last checkpoint is the end of the run.
    end, ended = checked[-1].metrics, per_epoch[-1].metrics
    for key in ("test_accuracy", "ortho_error", "grad_norm", "grad_norm_layer1"):
        assert end[key] == pytest.approx(ended[key], rel=1e-6), key
    assert result.summary["train_loss"] == pytest.approx(alone.summary["train_loss"], rel=1e-6)
    # Five windows of 6 minibatches and three epochs of 10 cover the same 30 minibatches.
    run_mean = sum(6 * r.metrics["train_loss"] for r in checked) / 30
    epoch_means = sum(r.metrics["train_loss"] for r in per_epoch) / 3
    assert run_mean == pytest.approx(epoch_means, rel=1e-6)
    accuracies = [r.metrics["test_accuracy"] for r in checked]
    best = max(range(5), key=lambda i: (accuracies[i], -i))
    assert result.summary["best_test_accuracy"] == accuracies[best]
    assert result.summary["best_samples"] == checked[best].metrics["samples"]
    assert result.summary["best_epoch"] == pytest.approx(checked[best].metrics["epoch"])
    assert result.summary["test_accuracy"] == accuracies[-1]


def test_without_shuffle_minibatches_follow_the_training_set_order(monkeypatch):
    """M's code slices minibatch i as X_train[i*bs:(i+1)*bs], every epoch alike; the
    default draws a fresh order every epoch."""
    seen = []

    def spy(model, params, x, y, *args, **kwargs):
        seen.append(x.clone())
        return train_step(model, params, x, y, *args, **kwargs)

    monkeypatch.setattr(ff_mnist, "train_step", spy)
    data = load_splits("mnist", None, 200, 300, torch.Generator().manual_seed(0),
                       torch.device("cpu"))
    collect([small(shuffle=False)])
    assert torch.equal(torch.cat(seen), torch.cat([data.x_train, data.x_train]))
    seen.clear()
    collect([small()])
    first, second = torch.cat(seen[:10]), torch.cat(seen[10:])
    assert not torch.equal(first, data.x_train) and not torch.equal(first, second)
    torch.testing.assert_close(first.sum(dim=0), data.x_train.sum(dim=0))  # the same images


def test_the_new_options_keep_default_trial_keys_and_pack_together():
    assert ff_mnist.Config().eval_every is None and ff_mnist.Config().shuffle is True
    assert {"eval_every", "shuffle"} <= set(ff_mnist.ADDED_FIELDS) & set(ff_mnist.PACK_FIELDS)
    params = {"variant": "open", "lr": 0.01, "penalty": 1.0, "epochs": 10, "seed": 0}
    key = "f4a07395c12af691"  # before the fields existed
    assert trial_key("ff-mnist", {**params, "eval_every": None, "shuffle": True}) == key
    assert trial_key("ff-mnist", {**params, "eval_every": 10_000}) != key
    assert trial_key("ff-mnist", {**params, "shuffle": False}) != key
    # The probe reports after every epoch of its short run whatever the checkpoints.
    assert ff_mnist.probe_config(ff_mnist.Config(eval_every=10_000)).eval_every is None


def test_preprocessing_round_trips_and_keeps_default_trial_keys():
    cfg = from_dict(ff_mnist.Config, {"preprocessing": "standardise"})
    assert cfg.preprocessing == "standardise" and to_dict(cfg)["preprocessing"] == "standardise"
    assert from_dict(ff_mnist.Config, to_dict(cfg)) == cfg
    assert ff_mnist.Config().preprocessing == "unit"
    assert "preprocessing" in ff_mnist.ADDED_FIELDS and "preprocessing" in ff_mnist.PACK_FIELDS
    # The key this configuration had before the field existed (computed at commit HEAD).
    params = {"variant": "open", "lr": 0.01, "penalty": 1.0, "epochs": 10, "seed": 0}
    assert trial_key("ff-mnist", params) == "f4a07395c12af691"
    assert trial_key("ff-mnist", {**params, "preprocessing": "unit"}) == "f4a07395c12af691"
    assert trial_key("ff-mnist", {**params, "preprocessing": "standardise"}) != \
        "f4a07395c12af691"


def test_only_the_paper_profile_follows_m_s_code():
    """paper: M's code's checkpoints every 10,000 samples, minibatches in order and its 11
    hidden layers; smoke and cpu keep the defaults their tracked runs had."""
    spec = load_spec("ff-mnist")
    for profile, expected in (("smoke", {(None, True, 3)}), ("cpu", {(None, True, 10)}),
                              ("paper", {(10_000, False, 11)})):
        configs = [from_dict(ff_mnist.Config, c.params) for c in resolve(spec, profile).cells()]
        assert {(c.eval_every, c.shuffle, c.layers) for c in configs} == expected, profile


def test_only_the_paper_profile_standardises():
    spec = load_spec("ff-mnist")
    for profile, expected in (("smoke", {"unit"}), ("cpu", {"unit"}),
                              ("paper", {"standardise"})):
        cells = resolve(spec, profile).cells()
        configs = [from_dict(ff_mnist.Config, c.params) for c in cells]
        assert {c.preprocessing for c in configs} == expected, profile


def test_load_splits_standardises_each_full_split_before_subsampling():
    device = torch.device("cpu")
    data = load_splits("mnist", None, 200, 300, torch.Generator().manual_seed(4), device,
                       "standardise")
    generator = torch.Generator().manual_seed(4)
    keep_train = torch.randperm(60_000, generator=generator)[:200]
    keep_test = torch.randperm(10_000, generator=generator)[:300]
    train, _ = load_mnist("train", preprocessing="standardise")
    test, _ = load_mnist("test", preprocessing="standardise")
    assert torch.equal(data.x_train, train[keep_train])
    assert torch.equal(data.x_test, test[keep_test])
    assert float(data.x_train.min()) < -0.1  # centred, not in [0, 1]


def test_train_feeds_the_configured_preprocessing(monkeypatch):
    seen = []

    def spy(*args):
        seen.append(args[-1])
        return load_splits(*args)

    monkeypatch.setattr(ff_mnist, "load_splits", spy)
    unit, _ = collect([small(epochs=1, lr=0.1, init_std=0.1)])
    standardised, _ = collect([small(epochs=1, lr=0.1, init_std=0.1,
                                     preprocessing="standardise")])
    assert seen == ["unit", "standardise"]
    # Standardised pixels are larger than [0, 1] ones, and so is the input layer's gradient.
    first = unit[0].metrics["grad_norm_layer1"]
    assert standardised[0].metrics["grad_norm_layer1"] > 1.5 * first


@pytest.mark.parametrize(("key", "value"), [("layers", "0"), ("variant", "lcw"),
                                            ("lr", "-1"), ("train_size", "70000"),
                                            ("train_size", "10"), ("device", "gpu"),
                                            ("preprocessing", "bogus"), ("eval_every", "30"),
                                            ("eval_every", "0"),
                                            ("eval_every", "6000020"), ("shuffle", "maybe"),
                                            ("penalty", "0.01")])  # on FF, which it is not
def test_bad_config_values_name_the_field(key, value):
    with pytest.raises(ConfigError) as err:
        from_dict(ff_mnist.Config, {key: value})
    assert err.value.field == key


def test_only_open_runs_carry_a_penalty():
    """λ is 0 unless the net is penalised, so that a run's params say which were: OPEN needs
    one (> 0), FF and FF+OINIT have none by default."""
    assert ff_mnist.Config().penalty == ff_mnist.Config(variant="oinit").penalty == 0.0
    with pytest.raises(ConfigError) as err:
        ff_mnist.Config(variant="open")
    assert err.value.field == "penalty"
    assert ff_mnist.Config(variant="open", penalty=0.01).penalty == 0.01


def test_cli_exit_status_2_for_bad_input(capsys):
    assert main(["train", "ff-mnist", "--set", "layers=0"]) == 2
    assert "layers" in capsys.readouterr().err
    assert main(["train", "ff-mnist", "--set", "preprocessing=bogus"]) == 2
    err = capsys.readouterr().err
    assert "preprocessing" in err and "standardise" in err


def test_missing_data_dir_is_a_data_error(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(DataError) as err:
        ff_mnist.train([small(data_dir=str(missing))], lambda r: None)
    assert str(missing) in err.value.field
