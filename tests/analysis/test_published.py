"""The published-values modules: pure data (importable without pandas or matplotlib), keyed by
what the reports look up, and agreeing with the ``paper`` profiles that follow them."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import analysis.published
from analysis.published import kutsuna, manchev, nosarzewski
from analysis.reports.ff_mnist import FF_MODELS
from analysis.reports.lcw_tables import MODELS as K_MODELS
from analysis.reports.max_length import MODELS, PROBLEMS
from ortho_core.experiments.deep_orthogonal import Config as DeepOrthConfig
from sweeps.spec import load_spec, resolve

ROOT = Path(__file__).resolve().parents[2]


def test_published_modules_are_pure_data() -> None:
    names = [m.name for m in pkgutil.iter_modules(analysis.published.__path__)]
    assert {"galvan", "kutsuna", "manchev", "nosarzewski"} <= set(names)
    code = (f"import sys, {', '.join(f'analysis.published.{n}' for n in names)}; "
            "print(sorted(m for m in ('pandas', 'numpy', 'matplotlib', 'mlflow') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_table_i_has_every_problem_and_model_and_lambda_only_for_open() -> None:
    assert set(manchev.TABLE_I) == {(t, v) for t in PROBLEMS for v in MODELS}
    for (_, variant), cell in manchev.TABLE_I.items():
        assert (cell.penalty is not None) == (variant == "open")
        assert cell.max_len % manchev.PAPER_PROTOCOL["seq_len_step"] == 0
        assert cell.max_len > manchev.PAPER_PROTOCOL["seq_len"]


def test_pretrain_and_ff_tables_are_keyed_as_the_reports_look_them_up() -> None:
    assert list(manchev.PRETRAIN) == ["normal", "uniform"]
    assert all(0 < p.success_rate <= 1 and p.repeats > 0 for p in manchev.PRETRAIN.values())
    assert list(manchev.TABLE_III) == list(FF_MODELS)
    assert manchev.TABLE_III["plain"].lr is None
    assert [p.penalty is not None for p in manchev.TABLE_III.values()] == [False, True, False]
    assert sorted(manchev.TABLE_IV, reverse=True) == [10.0 ** -k for k in range(1, 6)]
    # FF never left the majority class, which every other model and α beats.
    assert manchev.TABLE_III["plain"].accuracy < min(manchev.TABLE_IV.values())


def test_kutsuna_statements_name_known_networks_and_models() -> None:
    networks = {*kutsuna.FIG12_SHAPES, kutsuna.FIG13_SHAPE}
    assert {key[:3] for key in kutsuna.PUBLISHED} == networks
    assert {key[3] for key in kutsuna.PUBLISHED} <= set(K_MODELS)
    assert f"+{100 * kutsuna.LCW_OVERHEAD:.0f} %" in kutsuna.PUBLISHED[
        ("sigmoid", 100, 128, "lcw")]


def test_deep_orthogonal_paper_profile_is_nosarzewskis_protocol() -> None:
    """The ``paper`` profile of ``deep-orthogonal`` trains the nets §6 describes, as
    :mod:`analysis.published.nosarzewski` states them for the report."""
    cells = [c.params for c in resolve(load_spec("deep-orthogonal"), "paper").cells()]
    assert {c["lr"] for c in cells} == {nosarzewski.PAPER_PROTOCOL["lr"]}
    assert {c["momentum"] for c in cells} == {nosarzewski.PAPER_PROTOCOL["momentum"]}
    two_class = [c for c in cells if c["dataset"] == "two_class"]
    assert {c["hidden"] for c in two_class} == {nosarzewski.F1_HIDDEN}
    assert {c.get("n_points", DeepOrthConfig.n_points) for c in two_class} == {
        nosarzewski.F1_POINTS}
    assert {c["layers"] for c in two_class if c["variant"] == "orth"} == {
        nosarzewski.F1_ORTH_DEPTH}
    relu_depths = {c["layers"] for c in two_class if c["variant"] == "relu"}
    assert min(relu_depths) < nosarzewski.F1_RELU_VANISH_DEPTH <= max(relu_depths)
    spiral = [c for c in cells if c["dataset"] == "spiral"]
    assert {c["weight_decay"] for c in spiral} == {nosarzewski.F3_WEIGHT_DECAY}
    mnist = [c for c in cells if c["dataset"] == "mnist"]
    assert {(c["hidden"], c["layers"]) for c in mnist} == {
        (nosarzewski.F4_HIDDEN, nosarzewski.F4_INTERNAL + 2)}  # sign-flip first and last


def test_deep_orthogonal_paper_profile_lets_nosarzewskis_rate_converge() -> None:
    """N states no budget; at α = 10⁻³ the two-class orthogonal net levels off and the
    spiral's Orth/ReLU net trains only after about 10⁵ steps (α × steps ≈ 100-200, the spec's
    header), and the MNIST orthogonal net reaches the cpu profile's error after 10⁵."""
    cells = [c.params for c in resolve(load_spec("deep-orthogonal"), "paper").cells()]
    planar = {round(c["lr"] * c["max_iters"]) for c in cells if c["dataset"] != "mnist"}
    mnist = {round(c["lr"] * c["max_iters"]) for c in cells if c["dataset"] == "mnist"}
    assert planar == {200} and mnist == {100}
