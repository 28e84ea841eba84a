"""Drawing bars to PNG or SVG with matplotlib (headless: the Agg backend, no display)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import MissingDependency, UsageError
from ._bars import Bar

_FORMATS = (".png", ".svg")
_COLOURS = {"high": "#4c72b0", "mid": "#dd8452", "low": "#55a868"}


def draw_bars(bars: Sequence[Bar], path: str | Path, title: str = "",
              ylabel: str | None = None) -> Path:
    """Write a bar chart of ``bars`` (error bars from each one's interval) to ``path``.

    The format follows the suffix, ``.png`` or ``.svg``; SVG text stays text (searchable).

    Raises:
        UsageError: another suffix, or no bars.
        MissingDependency: matplotlib is not installed.
    """
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        raise UsageError(f"cannot draw {path.name}: the format follows the suffix",
                         hint="use .png or .svg")
    if not bars:
        raise UsageError("nothing to draw")
    try:
        import matplotlib  # heavy, and an optional extra: only when a picture is asked for
    except ImportError:
        raise MissingDependency("matplotlib", "plot") from None
    matplotlib.use("Agg", force=True)
    # matplotlib: only when a figure is drawn
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vbstore",
                                "path.simplify": False}):
        figure, axes = plt.subplots(figsize=(max(4.0, 0.9 * len(bars) + 1.5), 4.0))
        try:
            values = [b.value for b in bars]
            errors = [[b.value - (b.low if b.low is not None else b.value) for b in bars],
                      [(b.high if b.high is not None else b.value) - b.value for b in bars]]
            colours = [_COLOURS.get(b.group, "#8172b3") for b in bars]
            axes.bar(range(len(bars)), values, yerr=errors, capsize=4, color=colours)
            axes.set_xticks(range(len(bars)), [b.label for b in bars], rotation=30, ha="right",
                            fontsize=8)
            axes.set_ylabel(ylabel or bars[0].metric)
            axes.set_title(title)
            for index, bar in enumerate(bars):
                axes.annotate(f"{bar.value:.3f}", (index, bar.value), ha="center", va="bottom",
                              fontsize=7, xytext=(0, 2), textcoords="offset points")
            figure.tight_layout()
            figure.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
        finally:
            plt.close(figure)
    return path
