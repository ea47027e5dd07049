"""The lcw-mlp trainer (K §5): packs against members trained alone for every variant, the
learning-rate schedule, K's angle-bias diagnostics at initialisation (Fig. 2 vs Fig. 6: plain
sigmoid activations stop depending on the input in deep layers, LCW's do not), K Fig. 13
(ReLU MLP_LCW's weight gradients grow exponentially towards the input) and bad inputs."""

from __future__ import annotations

import pytest
import torch

from ortho_core.config import from_dict
from ortho_core.diagnostics import detail_layers
from ortho_core.errors import ConfigError, DataError
from ortho_core.experiments import lcw_mlp
from ortho_core.reporting import Outcome, Report
from sweeps.cli import main

pytestmark = pytest.mark.usefixtures("shared_data")


def small(**overrides) -> lcw_mlp.Config:
    base = dict(layers=3, hidden=16, batch_size=32, epochs=2, train_size=256, test_size=200,
                diag_samples=20)
    return lcw_mlp.Config(**{**base, **overrides})


def collect(configs):
    reports: list[Report] = []
    results = lcw_mlp.train(configs, reports.append)
    return reports, results


@pytest.mark.parametrize("variant", ["plain", "lcw", "bn", "wn"])
def test_pack_members_equal_training_alone(variant):
    configs = [small(variant=variant, lr=0.1, sigma_z=0.5, seed=1),
               small(variant=variant, lr=0.3, lr_decay=0.5, sigma_z=1.0, seed=2)]
    pack_reports, pack_results = collect(configs)
    assert all(r.outcome is not Outcome.DIVERGED for r in pack_results)
    for member, cfg in enumerate(configs):
        alone_reports, (alone,) = collect([cfg])
        mine = [r for r in pack_reports if r.member == member]
        assert [r.step for r in mine] == [r.step for r in alone_reports] == [8, 16]
        for a, b in zip(mine, alone_reports, strict=True):
            for key in ("lr", "train_loss", "train_accuracy", "test_accuracy"):
                assert a.metrics[key] == pytest.approx(b.metrics[key], rel=1e-4, abs=1e-6)
        ours = pack_results[member]
        assert ours.summary["test_accuracy"] == pytest.approx(alone.summary["test_accuracy"],
                                                              abs=1e-6)
        torch.testing.assert_close(
            torch.tensor(ours.artifacts["gradients_init"]["grad_rms"]),
            torch.tensor(alone.artifacts["gradients_init"]["grad_rms"]), rtol=1e-4, atol=0)
        torch.testing.assert_close(
            torch.tensor(ours.artifacts["angles_final"]["act_mean"]),
            torch.tensor(alone.artifacts["angles_final"]["act_mean"]), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("variant", ["plain", "lcw", "bn", "wn"])
def test_the_warm_up_step_leaves_the_model_and_the_random_streams_as_they_were(variant):
    """The step that keeps one-time costs out of the first epoch's time trains a copy: every
    parameter and buffer (BN's running statistics) and torch's random stream are untouched."""
    torch.manual_seed(0)
    x, y = torch.rand(32, 784), torch.randint(0, 10, (32,))
    model = lcw_mlp.build_model([small(variant=variant, seed=s) for s in (1, 2)], x,
                                torch.device("cpu"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    lcw_mlp.warm_up(model, x, y)
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(torch.get_rng_state(), rng)


def test_schedule_summary_and_artifacts():
    reports, (result,) = collect([small(epochs=3, layers=6)])
    assert [r.metrics["lr"] for r in reports] == pytest.approx([0.1, 0.1, 0.095])
    assert {"train_accuracy", "best_train_accuracy", "mean_train_accuracy", "test_accuracy",
            "best_test_accuracy", "train_loss", "seconds_per_epoch", "pack_size", "epochs",
            "baseline_accuracy", "wall_time", "init_act_std_first", "init_act_std_last",
            "init_angle_std_neurons_last", "init_grad_ratio"} == set(result.summary)
    # The area under the training curve per epoch (K Fig. 12's rate of increase).
    curve = [r.metrics["train_accuracy"] for r in reports]
    assert result.summary["mean_train_accuracy"] == pytest.approx(sum(curve) / 3)
    assert result.summary["best_train_accuracy"] == max(curve)
    angles, rms = result.artifacts["angles_init"], result.artifacts["gradients_init"]["grad_rms"]
    assert result.summary["init_act_std_last"] == angles["act_std_samples"][5]
    assert result.summary["init_grad_ratio"] == pytest.approx(rms[0] / rms[5])
    grads = result.artifacts["gradients_init"]
    assert grads["layer"] == list(range(1, 8)) and len(grads["grad_quantiles"][0]) == 5
    angles = result.artifacts["angles_init"]
    assert angles["layer"] == list(range(1, 7))
    assert angles["detail_layers"] == [1, 2, 4, 5, 6]
    # First ten neurons (here all 16 exist), five quantiles each, in increasing order.
    quantiles = torch.tensor(angles["angle_quantiles"])
    assert quantiles.shape == (5, 10, 5)
    assert bool((quantiles.diff(dim=-1) >= 0).all())
    assert torch.tensor(angles["activations"]).shape == (5, 20, 16)


def test_epochs_after_a_divergence_count_zero_in_the_mean_training_accuracy():
    """ReLU MLP_LCW explodes (K §5.2): at α = 0.01 in its second epoch here, at 10⁻⁴ not at
    all. The mean over the 3 scheduled epochs counts only the epochs before the divergence;
    the final training loss is that of the last epoch each member completed."""
    reports, results = collect([small(variant="lcw", activation="relu", layers=20, hidden=64,
                                      epochs=3, lr=lr, seed=1) for lr in (1e-2, 1e-4)])
    assert [r.outcome for r in results] == [Outcome.DIVERGED, Outcome.UNSOLVED]
    assert [r.summary["epochs"] for r in results] == [1.0, 3.0]
    for member, result in enumerate(results):
        curve = [r.metrics["train_accuracy"] for r in reports if r.member == member]
        assert result.summary["mean_train_accuracy"] == pytest.approx(sum(curve) / 3)
        # train_loss: the last epoch the member completed, the last point of its curve to the
        # bit (so the tracker writes no second point at that step); not the 0 that the
        # epochs after a divergence add
        last = [r.metrics["train_loss"] for r in reports if r.member == member][-1]
        assert result.summary["train_loss"] == last > 0


def test_angle_bias_in_deep_sigmoid_layers_and_its_removal_by_lcw():
    """K Figs. 2-3 vs 6-7 on MNIST: 10 sigmoid layers at initialisation."""
    plain, lcw = (lcw_mlp.train([small(variant=v, layers=10, hidden=64, epochs=1,
                                       batch_size=64, train_size=64, diag_samples=100)],
                                lambda r: None)[0].artifacts["angles_init"]
                  for v in ("plain", "lcw"))
    # Plain: each deep neuron's activation barely depends on the input (stripes) ...
    assert plain["act_std_samples"][-1] < 0.01 * plain["act_std_samples"][0]
    # ... and its mean angle is biased away from the others'; LCW keeps both near layer 1's.
    assert lcw["act_std_samples"][-1] > 0.5 * lcw["act_std_samples"][0]
    assert max(lcw["angle_std_neurons"][1:]) < 0.5 * min(plain["angle_std_neurons"][1:])
    assert all(abs(m - 90.0) < 2.0 for m in lcw["angle_mean"])
    # The layers of K Figs. 2-3 and 6-7 are kept in detail, their heat maps those layers'.
    assert plain["detail_layers"] == lcw["detail_layers"] == [1, 3, 5, 7, 9]
    for stats in (plain, lcw):
        heat_means = [float(torch.tensor(a).mean()) for a in stats["activations"]]
        assert heat_means == pytest.approx([stats["act_mean"][n - 1] for n in (1, 3, 5, 7, 9)],
                                           abs=1e-4)


@pytest.mark.parametrize(("layers", "shown"), [(10, [1, 3, 5, 7, 9]), (50, [1, 10, 20, 30, 40]),
                                               (100, [1, 26, 50, 75, 100]), (3, [1, 2, 3])])
def test_detail_layers_are_kutsunas_for_the_depths_of_his_figures(layers, shown):
    """K Figs. 2-3, 6-7 (10 layers) and 4-5, 10-11 (50 layers); elsewhere the first, the last
    and three between."""
    assert detail_layers(layers) == shown


def test_relu_lcw_gradients_grow_exponentially_towards_the_input():
    """K Fig. 13 (there MLP(20, 256) on CIFAR-10; here 20 × 64 on MNIST)."""
    rms = {v: lcw_mlp.train([small(variant=v, activation="relu", layers=20, hidden=64,
                                   epochs=1, batch_size=64, train_size=64)],
                            lambda r: None)[0].artifacts["gradients_init"]["grad_rms"]
           for v in ("plain", "lcw")}
    assert rms["lcw"][0] > 10 * rms["lcw"][-2]
    assert rms["plain"][0] < 3 * rms["plain"][-2]


@pytest.mark.parametrize(("key", "value"), [("dataset", "imagenet"), ("layers", "0"),
                                            ("variant", "ln"), ("activation", "tanh"),
                                            ("batch_size", "1"), ("train_size", "100"),
                                            ("lcw_basis", "qr"), ("input_range", "01")])
def test_bad_config_values_name_the_field(key, value):
    with pytest.raises(ConfigError) as err:
        from_dict(lcw_mlp.Config, {key: value})
    assert err.value.field == key


def test_a_config_built_in_code_is_checked_as_one_read_from_text():
    with pytest.raises(ConfigError) as err:
        lcw_mlp.Config(diagnostics=1)  # type: ignore[arg-type]
    assert err.value.field == "diagnostics"


def test_cli_exit_status_2_for_an_unknown_dataset(capsys):
    assert main(["train", "lcw-mlp", "--set", "dataset=imagenet"]) == 2
    assert "dataset" in capsys.readouterr().err


def test_missing_dataset_files_are_a_data_error(tmp_path):
    with pytest.raises(DataError) as err:
        lcw_mlp.train([small(dataset="cifar10", data_dir=str(tmp_path))], lambda r: None)
    assert str(tmp_path) in err.value.field
