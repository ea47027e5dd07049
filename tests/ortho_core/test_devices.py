"""The ``device`` field (:mod:`ortho_core.devices`): its forms, ``auto``, and a CUDA device the
machine lacks refused naming the field."""

from __future__ import annotations

import pytest
import torch

from ortho_core import devices
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
