"""The papers' claims and their verdicts in one sweep: does the published ordering or result
hold in this run?

A report module states each claim it can judge (EXPERIMENTS.md: "OINIT and OPEN beat SRNN",
"the plain ReLU MLP(20, 256) trains", ...) as a :class:`Claim` computed from the loaded runs,
never written by hand: the status follows from the numbers, and the numbers that decide it are
kept beside it (``evidence``). A claim whose inputs the sweep's profile does not measure (a
model or problem it does not run, no configuration finished) is ``not measured``, not failed.
:func:`beats` and :func:`ordered` cover the orderings most claims are; :func:`judge` the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Literal, TypeGuard

Status = Literal["holds", "does not hold", "not measured"]
HOLDS: Status = "holds"
FAILS: Status = "does not hold"
NOT_MEASURED: Status = "not measured"


@dataclass(frozen=True)
class Claim:
    """One published claim and whether this sweep bears it out."""

    source: str
    """Where the paper makes it: the EXPERIMENTS.md id (``M-T2``, ``K-F13``)."""
    text: str
    """The claim in words, with the published numbers where the paper gives them."""
    status: Status
    """``holds``, ``does not hold`` or ``not measured`` (in this profile or sweep)."""
    evidence: str
    """The measured numbers that decide it, or what is missing."""
    partial: bool = False
    """The numbers rest on an incomplete set of configurations (the status may change as
    the sweep completes)."""
    caveat: str = ""
    """Why a claim that does not hold fails under this sweep's profile (its reduction, or the
    reading of the paper the verdict rests on: :mod:`analysis.caveats`); empty unless the
    status is ``does not hold``."""

    def line(self) -> str:
        """``M-T2 · holds — claim: evidence`` (``(partial sweep)`` after a status that rests
        on incomplete cells; ``Why: caveat`` after a failure a caveat explains)."""
        partial = " (partial sweep)" if self.partial and self.status != NOT_MEASURED else ""
        why = f". Why: {self.caveat}" if self.caveat else ""
        return f"{self.source} · {self.status}{partial} — {self.text}: {self.evidence}{why}"


def judge(source: str, text: str, ok: bool | None, evidence: str,
          partial: bool = False) -> Claim:
    """A claim whose test the caller computed: ``ok`` True holds, False fails, None not
    measured."""
    status = NOT_MEASURED if ok is None else HOLDS if ok else FAILS
    return Claim(source, text, status, evidence, partial)


def _known(value: float | None) -> TypeGuard[float]:
    """Whether ``value`` is a measured number (neither None nor NaN)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def evidence(values: Mapping[str, float | None], fmt: str = ".2f", unit: str = "") -> str:
    """``name value`` for every entry, ``name not measured`` where there is none."""
    return ", ".join(f"{name} {format(v, fmt)}{unit}" if _known(v) else f"{name} not measured"
                     for name, v in values.items())


def beats(source: str, text: str, values: Mapping[str, float | None],
          winners: Sequence[str], losers: Sequence[str], higher: bool = True,
          fmt: str = ".2f", unit: str = "", partial: bool = False) -> Claim:
    """Holds when every one of ``winners`` is strictly better than every one of ``losers``
    (larger when ``higher``, else smaller); not measured when one of them has no value."""
    shown = {k: values.get(k) for k in (*winners, *losers)}
    said = evidence(shown, fmt, unit)
    known = {k: float(v) for k, v in shown.items() if _known(v)}
    if len(known) < len(shown):
        return judge(source, text, None, said, partial)
    sign = 1.0 if higher else -1.0
    ok = all(sign * (known[w] - known[lo]) > 0 for w in winners for lo in losers)
    return judge(source, text, ok, said, partial)


def ordered(source: str, text: str, values: Mapping[str, float | None],
            order: Sequence[str], fmt: str = ".2f", unit: str = "",
            partial: bool = False, rising: bool = False) -> Claim:
    """Holds when the values of ``order`` never decrease along it (``SRNN ≤ OPEN ≤ OINIT``)
    and, with ``rising``, the last is above the first: a claim that the order's end gains
    (the published values do) is not borne out by a tie of all; not measured when one of
    them has no value."""
    shown = {k: values.get(k) for k in order}
    said = evidence(shown, fmt, unit)
    numbers = [float(v) for v in shown.values() if _known(v)]
    if len(numbers) < len(shown):
        return judge(source, text, None, said, partial)
    ok = all(a <= b for a, b in pairwise(numbers)) and (numbers[-1] > numbers[0] or not rising)
    if rising and len(set(numbers)) == 1:
        said += " (a tie: no model went further)"
    return judge(source, text, ok, said, partial)


def from_verdict(source: str, text: str, verdict: str) -> Claim:
    """The claim a report's verdict note decides (``Verdict: as G — numbers``, ``Verdict:
    differs from N — numbers``, ``Verdict: none — why``), so that the note under a table and
    the verdict line come from one decision."""
    head, _, said = verdict.removeprefix("Verdict: ").partition(" — ")
    ok = True if head.startswith("as ") else False if head.startswith("differs") else None
    if ok is None and not head.startswith("none"):
        raise ValueError(f"not a verdict line: {verdict!r}")
    return judge(source, text, ok, said.rstrip(".") or head)


def explain(claims: Sequence[Claim], caveats: Mapping[tuple[str, str], str],
            otherwise: str = "") -> list[Claim]:
    """``claims`` with the caveat of each failing one whose (source, start of its text) is a
    key of ``caveats``, else ``otherwise`` (a profile's caveat for all its failures); claims
    that hold or are not measured are returned unchanged, so a caveat never hides a result:
    it is shown only beside the failure it explains."""
    def caveat(claim: Claim) -> str:
        if claim.status != FAILS:
            return ""
        return next((why for (source, text), why in caveats.items()
                     if claim.source == source and claim.text.startswith(text)), otherwise)

    return [replace(c, caveat=caveat(c)) for c in claims]


def claims_markdown(claims: Sequence[Claim]) -> str:
    """The verdict lines as a markdown section (empty when there are none)."""
    if not claims:
        return ""
    return "\n".join(["### Verdicts", "", *(f"- {c.line()}" for c in claims)]) + "\n"
