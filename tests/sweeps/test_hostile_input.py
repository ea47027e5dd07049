"""Hostile input, generated (issue 14): every bad spec and bad ``ortho`` argument ends with exit
status 2 and one line on stderr naming the file or the field; never a traceback, never a
store or a run under ``--home``, never Ray.

Specs are the shipped ones mutated (wrong types and values, unknown keys and config keys,
profiles that do not exist, sweeps too large to run, nested garbage), YAML that does not
parse, non-printable characters and binary garbage. Hypothesis runs derandomised and without
its example database, so CI sees the same inputs every time; the number tried is printed at
the end of the module. The CLI is driven in-process (:func:`sweeps.cli.main`); a spec the
code accepted would fail the test at ``build_plan`` instead of starting a sweep.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import re
import string
import sys
import typing
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ortho_core import experiments
from ortho_core.config import MAX_SEED
from sweeps import runner
from sweeps.cli import main
from sweeps.spec import PROFILES, available_specs
from sweeps.spec.loading import SPEC_DIR
from sweeps.spec.profiles import MAX_CONFIGURATIONS, MAX_PACK_SIZE

TRIED = [0]
"""Generated inputs run through the CLI in this module."""

HOSTILE = settings(derandomize=True, database=None, deadline=None, max_examples=60,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])
"""Deterministic, database-less settings: about 12 s for the whole module on 2 cores."""

SPECS = available_specs()
TEXTS = {name: (Path(str(SPEC_DIR)) / f"{name}.yaml").read_text() for name in SPECS}
DOCS = {name: yaml.safe_load(text) for name, text in TEXTS.items()}
SETTINGS = {"repeats": 1, "seed": 0, "pack_size": 1, "max_failures": 0}
"""Integer settings and the least value each allows."""
NAME = st.text(string.ascii_letters + "_", min_size=1, max_size=12)


class Accepted(Exception):
    """A generated input passed every check (the test fails; no sweep starts)."""


@pytest.fixture(autouse=True)
def _no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec that passes every check stops at ``build_plan``, before any store or Ray."""

    def accepted(spec: object) -> None:
        raise Accepted(spec)

    monkeypatch.setattr(runner, "build_plan", accepted)
    monkeypatch.delenv("ORTHO_TRACKING_URI", raising=False)
    monkeypatch.delenv("ORTHO_HOME", raising=False)


