"""Spec sources: the message and pickling of a SpecError, and YAML read as YAML 1.2 reads
numbers."""

from __future__ import annotations

import pickle

import pytest

from ortho_core.errors import ConfigError
from sweeps.spec import SpecError, load_spec
from tests.sweeps.spec.helpers import BASE, cells_of, write


def test_error_message_format(tmp_path):
    text = BASE.replace("  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}",
                        "  lr: {log_range: [0.1, -1], num: 4}")
    path = write(tmp_path, text, "synthetic-max-length")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == (f"{path}:10: space.lr.log_range: expected two positive numbers "
                               "low < high (got [0.1, -1])")
    assert isinstance(info.value, ConfigError)
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.field, copy.line) == (str(info.value), "space.lr.log_range", 10)


def test_exponent_without_dot_reads_as_a_float(tmp_path):
    text = BASE.replace("{log_range: [1.0e-3, 1.0e-1], num: 3}", "[1e-3, 1e-1]")
    assert sorted({c.params["lr"] for c in cells_of(tmp_path, text)}) == [1e-3, 1e-1]
