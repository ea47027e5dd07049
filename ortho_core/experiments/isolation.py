"""One member's failure never ends its pack (DESIGN.md "Packs").

:func:`train_isolated` calls a trainer on a pack the way ``sweeps`` and ``ortho train`` do,
and contains the failure of a member to that member. A trainer says whose failure it is by
raising a :class:`~ortho_core.errors.MemberError` naming the members (their indices in the
pack it was given) in its set-up, before its first report: an OINIT member whose orthogonal
pre-training does not converge raises a :class:`~ortho_core.errors.PretrainError` naming it
(:func:`ortho_core.init.require_converged`, used by every OINIT trainer). Those members end
``failed`` with the error's message, and the others are trained again, as one pack, without
them. A configuration gives the numbers it gives in the whole pack (DESIGN.md: to
floating-point tolerance), so isolating a member changes no other's result; what is done
twice is the set-up of the pack, never anything it reported. A member whose loss or weights
become NaN or infinite during training is the trainers' own business: it stops and ends
``diverged`` while the pack goes on.

What is not isolated, and propagates as before (``sweeps`` then fails the pack's runs, Ray
Tune retries the trial up to ``max_failures`` and ``ortho sweep resume`` retries it later):
any other exception, which does not say whose it is (a pack retried whole, or a resume,
tells a passing fault from a lasting one; halving the pack in search of the member would
retry every member inside the trial), and a ``MemberError`` raised after the pack has
reported, whose members would report a second time. Interrupts always propagate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ortho_core.errors import MemberError
from ortho_core.reporting import Outcome, Report, Reporter, Result, Trainer

__all__ = ["train_isolated"]


class _Relay:
    """The reporter of a sub-pack: renumbers its members to their places in the whole pack
    and remembers whether anything was reported."""

    def __init__(self, reporter: Reporter, places: Sequence[int]) -> None:
        self.reporter = reporter
        self.places = list(places)
        self.reported = False

    def __call__(self, report: Report) -> None:
        self.reported = True
        self.reporter(dataclasses.replace(report, member=self.places[report.member]))


def _failed(error: str) -> Result:
    """The Result of a member that could not train: outcome ``failed`` and ``error``."""
    return Result(outcome=Outcome.FAILED, error=error)


def train_isolated(train: Trainer, configs: Sequence[Any], reporter: Reporter) -> list[Result]:
    """``train(configs, reporter)``, with each member's failure contained to that member
    (see the module docstring); one Result per config, in order, ``failed`` ones carrying
    their ``error``. Raises what the module docstring says is not isolated."""
    results: list[Result | None] = [None] * len(configs)
    places = list(range(len(configs)))
    while places:
        relay = _Relay(reporter, places)
        try:
            trained = train([configs[i] for i in places], relay)
        except MemberError as error:
            named = {m for m in error.members if 0 <= m < len(places)}
            if not named or relay.reported:
                raise
            for m in named:
                results[places[m]] = _failed(str(error))
            places = [p for m, p in enumerate(places) if m not in named]
            continue
        for place, result in zip(places, trained, strict=True):
            results[place] = result
        places = []
    return [r for r in results if r is not None]
