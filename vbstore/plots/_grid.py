"""A dense result as a picture: one row per sample — image, target, prediction (extra ``plot``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingDependency, UsageError

# Local imports: matplotlib loads when a figure is drawn.

_FORMATS = (".png", ".svg")


def draw_dense_grid(samples: Sequence[Any], path: str | Path, title: str = "",
                    class_names: Sequence[str] | None = None) -> Path:
    """Write a grid of ``samples`` (``vbstore.engine.DenseSample``: image, target,
    prediction) to ``path``, one row per sample.

    Class maps share one qualitative colour per class (ignored pixels grey), named in a legend
    under the grid (``class_names``, else ``class N``) for the classes shown; scalar maps share
    one colour scale per row, so target and prediction read against each other; normals and
    orientations are shown as colours (black: not scored).

    Raises:
        UsageError: another suffix than .png or .svg, or no samples.
        MissingDependency: matplotlib is not installed.
    """
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        raise UsageError(f"cannot draw {path.name}: the format follows the suffix",
                         hint="use .png or .svg")
    if not samples:
        raise UsageError("nothing to draw")
    try:
        import matplotlib  # heavy, and an optional extra: only when a picture is asked for
    except ImportError:
        raise MissingDependency("matplotlib", "plot") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rows = len(samples)
    classes = max(int(max(s.target.max(), s.prediction.max())) for s in samples) + 1
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vbstore"}):
        figure, axes = plt.subplots(rows, 3, figsize=(7.5, 2.5 * rows + 0.4), squeeze=False)
        try:
            for row, sample in zip(axes, samples, strict=True):
                row[0].imshow(sample.image)
                row[0].set_ylabel(sample.name, fontsize=7)
                for ax, array in ((row[1], sample.target), (row[2], sample.prediction)):
                    _show(ax, array, sample, classes)
            for ax, label in zip(axes[0], ("image", "target", "prediction"), strict=True):
                ax.set_title(label, fontsize=9)
            for ax in axes.flat:
                ax.set_xticks([])
                ax.set_yticks([])
            if title:
                figure.suptitle(title, fontsize=9)
            figure.tight_layout()
            if any(s.kind == "labels" for s in samples):
                _legend(figure, samples, classes, class_names)
            figure.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
        finally:
            plt.close(figure)
    return path


def _show(ax: Any, array: np.ndarray, sample: Any, classes: int) -> None:
    show_map(ax, array, sample.kind, classes, sample.target, sample.prediction)


def show_map(ax: Any, array: np.ndarray, kind: str, classes: int, target: np.ndarray,
             prediction: np.ndarray) -> None:
    """One map on ``ax``: RGB as is, class indices in one colour each (negative: ignored,
    grey), a scalar map on the colour scale of ``target`` and ``prediction`` together."""
    if kind == "rgb":
        ax.imshow(np.clip(array, 0.0, 1.0))
    elif kind == "labels":
        masked = np.ma.masked_less(array, 0)  # ignored pixels
        import matplotlib

        cmap = matplotlib.colormaps["tab10" if classes <= 10 else "tab20"].with_extremes(
            bad="#808080")
        ax.imshow(masked, cmap=cmap, vmin=0, vmax=(10 if classes <= 10 else 20) - 1,
                  interpolation="nearest")
    else:
        low = float(min(target.min(), prediction.min()))
        high = float(max(target.max(), prediction.max()))
        ax.imshow(array, cmap="viridis", vmin=low, vmax=max(high, low + 1e-6))


def _legend(figure: Any, samples: Sequence[Any], classes: int,
            class_names: Sequence[str] | None) -> None:
    class_legend(figure, [a for s in samples for a in (s.target, s.prediction)], classes,
                 class_names)


def class_legend(figure: Any, maps: Sequence[np.ndarray], classes: int,
                 class_names: Sequence[str] | None) -> None:
    """One swatch per class ``maps`` show, in its colour, named; grey for ignored pixels."""
    import matplotlib
    from matplotlib.patches import Patch

    cmap = matplotlib.colormaps["tab10" if classes <= 10 else "tab20"]
    span = (10 if classes <= 10 else 20) - 1
    shown = sorted({int(v) for a in maps for v in np.unique(a) if v >= 0})
    names = list(class_names or [])
    handles = [Patch(color=cmap(c / span), label=names[c] if c < len(names) else f"class {c}")
               for c in shown]
    if any((a < 0).any() for a in maps):
        handles.append(Patch(color="#808080", label="ignored"))
    figure.subplots_adjust(bottom=0.06 + 0.03 * (len(handles) // 6 + 1))
    figure.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), fontsize=7,
                  frameon=False)
