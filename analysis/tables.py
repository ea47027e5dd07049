"""A small table type for reports: published numbers beside reproduced ones, rendered as
aligned markdown (the terminal, through pandas' ``to_markdown``), LaTeX (a paper) or CSV (a
spreadsheet).

Every table carries its :class:`Provenance` (spec, profile, sweep id, how many runs and
configurations it drew on) and marks each cell that rests on an incomplete set of
configurations, so that a partial sweep reads as partial and is never padded:

- a value drawn from some but not all of the configurations it should summarise is
  marked ``†`` (in CSV: listed in the row's ``incomplete`` column);
- a cell with no finished configuration at all reads ``missing``;
- a cell that does not apply (λ of a model without a penalty) reads ``–``;
- a measured cell of a published row that the sweep's profile does not run reads ``not in
  profile`` (the published table is shown whole, never cut to what the profile runs).
"""

from __future__ import annotations

import csv
import io
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Format = Literal["md", "latex", "csv"]
FORMATS: tuple[Format, ...] = ("md", "latex", "csv")
SUFFIX: dict[str, str] = {"md": ".md", "latex": ".tex", "csv": ".csv"}

MARK = "†"
MISSING = "missing"
NOT_APPLICABLE = "–"
NOT_IN_PROFILE = "not in profile"

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}
_LATEX_TEXT = {"–": "--", "—": "---", "…": r"\ldots{}", "§": r"\S{}", "−": "-"}
"""Characters set as text (the minus sign of a number as a hyphen, as the ASCII one)."""
_LATEX_MATH = {"∇": r"\nabla", "·": r"\cdot", "‖": r"\|", "≤": r"\le", "≥": r"\ge",
               "±": r"\pm", "→": r"\to", "×": r"\times", "÷": r"\div", "≈": r"\approx",
               "∈": r"\in", "≫": r"\gg", "≪": r"\ll", "∂": r"\partial", "≠": r"\neq",
               "∞": r"\infty"}
"""Symbols set in math mode; Greek letters are added from their Unicode names below."""
_LATEX_SUPERSCRIPT = {**{chr(0x2070 + d): str(d) for d in (0, 4, 5, 6, 7, 8, 9)},
                      "¹": "1", "²": "2", "³": "3", "⁻": "-", "⁺": "+", "ᵖ": "p", "ᵀ": "T",
                      MARK: r"\dagger"}
_LATEX_SUBSCRIPT = {**{chr(0x2080 + d): str(d) for d in range(10)}, "ₚ": "p"}
_GREEK_CAPITALS = {"Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi",
                   "Psi", "Omega"}
"""Capital Greek letters LaTeX has a command for; the others are set as the Latin capitals
they look like (:data:`_GREEK_AS_LATIN`)."""
_GREEK_AS_LATIN = dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΧ", "ABEZHIKMNOPTX", strict=True))
_GREEK_VARIANTS = {"ε": r"\varepsilon", "ϵ": r"\epsilon", "φ": r"\varphi", "ϕ": r"\phi",
                   "ϑ": r"\vartheta", "ϱ": r"\varrho", "ϖ": r"\varpi", "ς": r"\varsigma",
                   "ο": "o"}
"""Greek letters whose LaTeX command is not their Unicode name (LaTeX's ``\\epsilon`` is
the lunate ϵ, its ``\\varepsilon`` the letter ε)."""


def _greek(ch: str) -> str | None:
    """The LaTeX math of a Greek letter (``λ`` -> ``\\lambda``), else None."""
    import unicodedata

    if ch in _GREEK_VARIANTS:
        return _GREEK_VARIANTS[ch]
    words = unicodedata.name(ch, "").split()
    if len(words) != 4 or words[0] != "GREEK" or words[2] != "LETTER":
        return None
    name = words[3].lower().replace("lamda", "lambda")
    if words[1] == "SMALL":
        return "\\" + name
    capital = name.capitalize()
    return "\\" + capital if capital in _GREEK_CAPITALS else None


@dataclass(frozen=True)
class Cell:
    """One entry of a table."""

    value: object = None
    """A number or text; ``None`` (or NaN) when there is nothing to show."""
    fmt: str = ""
    """Format spec applied to a number (``"d"``, ``".2f"``, ``"g"``); text is shown as is."""
    partial: bool = False
    """The entry rests on an incomplete set of configurations (some missing, running or
    failed); with ``value=None`` it means no configuration finished at all."""
    outside: bool = False
    """The profile defines no configuration for the entry (a published row the sweep does not
    run); with ``value=None`` it reads ``not in profile``."""

    def __post_init__(self) -> None:
        if isinstance(self.value, float) and math.isnan(self.value):
            object.__setattr__(self, "value", None)

    def text(self) -> str:
        """The entry without its mark: formatted value, ``missing``, ``not in profile`` or
        ``–``."""
        value = self.value
        if value is None:
            if self.partial:
                return MISSING
            return NOT_IN_PROFILE if self.outside else NOT_APPLICABLE
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and self.fmt:
            if self.fmt.endswith("d") and not isinstance(value, numbers.Integral):
                value = int(float(value))  # a Real need not define __int__; an integer stays
            return format(value, self.fmt)
        return str(value)

    def marked(self) -> str:
        """The entry with ``†`` appended when it is a partial value."""
        return self.text() + (MARK if self.partial and self.value is not None else "")


