"""The ``device`` field (:mod:`ortho_core.devices`): its forms, ``auto``, and a CUDA device the
machine lacks refused naming the field; the runtime fields every Config checks alike."""

from __future__ import annotations

import pytest
import torch

from ortho_core import devices, experiments
from ortho_core.config import from_dict
from ortho_core.errors import ConfigError


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "CPU", "cuda:", "", "tpu"])
def test_other_forms_are_refused_naming_the_field(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        devices.check_device(name)
    assert err.value.field == "device" and err.value.value == name


@pytest.mark.parametrize(("available", "expected"), [(False, "cpu"), (True, "cuda")])
def test_auto_is_cuda_where_available(monkeypatch: pytest.MonkeyPatch, available: bool,
                                      expected: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    assert devices.resolve_device("auto") == torch.device(expected)


def test_a_cuda_device_the_machine_lacks_names_the_field(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert devices.resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ConfigError, match=r"2 visible") as err:
        devices.resolve_device("cuda:2")
    assert err.value.field == "device"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"0 visible"):
        devices.resolve_device("cuda")
    assert devices.resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize(("device", "subnormals", "field"), [
    ("gpu", "flush", "device"), ("cpu", "round", "subnormals"), ("tpu", "round", "device")])
def test_the_runtime_fields_are_refused_naming_the_first_bad_one(device: str, subnormals: str,
                                                                  field: str) -> None:
    devices.check_runtime("auto", "keep")
    with pytest.raises(ConfigError) as err:
        devices.check_runtime(device, subnormals)
    assert err.value.field == field


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_every_experiment_s_config_checks_its_runtime_fields(name: str) -> None:
    config = experiments.get(name).Config
    for params, field in (({"device": "gpu"}, "device"), ({"subnormals": "round"}, "subnormals")):
        with pytest.raises(ConfigError) as err:
            from_dict(config, params)
        assert err.value.field == field
