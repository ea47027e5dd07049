"""A figure of a report: the data it plots, kept beside the drawing so that tests (and
readers) can compare every plotted series with the runs it came from.

Drawing uses matplotlib's object API on an Agg canvas (no display, no pyplot state).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

NO_DATA = "No run of this sweep holds its data."
"""What a figure with nothing to plot says when it says nothing else."""


def epoch_axis(ax: Axes) -> None:
    """Label the x axis ``epoch`` with whole-epoch ticks, once its curves are drawn: a range
    under two epochs (one epoch drawn alone, which matplotlib ticks at 0.96 … 1.04) widens to
    the epochs either side of its middle."""
    ax.set_xlabel("epoch")
    low, high = ax.get_xlim()
    if high - low < 2:
        middle = round((low + high) / 2)
        ax.set_xlim(middle - 1, middle + 1)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))


def plain_narrow_log_ticks(ax: Axes) -> None:
    """Give a log axis that spans less than a decade a few ticks labelled as plain numbers.

    matplotlib labels such an axis at its minor ticks in scientific notation to as many
    digits as it takes to tell them apart (``6.1537 × 10¹``, ``6.1536 × 10¹`` on a flat NLL
    curve) or at two ticks only (``10⁰``, ``2 × 10⁰``); over less than a decade a log axis is
    nearly linear, so evenly spaced ticks read as plain numbers (``61.5366``) say more."""
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        low, high = sorted((low, high))
        if axis.get_scale() != "log" or low <= 0 or high >= 10 * low:
            continue
        axis.set_major_locator(ticker.MaxNLocator(5))
        axis.set_major_formatter(ticker.ScalarFormatter(useOffset=False))
        axis.set_minor_locator(ticker.NullLocator())


@dataclass
class Figure:
    """A named figure: its data (long form) and how to draw it."""

    name: str
    """File stem of the PNG (``fig2-spectral-radius``)."""
    title: str
    """Suptitle; says spec, profile, sweep and anything partial."""
    data: pd.DataFrame
    """Everything plotted, one row per point (columns depend on the figure)."""
    draw: Callable[[pd.DataFrame, MplFigure], None]
    """Fills a matplotlib figure from ``data``."""
    size: tuple[float, float] = (10.0, 4.0)
    """Width and height in inches."""
    notes: Sequence[str] = field(default_factory=list)
    """Sentences a report prints with the figure (choices made, what is missing)."""

    @property
    def empty(self) -> bool:
        """Whether there is nothing to plot: a report then shows the title and
        :attr:`shown_notes` alone instead of blank axes."""
        return self.data.empty

    @property
    def shown_notes(self) -> list[str]:
        """The notes; for a figure with nothing to plot and no note of its own, that no run
        holds its data."""
        return list(self.notes) or ([NO_DATA] if self.empty else [])

    def render(self) -> MplFigure:
        """The drawn matplotlib figure."""
        fig = MplFigure(figsize=self.size, layout="constrained")
        FigureCanvasAgg(fig)
        self.draw(self.data, fig)
        for ax in fig.axes:
            plain_narrow_log_ticks(ax)
        fig.suptitle(self.title, fontsize=9)
        return fig

    def save(self, directory: str | Path) -> Path:
        """Write ``<directory>/<name>.png`` (150 dpi) and return its path."""
        path = Path(directory) / f"{self.name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.render().savefig(path, dpi=150)
        return path