OUTSIDE = Cell(outside=True)
"""The measured entry of a published row that the sweep's profile does not run."""


def as_cell(entry: Cell | object) -> Cell:
    """``entry`` itself if it is a :class:`Cell`, else a complete cell holding it."""
    return entry if isinstance(entry, Cell) else Cell(entry)


@dataclass(frozen=True)
class Provenance:
    """Where a table's numbers come from."""

    spec: str
    """Spec name (= MLflow experiment)."""
    profile: str
    """Spec profile the sweep ran (``smoke``, ``cpu``, ``paper``)."""
    sweep_id: str
    """The sweep (tag ``ortho.sweep_id`` of its parent run)."""
    n_runs: int
    """MLflow child runs read, superseded repeats of a trial key included."""
    n_configurations: int
    """Distinct configurations (trial keys) among them."""
    outcomes: Mapping[str, int] = field(default_factory=dict)
    """Configurations per outcome (``solved``, ``unsolved``, ``diverged``, ``failed``,
    ``incomplete``)."""
    n_expected: int | None = None
    """Configurations the resolved spec defines, when known."""
    repeats: int = 0
    """Optuna points proposed again and told rather than trained: trials of
    :attr:`n_expected` without a configuration of their own."""
    search: str = ""
    """How Optuna chose the configurations (``Optuna TPE, 6 trials in each of 2 cells``);
    empty for a grid sweep, whose configurations are the spec's."""
    git_sha: str = ""
    """The commit the sweep ran (tag ``ortho.git_sha``); empty or ``unknown`` when not
    known. The sweep id already gives its UTC date and time."""
    git_dirty: bool = False
    """The checkout had uncommitted changes (tag ``ortho.git_dirty``)."""

    def line(self) -> str:
        """One line: ``spec S · profile P · sweep ID · N runs → C configurations (...)``, then
        ``· Optuna …`` for a sweep that searched with Optuna and ``· git SHA`` (12 digits)
        when the commit is known (``with uncommitted changes`` when the checkout had
        some)."""
        counts = ", ".join([f"{n} {k}" for k, n in self.outcomes.items() if n] + (
            [f"{self.repeats} repeated point{'' if self.repeats == 1 else 's'} not trained"]
            if self.repeats else []))
        of = "" if self.n_expected is None else f" of {self.n_expected} expected"
        runs = "1 run" if self.n_runs == 1 else f"{self.n_runs} runs"
        configurations = ("1 configuration" if self.n_configurations == 1
                          else f"{self.n_configurations} configurations")
        return (f"spec {self.spec} · profile {self.profile} · sweep {self.sweep_id} · "
                f"{runs} → {configurations}{of}"
                + (f" ({counts})" if counts else "")
                + (f" · {self.search}" if self.search else "")
                + (f" · git {self.git_sha[:12]}" if self.git_sha not in ("", "unknown")
                   else "")
                + (" with uncommitted changes" if self.git_dirty else ""))


