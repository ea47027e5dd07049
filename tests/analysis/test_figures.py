""":class:`analysis.figures.Figure`: a log axis over less than a decade is labelled with plain
numbers at a few evenly spaced ticks; one over decades keeps matplotlib's powers of ten; an
epoch axis ticks whole epochs."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from matplotlib.figure import Figure as MplFigure

from analysis.figures import Figure, epoch_axis


def _labels(low: float, high: float) -> tuple[list[str], list[str]]:
    """The major and minor y tick labels of a figure plotting ``low`` … ``high`` on a log
    scale."""
    data = pd.DataFrame({"x": [0.0, 1.0, 2.0], "y": [low, (low + high) / 2, high]})

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        ax.plot(data["x"], data["y"])
        ax.set_yscale("log")

    fig = Figure(name="f", title="t", data=data, draw=draw).render()
    fig.canvas.draw()
    ax = fig.axes[0]
    low_shown, high_shown = ax.get_ylim()

    def shown(minor: bool) -> list[str]:
        ticks = zip(ax.get_yticks(minor=minor), ax.get_yticklabels(minor=minor), strict=True)
        return [label.get_text() for tick, label in ticks
                if low_shown <= tick <= high_shown and label.get_text()]

    return shown(False), shown(True)


@pytest.mark.parametrize(("low", "high"), [(61.5362, 61.5371), (0.83, 2.4), (0.12, 0.19)])
def test_a_narrow_log_axis_reads_as_plain_numbers(low: float, high: float) -> None:
    major, minor = _labels(low, high)
    assert len(major) >= 3 and minor == []
    assert all(re.fullmatch(r"\d+(\.\d+)?", label) for label in major), major
    assert len(set(major)) == len(major)
    assert all(low * 0.9 <= float(label) <= high * 1.1 for label in major)


def test_a_log_axis_over_decades_keeps_powers_of_ten() -> None:
    major, _minor = _labels(1e-3, 1e2)
    assert major and all("10^" in label for label in major), major


def test_an_epoch_axis_ticks_whole_epochs_even_for_one_epoch() -> None:
    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        ax.plot(data["x"], data["y"], marker=".")
        epoch_axis(ax)

    fig = Figure(name="f", title="t", data=pd.DataFrame({"x": [1.0], "y": [0.5]}),
                 draw=draw).render()
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert ax.get_xlabel() == "epoch" and ticks and all(t == int(t) for t in ticks), ticks
