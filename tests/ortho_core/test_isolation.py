"""One member's failure never ends its pack (:mod:`ortho_core.experiments.isolation`): an
OINIT member whose pre-training does not converge fails alone while the others train as they
would alone, and an error that is not one member's still propagates."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
import torch

from ortho_core.errors import ConfigError, MemberError, PretrainError
from ortho_core.experiments.isolation import train_isolated
from ortho_core.experiments.synthetic import Config, train
from ortho_core.init import gaussian, orthogonal_pretrain, require_converged
from ortho_core.reporting import Outcome, Report, Reporter, Result

SMALL = {"hidden": 16, "val_size": 100, "eval_every": 20, "max_iters": 40, "protocol": "fixed",
         "seq_len": 10}


def collect() -> tuple[list[Report], Reporter]:
    reports: list[Report] = []
    return reports, reports.append


def test_an_oinit_member_that_cannot_pretrain_fails_alone_and_the_rest_train_as_alone():
    pack = [Config(**SMALL, variant="plain", seed=1),
            Config(**SMALL, variant="oinit", pretrain_max_steps=2, seed=2),
            Config(**SMALL, variant="oinit", seed=3)]
    reports, reporter = collect()
    results = train_isolated(train, pack, reporter)
    assert [r.outcome for r in results][1] is Outcome.FAILED
    assert results[1].summary == {} and "member 1: 2 steps" in results[1].error
    assert "pretrain_tol" in results[1].error
    assert {r.member for r in reports} == {0, 2}  # reports keep their places in the pack
    for place in (0, 2):
        alone_reports, alone = collect()
        (single,) = train([pack[place]], alone)
        assert results[place].outcome is single.outcome
        assert results[place].summary["val_loss"] == pytest.approx(single.summary["val_loss"],
                                                                   rel=1e-5)
        mine = [r.metrics["train_loss"] for r in reports if r.member == place]
        assert mine == pytest.approx([r.metrics["train_loss"] for r in alone_reports],
                                     rel=1e-5)


def test_a_lone_member_that_cannot_pretrain_ends_failed_instead_of_raising():
    (result,) = train_isolated(train, [Config(**SMALL, variant="oinit",
                                              pretrain_max_steps=2)], lambda r: None)
    assert result.outcome is Outcome.FAILED and "member 0" in result.error
    with pytest.raises(PretrainError):  # the trainer itself still raises
        train([Config(**SMALL, variant="oinit", pretrain_max_steps=2)], lambda r: None)


def test_require_converged_names_pack_indices_and_the_error_keeps_them_through_pickle():
    w = gaussian((3, 20, 20), 0.1, torch.Generator().manual_seed(4))
    result = orthogonal_pretrain(w, torch.tensor([0.1, 10.0, 0.1], dtype=torch.float64))
    with pytest.raises(PretrainError, match=r"member 7: ") as caught:
        require_converged(result, members=[5, 7, 9])
    assert caught.value.members == (7,)
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is PretrainError and again.members == (7,)
    assert str(again) == str(caught.value)
    own = orthogonal_pretrain(w[:2], 0.1, max_steps=torch.tensor([1, 1000]))
    assert own.steps[0] == 1 and own.steps[1] > 1 and own.converged.tolist() == [False, True]


@dataclass
class Toy:
    """A member of :class:`ToyTrainer`'s packs."""

    x: float
    bad: bool = False


class ToyTrainer:
    """Reports ``x`` once per member and returns it as a summary; raises ``error(message,
    bad members)`` in its set-up when a member is ``bad`` (after reporting, with ``late``)."""

    def __init__(self, error: Callable[[str, tuple[int, ...]], Exception] = (
            lambda message, bad: RuntimeError(message)), late: bool = False) -> None:
        self.error = error
        self.late = late
        self.calls: list[list[float]] = []

    def __call__(self, configs: Sequence[Toy], reporter: Reporter) -> list[Result]:
        self.calls.append([c.x for c in configs])
        bad = tuple(i for i, c in enumerate(configs) if c.bad)
        if bad and not self.late:
            raise self.error(f"set-up of x={configs[bad[0]].x}", bad)
        for i, c in enumerate(configs):
            reporter(Report(member=i, step=0, metrics={"x": c.x}))
        if bad:
            raise self.error("late", bad)
        return [Result(Outcome.SOLVED, {"x": c.x}) for c in configs]


def member_error(message: str, bad: tuple[int, ...]) -> MemberError:
    return MemberError(message, bad)


def test_a_member_error_drops_the_named_members_and_trains_the_rest_as_one_pack():
    trainer = ToyTrainer(member_error)
    results = train_isolated(trainer, [Toy(0.0, bad=True), Toy(1.0), Toy(2.0, bad=True)],
                             lambda r: None)
    assert [r.outcome for r in results] == [Outcome.FAILED, Outcome.SOLVED, Outcome.FAILED]
    assert results[0].error == "set-up of x=0.0" and results[1].summary == {"x": 1.0}
    assert trainer.calls == [[0, 1, 2], [1]]


@pytest.mark.parametrize(("trainer", "raised"), [
    (ToyTrainer(), RuntimeError),  # names no member: the pack's error
    (ToyTrainer(member_error, late=True), MemberError),  # after reports
    (ToyTrainer(lambda m, bad: ConfigError("x", m)), ConfigError),
    (ToyTrainer(lambda m, bad: MemberError(m, (5,))), MemberError),  # no such member
])
def test_errors_that_are_not_one_members_propagate_after_one_attempt(trainer, raised):
    with pytest.raises(raised) as err:
        train_isolated(trainer, [Toy(0.0), Toy(1.0, bad=True)], lambda r: None)
    assert type(err.value) is raised
    assert len(trainer.calls) == 1


def test_interrupts_are_never_caught():
    def interrupted(configs, reporter):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_isolated(interrupted, [Toy(0.0), Toy(1.0)], lambda r: None)