@pytest.fixture(scope="module", autouse=True)
def _count(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print how many generated inputs the module tried."""
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin(
        "capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\ntest_hostile_input: {TRIED[0]} generated bad inputs "
                                "refused")


def refused(argv: list[str], home: Path, *names: str) -> str:
    """Run ``ortho ARGV`` in-process; require exit status 2, one line on stderr that names
    one of ``names``, no traceback, nothing under ``home`` and Ray not started. The line."""
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code
    text = err.getvalue()
    assert status == 2, (argv, text)
    assert text.endswith("\n") and text.count("\n") == 1, (argv, text)
    assert any(name in text for name in names), (argv, names, text)
    assert not home.exists(), (argv, list(home.rglob("*")))
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()
    return text


def run_spec(tmp_path: Path, content: str | bytes, profile: str, *names: str,
             stem: str = "t") -> str:
    """Write ``content`` as ``<stem>.yaml`` and ``ortho sweep run`` it; see :func:`refused`.
    The message names the file and a line in it, then a field: one of ``names`` when any is
    given."""
    path = tmp_path / f"{stem}.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    text = refused(["sweep", "run", str(path), "--profile", profile, "--home",
                    str(tmp_path / "home")], tmp_path / "home", str(path))
    where = re.search(re.escape(str(path)) + r":\d+: (\S.*)$", text)
    assert where is not None, text
    assert not names or any(name in where[1] for name in names), (names, text)
    return text


def _dump(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _in_force(doc: dict, profile: str, key: str) -> None:
    """Make a key set at ``profile``'s top level hold in all its groups: drop it from the
    profile's own groups and from the profile's other part (fixed or space)."""
    prof = doc["profiles"].setdefault(profile, {}) or {}
    doc["profiles"][profile] = prof
    for group in prof.get("groups") or []:
        group.get("fixed", {}).pop(key, None)
        group.get("space", {}).pop(key, None)
    for part in ("fixed", "space"):
        if prof.get(part) is not None:
            prof[part].pop(key, None)


def bad_scalar(least: int) -> st.SearchStrategy:
    """Values an integer setting >= ``least`` refuses."""
    return st.one_of(st.integers(max_value=least - 1), st.floats(allow_nan=False).filter(
        lambda x: not float(x).is_integer()), st.text(string.ascii_letters, min_size=1)
        .filter(lambda s: s.lower() != "auto"), st.lists(st.integers(), max_size=3),
        st.dictionaries(NAME, st.integers(), min_size=1, max_size=2))


def _config_types(experiment: str) -> dict[str, object]:
    config = experiments.get(experiment).Config
    hints = typing.get_type_hints(config)
    return {f.name: hints[f.name] for f in dataclasses.fields(config) if f.init}


def _refuses(tp: object, value: str) -> bool:
    """Whether a config field of type ``tp`` surely refuses the string ``value``."""
    if value.lower() in ("none", "null", "true", "false", "yes", "no", "on", "off"):
        return False
    try:
        float(value)
    except ValueError:
        pass
    else:
        return False
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Literal:
        return value not in args
    base = [a for a in args if a is not type(None)] if args else [tp]
    return base[0] in (int, float, bool) and len(base) == 1


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict, str, tuple[str, ...]]:
    """A shipped spec with one fault: (its name, the document, the profile asked for, the
    strings the message must hold one of)."""
    name = draw(st.sampled_from(SPECS))
    doc = copy.deepcopy(DOCS[name])
    asked = draw(st.sampled_from(PROFILES))
    where = draw(st.sampled_from(PROFILES))
    kind = draw(st.sampled_from(["unknown key", "setting", "profile setting", "config key",
                                 "config value", "experiment", "huge repeats", "huge grid",
                                 "huge pack", "huge seed", "garbage", "name"]))
    if kind == "unknown key":
        key = draw(NAME.filter(lambda k: k not in doc))
        doc[key] = draw(st.integers())
        return name, doc, asked, (key,)
    if kind in ("setting", "profile setting"):
        setting, least = draw(st.sampled_from(sorted(SETTINGS.items())))
        value = draw(bad_scalar(least))
        if kind == "setting":
            doc[setting] = value
            return name, doc, asked, (setting,)
        doc["profiles"][where] = {**(doc["profiles"][where] or {}), setting: value}
        return name, doc, asked, (f"profiles.{where}.{setting}",)
    if kind == "config key":
        key = draw(NAME.filter(lambda k: k not in _config_types(doc["experiment"])
                               and k != "seed"))
        _in_force(doc, where, key)
        doc["profiles"][where].setdefault("fixed", {})[key] = draw(st.integers())
        return name, doc, asked, (f"profiles.{where}.fixed.{key}",)
    if kind == "config value":
        types = _config_types(doc["experiment"])
        key = draw(st.sampled_from(sorted(k for k in types if k not in ("seed", "data_seed"))))
        value = draw(st.text(string.ascii_letters, min_size=1, max_size=8))
        assume(_refuses(types[key], value))
        _in_force(doc, where, key)
        doc["profiles"][where].setdefault("fixed", {})[key] = value
        return name, doc, asked, (f"profiles.{where}.fixed.{key}",)
    if kind == "experiment":
        doc["experiment"] = draw(st.one_of(NAME.filter(
            lambda e: e not in experiments.EXPERIMENTS), st.integers(), st.lists(st.none())))
        return name, doc, asked, ("experiment",)
    if kind == "huge repeats":
        value = draw(st.integers(MAX_CONFIGURATIONS + 1, 10**30))
        doc["profiles"][where] = {**(doc["profiles"][where] or {}), "repeats": value}
        return name, doc, asked, (f"profiles.{where}.repeats", str(value))
    if kind == "huge grid":
        num = draw(st.integers(MAX_CONFIGURATIONS + 1, 10**30))
        key = draw(st.sampled_from(sorted(_config_types(doc["experiment"]))).filter(
            lambda k: k not in ("seed", "data_seed")))
        _in_force(doc, where, key)
        doc["profiles"][where].setdefault("space", {})[key] = {"range": [0, 1], "num": num}
        return name, doc, asked, ("configurations",)
    if kind == "huge pack":
        value = draw(st.integers(MAX_PACK_SIZE + 1, 10**30))
        doc["profiles"][where] = {**(doc["profiles"][where] or {}), "pack_size": value}
        return name, doc, asked, (f"profiles.{where}.pack_size",)
    if kind == "huge seed":
        value = draw(st.integers(MAX_SEED + 1, 10**30))
        doc["profiles"][where] = {**(doc["profiles"][where] or {}), "seed": value}
        return name, doc, asked, (f"profiles.{where}.seed",)
    if kind == "garbage":
        garbage = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                               lambda inner: st.lists(inner, max_size=3)
                               | st.dictionaries(NAME, inner, max_size=3), max_leaves=8)
        target = draw(st.sampled_from([k for k in doc if k not in ("description",)]))
        doc[target] = draw(st.dictionaries(NAME.map(lambda k: "~" + k), garbage, min_size=1,
                                           max_size=3))
        return name, doc, asked, (target,)
    doc["name"] = draw(st.one_of(NAME.filter(lambda n: n != name), st.integers()))
    return name, doc, asked, ("name",)


@HOSTILE
@given(case=mutated())
def test_mutated_shipped_spec(tmp_path_factory, case):
    TRIED[0] += 1
    name, doc, asked, names = case
    tmp = tmp_path_factory.mktemp("spec")
    run_spec(tmp, _dump(doc), asked, *names, stem=name)


INVALID_LINES = ["  - [", "{a: b", "a: b: c", "- item", "'unterminated", "\tkey: value",
                 "*undefined", "key: !!python/object/apply:os.system [ls]", "? ? ?", "]",
                 "&anchor", "%YAML 9.9"]
"""Lines YAML cannot parse in most places of a spec."""


@HOSTILE
@given(name=st.sampled_from(SPECS), line=st.sampled_from(INVALID_LINES),
       at=st.integers(0, 200), profile=st.sampled_from(PROFILES))
def test_invalid_yaml(tmp_path_factory, name, line, at, profile):
    TRIED[0] += 1
    lines = TEXTS[name].splitlines()
    lines.insert(at % (len(lines) + 1), line)
    text = "\n".join(lines) + "\n"
    try:
        yaml.safe_load(text)
    except yaml.YAMLError:
        pass
    else:
        assume(False)
    run_spec(tmp_path_factory.mktemp("yaml"), text, profile, stem=name)


NON_PRINTABLE = [chr(c) for c in range(32) if chr(c) not in "\t\n\r"] + [
    "\x7f", "\ufffe", "\uffff"]


@HOSTILE
@given(name=st.sampled_from(SPECS), char=st.sampled_from(NON_PRINTABLE),
       at=st.integers(0, 10**6))
def test_non_printable(tmp_path_factory, name, char, at):
    """The known bug: a yaml ReaderError traceback with exit status 1."""
    TRIED[0] += 1
    text = TEXTS[name]
    at %= len(text) + 1
    line = run_spec(tmp_path_factory.mktemp("np"), text[:at] + char + text[at:], "smoke",
                    "yaml", stem=name)
    assert f"{name}.yaml:{text[:at].count(chr(10)) + 1}:" in line


@HOSTILE
@given(content=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                         st.tuples(st.sampled_from(SPECS), st.binary(min_size=1, max_size=8),
                                   st.integers(0, 10**6)).map(
                             lambda c: TEXTS[c[0]].encode()[:c[2] % 5000] + c[1]
                             + TEXTS[c[0]].encode()[c[2] % 5000:])))
def test_garbage_bytes(tmp_path_factory, content):
    TRIED[0] += 1
    run_spec(tmp_path_factory.mktemp("bin"), content, "smoke")


def test_alias_bomb_and_depth(tmp_path):
    """An alias bomb is refused before it is built; so is nesting beyond any spec's."""
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
    assert "at most 100000 keys" in run_spec(tmp_path, bomb, "smoke")
    assert "levels of nested" in run_spec(tmp_path, "[" * 5000, "smoke", "yaml")


def test_whole_spec_validated(tmp_path):
    """A bad base value that the asked profile overrides is still refused, naming the first
    profile that uses it."""
    doc = copy.deepcopy(DOCS["synthetic-max-length"])
    doc["fixed"]["hidden"] = "many"
    assert doc["profiles"]["smoke"]["fixed"]["hidden"] == 32
    line = run_spec(tmp_path, _dump(doc), "smoke", "fixed.hidden", stem="synthetic-max-length")
    assert "profile 'cpu': fixed.hidden: expected an integer (got 'many')" in line


def test_size_refused_with_count(tmp_path):
    """A grid of billions of cells is refused at once, its count in the message."""
    doc = copy.deepcopy(DOCS["synthetic-max-length"])
    doc["profiles"]["smoke"]["space"] = {"lr": {"log_range": [1e-5, 1e-1], "num": 10**6}}
    doc["profiles"]["smoke"]["repeats"] = 1000
    line = run_spec(tmp_path, _dump(doc), "smoke", "configurations",
                    stem="synthetic-max-length")
    assert "profiles.smoke.space.lr" in line and "(got 4000000000)" in line, line


OPTION = st.text(string.ascii_letters + string.digits + "-_./ \n\t\x00\x7f", max_size=20)
"""An option value, printable or not."""


@st.composite
def bad_arguments(draw: st.DrawFn, home: str) -> tuple[list[str], tuple[str, ...]]:
    """Arguments of ``sweep run|resume|status|studies``, ``train`` and ``report`` with one
    bad value; the strings the message must hold one of."""
    kind = draw(st.sampled_from(["spec name", "profile", "max-concurrent", "status",
                                 "resume", "studies", "studies port", "unknown option",
                                 "experiment", "set", "set value", "huge pack", "report spec",
                                 "report format", "report sweep"]))
    spec = draw(st.sampled_from(SPECS))
    if kind == "spec name":
        value = draw(OPTION.filter(lambda v: v not in SPECS and v.strip() != ""
                                   and not v.startswith("-")))
        return ["sweep", "run", value, "--home", home], ("spec",)
    if kind == "profile":
        value = draw(OPTION.filter(lambda v: v not in PROFILES and not v.startswith("-")))
        return ["sweep", "run", spec, "--profile", value, "--home", home], ("profiles",)
    if kind == "max-concurrent":
        value = draw(st.one_of(st.integers(max_value=0).map(str), OPTION.filter(
            lambda v: not v.strip().isdigit() or int(v) < 1)).filter(
                lambda v: not v.startswith("-") or v[1:].isdigit()))
        return (["sweep", "run", spec, "--max-concurrent", value, "--home", home],
                ("--max-concurrent",))
    if kind == "studies port":
        value = draw(OPTION.filter(lambda v: not v.strip().lstrip("+-").isdigit()
                                   and not v.startswith("-")))
        return (["sweep", "studies", "--dashboard", "--port", value, "--home", home],
                ("--port",))
    if kind in ("status", "resume", "studies"):
        value = draw(OPTION.filter(lambda v: v.strip() != "" and not v.startswith("-")))
        return ["sweep", kind, value, "--home", home], ("sweep",)
    if kind == "unknown option":
        option = "--" + draw(NAME)
        assume(option not in ("--profile", "--home", "--address", "--storage", "--help"))
        return ["sweep", "run", spec, option, "--home", home], ("unrecognized", "ambiguous")
    if kind == "experiment":
        value = draw(OPTION.filter(lambda v: v not in experiments.EXPERIMENTS
                                   and not v.startswith("-")))
        return ["train", value], ("experiment",)
    experiment = draw(st.sampled_from(sorted(experiments.EXPERIMENTS)))
    if kind == "set":
        value = draw(OPTION.filter(lambda v: "=" not in v or not v.partition("=")[0].strip()))
        return ["train", experiment, "--set", value], ("--set",)
    if kind == "set value":
        types = _config_types(experiment)
        key = draw(st.sampled_from(sorted(types)))
        value = draw(st.text(string.ascii_letters, min_size=1, max_size=8))
        assume(_refuses(types[key], value))
        return ["train", experiment, "--set", f"{key}={value}"], (key,)
    if kind == "huge pack":
        widths = draw(st.lists(st.integers(33, 60), min_size=2, max_size=3))
        keys = draw(st.lists(NAME, min_size=len(widths), max_size=len(widths), unique=True))
        sets = [f"{k}={','.join(map(str, range(w)))}" for k, w in zip(keys, widths,
                                                                       strict=True)]
        return ["train", experiment, *[a for s in sets for a in ("--set", s)]], ("--set",)
    if kind == "report spec":  # a name a spec of the user's could have: the store tells
        value = draw(OPTION.filter(lambda v: v not in SPECS and not v.startswith("-")))
        return ["report", value, "--home", home], ("spec", "tracking_uri")
    if kind == "report format":
        value = draw(OPTION.filter(lambda v: v not in ("md", "latex", "csv", "html")
                                   and not v.startswith("-")))
        return ["report", spec, "--format", value, "--home", home], ("--format",)
    value = draw(OPTION.filter(lambda v: not v.startswith("-")))
    return ["report", spec, "--sweep", value, "--home", home], ("tracking_uri", "sweep")


@HOSTILE
@given(data=st.data())
def test_bad_arguments(tmp_path, data):
    TRIED[0] += 1
    home = tmp_path / "home"
    argv, names = data.draw(bad_arguments(str(home)))
    refused(argv, home, *names)
