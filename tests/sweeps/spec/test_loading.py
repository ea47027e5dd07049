"""Loading: shipped specs by name, any spec by path, and an unknown name or file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sweeps
from ortho_core.errors import ConfigError
from sweeps.spec import SpecError, available_specs, load_spec
from tests.sweeps.spec.helpers import BASE


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


def test_a_name_whose_file_is_in_this_folder_is_pointed_at(tmp_path, monkeypatch):
    """``ortho sweep run my-grid`` beside ``my-grid.yaml``: names are shipped specs', and the
    message says the file here is taken by its path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-grid.yaml").write_text("name: my-grid\n")
    with pytest.raises(ConfigError) as info:
        load_spec("my-grid")
    assert str(info.value).endswith("or a path to a YAML file; to run the one here, pass "
                                    "./my-grid.yaml (got 'my-grid')")


def test_missing_file():
    with pytest.raises(ConfigError) as info:
        load_spec("/no/such/dir/spec.yaml")
    assert info.value.field == "spec"


@pytest.mark.parametrize("name", ["a b", "a\\b", "x'y\"z"])
def test_a_name_no_search_could_find_is_refused(tmp_path, name):
    """A spec named ``a b`` ran, and then ``status``, ``resume`` and ``report`` could not
    find its sweeps by name."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(BASE.replace("name: t\n", f"name: {json.dumps(name)}\n"))
    with pytest.raises(SpecError) as info:
        load_spec(str(path))
    assert (info.value.field, info.value.line) == ("name", 1)
