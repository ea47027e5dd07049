"""The report table type: cell text, partial marks, provenance and the three renderings."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import pandas as pd
import pytest

from analysis.load import Sweep, SweepRuns
from analysis.report import search
from analysis.tables import Cell, Provenance, Table, latex_escape

PROV = Provenance(spec="synthetic-max-length", profile="cpu", sweep_id="sw-1", n_runs=5,
                  n_configurations=4, outcomes={"solved": 2, "failed": 1, "diverged": 0,
                                                "incomplete": 1}, n_expected=6)


def table() -> Table:
    return Table(name="demo", title="Demo", columns=["Problem", "T", "α"],
                 rows=[["Adding", Cell(80.0, "d"), Cell(0.001, "g")],
                       ["Temporal Order", Cell(40, "d", partial=True), Cell(0.01, "g", True)],
                       ["Permutation", Cell(None, "d", partial=True), Cell(None)]],
                 provenance=PROV, notes=["A note."])


def test_cell_text_formats_marks_and_empty_values() -> None:
    assert Cell(80.0, "d").marked() == "80"
    assert Cell(1e-05, "g").marked() == "1e-05"
    assert Cell(22.774, ".2f", partial=True).marked() == "22.77†"
    assert Cell(float("nan"), "d", partial=True).marked() == "missing"
    assert Cell(None).marked() == "–"
    assert Cell("SRNN").marked() == "SRNN"
    assert Cell(True, "d").text() == "True"


def test_provenance_line_states_spec_profile_sweep_and_counts() -> None:
    assert PROV.line() == ("spec synthetic-max-length · profile cpu · sweep sw-1 · 5 runs → "
                           "4 configurations of 6 expected (2 solved, 1 failed, 1 incomplete)")


def test_provenance_line_names_an_optuna_search_then_the_commit() -> None:
    optuna = replace(PROV, search="Optuna TPE, 4 trials in each of 2 cells")
    assert optuna.line() == PROV.line() + " · Optuna TPE, 4 trials in each of 2 cells"
    assert replace(optuna, git_sha="0123456789abcdef" * 2 + "01234567").line() == (
        optuna.line() + " · git 0123456789ab")
    assert replace(PROV, git_sha="unknown").line() == PROV.line()
    assert replace(PROV, git_sha="ab" * 20, git_dirty=True).line() == (
        PROV.line() + " · git abababababab with uncommitted changes")


@pytest.mark.parametrize(("storage", "sampler", "cells", "text"), [
    ("", "", [{"trials": 1}] * 3, ""),  # a grid sweep
    ("sqlite:///h/optuna.db", "cmaes", [{"trials": 6}] * 2,
     "Optuna CMA-ES, 6 trials in each of 2 cells"),
    ("sqlite:///h/optuna.db", "tpe", [{"trials": 1}] * 2, "Optuna TPE, 1 trial a cell"),
    ("sqlite:///h/optuna.db", "tpe", [{"trials": 1, "searched": ["lr"]}] * 2 + [
        {"trials": 1, "searched": []}], "Optuna TPE, 1 trial in each of 2 cells (and 1 grid cell)"),
    ("sqlite:///h/optuna.db", "tpe", [{"trials": 4}, {"trials": 1}],
     "Optuna TPE, 4 trials in its cell (and 1 grid cell)"),
    ("sqlite:///h/optuna.db", "", [{"trials": 5}, {"trials": 5}, {"trials": 5}],
     "Optuna, 5 trials in each of 3 cells"),  # tracked before the sampler's tag
    ("sqlite:///h/optuna.db", "tpe", None, "Optuna TPE"),  # tracked before its cells
])
def test_search_names_the_sampler_and_the_trials_of_the_cells(storage, sampler, cells,
                                                              text) -> None:
    sweep = Sweep(spec="s", sweep_id="s-1", profile="cpu", spec_sha256="", git_sha="",
                  n_configs=None, parent_run_id="p", status="FINISHED", experiment_id="0",
                  start_time=0, optuna_storage=storage, optuna_sampler=sampler)
    assert search(SweepRuns(sweep, pd.DataFrame(), 0, expected_cells=cells)) == text


def test_incomplete_cells_are_listed_and_plain_values_become_cells() -> None:
    t = table()
    assert t.incomplete() == [(1, "T"), (1, "α"), (2, "T")]
    assert Table("x", "X", ["a"], [[3]], PROV).rows[0][0] == Cell(3)
    assert Table("x", "X", ["a"], [[3]], PROV).incomplete() == []


def test_markdown_pads_columns_and_right_aligns_numbers() -> None:
    assert table().to_markdown() == "\n".join([
        "### Demo", "", PROV.line(), "",
        "| Problem        |       T |     α |",
        "|:---------------|--------:|------:|",
        "| Adding         |      80 | 0.001 |",
        "| Temporal Order |     40† | 0.01† |",
        "| Permutation    | missing |     – |", "",
        "Partial sweep: 3 table entries incomplete — † drawn from an incomplete set of "
        "configurations, 'missing' = no configuration finished.",
        "- A note.", ""])


def test_markdown_escapes_pipes_and_keeps_text_unparsed() -> None:
    t = Table("x", "X", ["a|b", "v"], [["p|q", Cell(22.70, ".2f")], ["r", Cell("1e-05")]], PROV)
    lines = t.to_markdown().splitlines()
    assert lines[4:8] == ["| a\\|b   | v     |", "|:-------|:------|",
                          "| p\\|q   | 22.70 |", "| r      | 1e-05 |"]
    assert t.numeric_columns() == [False, False]
    assert table().numeric_columns() == [False, True, True]


def test_csv_keeps_values_unmarked_and_names_incomplete_columns() -> None:
    text = table().to_csv()
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert comments == ["# Demo", "# " + PROV.line(), "# A note."]
    rows = list(csv.reader(io.StringIO("\n".join(
        line for line in text.splitlines() if not line.startswith("#")))))
    assert rows == [["Problem", "T", "α", "incomplete"],
                    ["Adding", "80", "0.001", ""],
                    ["Temporal Order", "40", "0.01", "T;α"],
                    ["Permutation", "", "", "T"]]


def test_latex_escapes_and_sets_symbols_in_math_mode() -> None:
    text = table().to_latex()
    assert r"Problem & T & $\alpha$ \\" in text
    assert r"Temporal Order & 40$^{\dagger}$ & 0.01$^{\dagger}$ \\" in text
    assert r"\caption{Demo. spec synthetic-max-length $\cdot$ profile cpu" in text
    assert r"\label{tab:demo}" in text and text.count(r"\begin{tabular}{lll}") == 1
    assert latex_escape("a_b & 50% #1 {x}") == r"a\_b \& 50\% \#1 \{x\}"


@pytest.mark.parametrize(("text", "latex"), [
    ("θ bias, time ≈ +55 %", r"$\theta$ bias, time $\approx$ +55 \%"),
    ("÷ gradient", r"$\div$ gradient"),
    ("α = 10⁻⁵", r"$\alpha$ = 10$^{-5}$"),  # one superscript group, not ^{-}^{5}
    ("‖∇W‖", r"$\|\nabla$W$\|$"),
    ("α·λ", r"$\alpha \cdot \lambda$"),  # one math group: "$$" would be display math
    ("W_hhᵀ, Eᵖ, x₁", r"W\_hh$^{T}$, E$^{p}$, x$_{1}$"),
    ("T = 10–80 — §5", r"T = 10--80 --- \S{}5"),
    ("ΛΩ", r"$\Lambda \Omega$"),
    ("ΑΒΓ", r"AB$\Gamma$"),  # capitals without a command: the Latin ones they look like
    ("ε φ ϵ ϕ", r"$\varepsilon$ $\varphi$ $\epsilon$ $\phi$"),
    ("σ²₀†", r"$\sigma ^{2}_{0}{}^{\dagger}$"),  # no double superscript
])
def test_latex_sets_greek_and_maths_in_math_groups(text: str, latex: str) -> None:
    assert latex_escape(text) == latex


def test_latex_leaves_no_unicode_in_what_the_reports_write() -> None:
    """Every non-ASCII character of the report code's text (tables, notes, verdicts) comes
    out as ASCII LaTeX that pdflatex reads, but for Latin letters with accents (its default
    UTF-8 input encoding sets them)."""
    import pathlib
    import unicodedata

    root = pathlib.Path(__file__).resolve().parents[2] / "analysis"
    used = {ch for path in root.rglob("*.py") for ch in path.read_text(encoding="utf-8")
            if ord(ch) > 127}
    left = {ch for ch in used for out in [latex_escape(ch)] if not out.isascii()
            and not unicodedata.name(ch).startswith("LATIN")}
    assert left == set()


def test_render_dispatches_and_rows_must_match_columns() -> None:
    t = table()
    assert t.render("md") == t.to_markdown()
    assert t.render("latex") == t.to_latex()
    assert t.render("csv") == t.to_csv()
    with pytest.raises(ValueError, match=r"^table x: row 1 has 3 cells, expected 2$"):
        Table("x", "X", ["a", "b"], [[1, 2], [1, 2, 3]], PROV)


def test_rows_are_held_as_lists_of_cells_whatever_sequences_they_came_in() -> None:
    t = Table("x", "X", ["a", "b"], (r for r in [("p", Cell(1.5, ".1f"))]), PROV)
    assert t.rows == [[Cell("p"), Cell(1.5, ".1f")]]
