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
