"""``ortho_core.config``: the checks every experiment's Config shares, on every experiment."""

from __future__ import annotations

import pytest

from ortho_core import experiments
from ortho_core.config import MAX_SEED, from_dict
from ortho_core.errors import ConfigError


@pytest.mark.parametrize("experiment", sorted(experiments.EXPERIMENTS))
@pytest.mark.parametrize("field", ["seed", "data_seed"])
def test_every_experiment_takes_32_bit_seeds_only(experiment: str, field: str) -> None:
    """A seed of 2⁶⁴ reached ``torch.Generator.manual_seed`` as a traceback, and a negative
    one trained in four experiments; a spec's seeds were already bounded to 32 bits."""
    config = experiments.get(experiment).Config
    assert getattr(from_dict(config, {field: MAX_SEED}), field) == MAX_SEED
    for value in (-1, MAX_SEED + 1, 2**64):
        with pytest.raises(ConfigError) as refused:
            from_dict(config, {field: str(value)})
        assert (refused.value.field, refused.value.value) == (field, value)
        assert refused.value.expected == f"an integer in 0..{MAX_SEED} (seeds are 32-bit)"



@pytest.mark.parametrize(("raw", "value"), [("12345678901234567891", 12345678901234567891),
                                            ("1e3", 1000), (7.0, 7), (" 42 ", 42)])
def test_an_integer_reads_exactly_past_a_float_s_precision(raw: object, value: int) -> None:
    """Read through a float, 12345678901234567891 became 12345678901234567168."""
    config = from_dict(experiments.get("synthetic").Config, {"max_iters": raw})
    assert config.max_iters == value and isinstance(config.max_iters, int)


@pytest.mark.parametrize("raw", ["+-5", "--3", "²", "1" * 5000, "1.5", "ten"])
def test_text_that_is_no_integer_is_refused_naming_the_field(raw: str) -> None:
    with pytest.raises(ConfigError) as refused:
        from_dict(experiments.get("synthetic").Config, {"max_iters": raw})
    assert (refused.value.field, refused.value.expected) == ("max_iters", "an integer")


@pytest.mark.parametrize("experiment", ["synthetic", "pixel-mnist", "ff-mnist"])
def test_open_needs_a_penalty(experiment: str) -> None:
    """OPEN with λ = 0 trained as the plain net under the OPEN name in ff-mnist and
    pixel-mnist (whose default λ is 0); synthetic refused it already."""
    config = experiments.get(experiment).Config
    with pytest.raises(ConfigError) as refused:
        from_dict(config, {"variant": "open", "penalty": "0"})
    assert (refused.value.field, refused.value.expected) == ("penalty",
                                                             "a number > 0 with variant open")
    assert from_dict(config, {"variant": "open", "penalty": "0.1"}).penalty == 0.1


def test_pixel_mnist_refuses_a_penalty_the_variant_does_not_use() -> None:
    with pytest.raises(ConfigError, match="0 unless variant is open"):
        from_dict(experiments.get("pixel-mnist").Config, {"variant": "oinit", "penalty": "0.1"})


@pytest.mark.parametrize("experiment", ["ff-mnist", "lcw-mlp"])
def test_a_training_subset_smaller_than_a_batch_names_the_batch_size(experiment: str) -> None:
    """It read ``train_size: expected None or an integer in 1000..60000 (got 128)`` where
    only the batch size had been changed."""
    config = experiments.get(experiment).Config
    with pytest.raises(ConfigError) as refused:
        from_dict(config, {"train_size": "128", "batch_size": "1000"})
    assert str(refused.value) == ("train_size: expected None or an integer in 1000..60000 "
                                  "(one batch of batch_size = 1000 at least) (got 128)")
    with pytest.raises(ConfigError, match="batch_size: expected at most the 60000 training"):
        from_dict(config, {"batch_size": "60001"})
    assert from_dict(config, {"train_size": "128", "batch_size": "128"}).train_size == 128
