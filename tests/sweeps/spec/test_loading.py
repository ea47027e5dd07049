"""Loading: shipped specs by name, any spec by path, and an unknown name or file."""

from __future__ import annotations

from pathlib import Path

import pytest

import sweeps
from ortho_core.errors import ConfigError
from sweeps.spec import available_specs, load_spec


def test_available_specs_lists_every_shipped_file_sorted():
    shipped = sorted(p.stem for p in (Path(sweeps.__file__).parent / "specs").glob("*.yaml"))
    assert available_specs() == shipped
    assert {"orth-pretrain-convergence", "synthetic-max-length"} <= set(shipped)


def test_load_by_name_or_path():
    by_name = load_spec("synthetic-max-length")
    by_path = load_spec(str(by_name.source.path))
    assert by_name.model_dump() == by_path.model_dump()
    assert by_name.source.file == "synthetic-max-length.yaml"
    assert by_path.source.file == str(by_name.source.path)


def test_unknown_spec_lists_the_available_ones():
    with pytest.raises(ConfigError) as info:
        load_spec("no-such-spec")
    assert info.value.field == "spec"
    assert "synthetic-max-length" in str(info.value) and "no-such-spec" in str(info.value)


def test_missing_file():
    with pytest.raises(ConfigError) as info:
        load_spec("/no/such/dir/spec.yaml")
    assert info.value.field == "spec"