@dataclass(init=False)
class Table:
    """A titled grid of cells with its provenance and notes."""

    name: str
    """File stem when written (``max-length``)."""
    title: str
    """Caption."""
    columns: Sequence[str]
    """Column headers."""
    rows: list[list[Cell]]
    """Entries, one list per row, one cell per column."""
    provenance: Provenance
    """Spec, profile, sweep and run counts behind the numbers."""
    notes: Sequence[str]
    """Sentences printed under the table (choice rules, thresholds, published sources)."""

    def __init__(self, name: str, title: str, columns: Sequence[str],
                 rows: Iterable[Sequence[Cell | object]], provenance: Provenance,
                 notes: Sequence[str] = ()) -> None:
        """A table of ``rows``, each entry a :class:`Cell` or a plain value (which becomes a
        complete cell), so that reports write numbers and text as they are. A row with other
        than one entry per column raises ValueError naming the table and the row, so that a
        report's mistake fails where it builds the table rather than misaligned in print."""
        self.name, self.title, self.columns = name, title, columns
        self.provenance, self.notes = provenance, notes
        self.rows = [[as_cell(e) for e in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(columns):
                raise ValueError(f"table {name}: row {i} has {len(row)} cells, "
                                 f"expected {len(columns)}")

    def incomplete(self) -> list[tuple[int, str]]:
        """(row index, column) of every partial or missing cell."""
        return [(i, col) for i, row in enumerate(self.rows)
                for col, c in zip(self.columns, row, strict=True) if c.partial]

    def legend(self) -> str:
        """The sentence under the table: complete, or how many cells are partial; and what
        `not in profile` means where a cell says it."""
        n = len(self.incomplete())
        outside = any(c.outside for row in self.rows for c in row)
        tail = (f" '{NOT_IN_PROFILE}': published, but profile {self.provenance.profile} runs "
                "no configuration of it." if outside else "")
        if not n:
            return "All cells complete." + tail
        entries = "1 table entry" if n == 1 else f"{n} table entries"
        return (f"Partial sweep: {entries} incomplete — {MARK} drawn from an incomplete "
                f"set of configurations, '{MISSING}' = no configuration finished." + tail)

    def render(self, fmt: Format) -> str:
        """The table as ``md``, ``latex`` or ``csv`` text."""
        return {"md": self.to_markdown, "latex": self.to_latex, "csv": self.to_csv}[fmt]()

    def numeric_columns(self) -> list[bool]:
        """Per column, whether every entry that has a value holds a number (right-aligned in
        markdown, so that digits line up); text columns are left-aligned."""
        def number(c: Cell) -> bool:
            return isinstance(c.value, numbers.Real) and not isinstance(c.value, bool)

        return [any(number(row[j]) for row in self.rows)
                and all(number(row[j]) or row[j].value is None for row in self.rows)
                for j in range(len(self.columns))]

    def to_markdown(self) -> str:
        """A markdown section for the terminal and GitHub: title, provenance, the table with
        its columns padded to one width (pandas' ``to_markdown``, tabulate's ``pipe``
        format; numeric columns right-aligned), legend, notes."""
        import pandas as pd  # here, so that the CLI reads FORMATS without loading pandas

        def escape(text: str) -> str:
            return text.replace("|", "\\|")

        grid = pd.DataFrame([[escape(c.marked()) for c in row] for row in self.rows],
                            columns=[escape(c) for c in self.columns], dtype=object)
        align = ["right" if n else "left" for n in self.numeric_columns()]
        body = grid.to_markdown(index=False, tablefmt="pipe", disable_numparse=True,
                                colalign=align)
        out = [f"### {self.title}", "", self.provenance.line(), "", body]
        out += ["", self.legend(), *(f"- {n}" for n in self.notes)]
        return "\n".join(out) + "\n"

    def to_latex(self) -> str:
        """A ``table`` environment (booktabs rules) with the provenance in the caption."""
        rows = [" & ".join(latex_escape(c.marked()) for c in row) + r" \\" for row in self.rows]
        caption = f"{self.title}. {self.provenance.line()}. {self.legend()}"
        out = [r"\begin{table}[ht]", r"\centering",
               r"\begin{tabular}{" + "l" * len(self.columns) + "}", r"\toprule",
               " & ".join(latex_escape(c) for c in self.columns) + r" \\", r"\midrule",
               *rows, r"\bottomrule", r"\end{tabular}",
               r"\caption{" + latex_escape(caption) + "}",
               r"\label{tab:" + self.name + "}", r"\end{table}"]
        out += ["% " + n for n in self.notes]
        return "\n".join(out) + "\n"

    def to_csv(self) -> str:
        """CSV with ``#`` comment lines (title, provenance, notes), unmarked values, and a last
        column ``incomplete`` naming the row's partial or missing columns."""
        buf = io.StringIO()
        buf.write(f"# {self.title}\n# {self.provenance.line()}\n")
        for note in self.notes:
            buf.write(f"# {note}\n")
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([*self.columns, "incomplete"])
        for row in self.rows:
            flags = ";".join(col for col, c in zip(self.columns, row, strict=True) if c.partial)
            writer.writerow([*(c.text() if c.value is not None else "" for c in row), flags])
        return buf.getvalue()


def latex_escape(text: str) -> str:
    """``text`` with LaTeX special characters escaped and the papers' symbols in math mode:
    Greek letters and mathematical signs, superscripts and subscripts (``10⁻⁵`` ->
    ``10$^{-5}$``, ``40†`` -> ``40$^{\\dagger}$``), adjacent ones in one math group (two would
    meet as ``$$``, TeX's display math)."""
    out: list[str] = []
    math: list[str] = []
    script, scripted = "", ""

    scripts: set[str] = set()  # the kinds of script the current nucleus already has

    def close_script() -> None:
        nonlocal script, scripted
        if scripted:
            if script in scripts:  # a second superscript of one nucleus: start an empty one
                math.append("{}")
                scripts.clear()
            math.append(f"{script}{{{scripted}}}")
            scripts.add(script)
        script, scripted = "", ""

    def close_math() -> None:
        close_script()
        if math:
            out.append("$" + "".join(math).rstrip() + "$")
            math.clear()

    for ch in text:
        for kind, table in (("^", _LATEX_SUPERSCRIPT), ("_", _LATEX_SUBSCRIPT)):
            if ch in table:
                if script != kind:
                    close_script()
                script, scripted = kind, scripted + table[ch]
                break
        else:
            command = _LATEX_MATH.get(ch) or (_greek(ch) if ord(ch) > 127 else None)
            if command is not None:
                close_script()
                scripts.clear()
                math.append(command + (" " if command[-1].isalpha() else ""))
                continue
            close_math()
            scripts.clear()
            out.append(_LATEX_SPECIAL.get(ch) or _LATEX_TEXT.get(ch) or _GREEK_AS_LATIN.get(ch)
                       or ch)
    close_math()
    return "".join(out)
