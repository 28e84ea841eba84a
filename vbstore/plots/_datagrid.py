"""A dataset before any training: each image beside its target (extra ``plot``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingDependency, UsageError
from ._grid import class_legend, show_map

# Local imports: matplotlib loads when a figure is drawn.

_FORMATS = (".png", ".svg")


def draw_data_grid(frames: Sequence[Any], path: str | Path, title: str = "",
                   class_names: Sequence[str] | None = None) -> Path:
    """Write ``frames`` (``vbstore.engine.Frame``: images, target) to ``path``, one row each:
    the image(s), then the target (a class map with its legend, a scalar map, normals as
    colours, or the boxes drawn on the image, named); a label is the row's caption.

    Raises:
        UsageError: another suffix than .png or .svg, or no frames.
        MissingDependency: matplotlib is not installed.
    """
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        raise UsageError(f"cannot draw {path.name}: the format follows the suffix",
                         hint="use .png or .svg")
    if not frames:
        raise UsageError("nothing to draw")
    try:
        import matplotlib  # heavy, and an optional extra: only when a picture is asked for
    except ImportError:
        raise MissingDependency("matplotlib", "plot") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    maps = any(f.kind in ("labels", "scalar", "rgb") for f in frames)
    columns = max(len(f.images) for f in frames) + (1 if maps else 0)
    labels = [f for f in frames if f.kind == "labels"]
    classes = max([int(f.target.max()) for f in labels] + [0]) + 1
    names = list(class_names or [])
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vbstore"}):
        figure, axes = plt.subplots(len(frames), columns,
                                    figsize=(2.5 * columns, 2.5 * len(frames) + 0.4),
                                    squeeze=False)
        try:
            for row, frame in zip(axes, frames, strict=True):
                for ax, image in zip(row, frame.images, strict=False):
                    ax.imshow(image)
                if frame.kind == "boxes":
                    _boxes(row[0], frame.target, names)
                elif frame.kind != "none":
                    show_map(row[len(frame.images)], frame.target, frame.kind, classes,
                             frame.target, frame.target)
                row[0].set_ylabel(frame.name, fontsize=7)
                if frame.caption:
                    row[0].set_title(frame.caption, fontsize=8)
                for ax in row:
                    ax.set_xticks([])
                    ax.set_yticks([])
                    if not ax.images:
                        ax.set_axis_off()
            if title:
                figure.suptitle(title, fontsize=9)
            figure.tight_layout()
            if labels:
                class_legend(figure, [f.target for f in labels], classes, names)
            figure.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
        finally:
            plt.close(figure)
    return path


def _boxes(ax: Any, rows: np.ndarray, names: Sequence[str]) -> None:
    """Each box on the image, its class named; a difficult box dashed."""
    import matplotlib
    from matplotlib.patches import Rectangle

    colours = matplotlib.colormaps["tab10"]
    for x0, y0, x1, y1, cls, difficult in rows.tolist():
        colour = colours(int(cls) % 10)
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=colour,
                               linewidth=1.5, linestyle="--" if difficult else "-"))
        label = names[int(cls)] if int(cls) < len(names) else f"class {int(cls)}"
        ax.text(x0, y0, label, color="white", fontsize=6, va="bottom",
                bbox={"facecolor": colour, "edgecolor": "none", "pad": 1})
