"""What the view probes score, and how their thresholds are named (a leaf: ``correspondence``
declares the tasks, ``._matching`` scores them, and neither imports the other).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import UsageError, field_ref

if TYPE_CHECKING:
    import numpy as np
    import torch

THRESHOLDS = (1, 2, 5, 10)  # the pixel defaults
# VisBench's units: a metric name's suffix, and the thresholds used when none are given
UNITS = {"pixel": "px", "patch": "p"}
DEFAULT_THRESHOLDS: dict[str, tuple[float, ...]] = {"pixel": THRESHOLDS, "patch": (0.5, 1, 2, 4)}
Geometry = Callable[[int, int], "tuple[tuple[int, int], tuple[int, int, int, int] | None]"]


class FeatureRows(Protocol):
    """Dense feature maps by row: a ``PackSplit`` or a ``TensorSplit``."""

    grid_hw: tuple[int, int]

    def __len__(self) -> int: ...

    def feats(self, positions: list[int]) -> list[torch.Tensor]: ...


@dataclass(frozen=True)
class WarpPairs:
    """What ``correspondence`` scores: each image's features, its view's, and the exact warp.

    Attributes:
        a: Dense features of the images (view A), in manifest order.
        b: Dense features of their warped views (view B), row i warping row i.
        homographies: (N, 3, 3): original pixel coordinates of A -> those of B.
        sizes: (N, 2): each image's (width, height); a view has its image's size.
        geometry: The backbone's resize and crop, ``(w, h) -> ((new_w, new_h), box or None)``.
        input_size: The side of the backbone's square input.
    """

    a: FeatureRows
    b: FeatureRows
    homographies: np.ndarray
    sizes: np.ndarray
    geometry: Geometry
    input_size: int


def parse_thresholds(value: Any) -> str:
    """A ``thresholds`` value (``"1,2,5"``, ``"1 2 5"``, a number or a list of numbers) in its
    canonical form: ascending, each written ``%g`` (as its metric name writes it), comma
    separated; ``""`` (the unit's defaults) stays ``""``.

    Raises:
        UsageError: none given (an empty list), a threshold that is not a finite number > 0,
            one whose ``%g`` form is not its value (two would share a name), or one given
            twice.
    """
    if isinstance(value, str):
        parts: list[Any] = value.replace(",", " ").split()
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        parts = [value]
    if value == "":
        return ""
    if not parts:
        raise UsageError(f"correspondence thresholds {value!r} name no threshold",
                         hint="give at least one, e.g. "
                              f"{field_ref('param:thresholds', '1,2,5,10')}, or leave them out")
    out: list[float] = []
    for part in parts:
        try:
            number = float(part) if not isinstance(part, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            raise UsageError(f"correspondence threshold {part!r} is not a number > 0",
                             hint="give thresholds as numbers > 0, e.g. "
                                  f"{field_ref('param:thresholds', '1,2,5,10')}")
        if float(f"{number:g}") != number:
            raise UsageError(f"correspondence threshold {part!r} has more digits than its metric "
                             f"name keeps ({number:g})",
                             hint="give each threshold in at most 6 significant digits")
        if number in out:
            raise UsageError(f"correspondence threshold {number:g} is given twice",
                             hint="give each threshold once")
        out.append(number)
    return ",".join(f"{t:g}" for t in sorted(out))


def thresholds_of(params: Mapping[str, Any]) -> tuple[tuple[float, ...], str]:
    """``(thresholds, unit suffix)`` of resolved params or a record's (where ``units`` and
    ``thresholds`` at their defaults are absent)."""
    units = str(params.get("units", "pixel"))
    given = str(params.get("thresholds", ""))
    if not given:
        return tuple(float(t) for t in DEFAULT_THRESHOLDS[units]), UNITS[units]
    return tuple(float(t) for t in given.split(",")), UNITS[units]


def name_of(threshold: float, unit: str) -> str:
    """A threshold's metric-name suffix, as VisBench writes it: ``5px``, ``0.5p``."""
    return f"{threshold:g}{unit}"


@dataclass(frozen=True)
class KeypointPairs:
    """What ``keypoint_correspondence`` scores: dense features and annotated keypoint pairs.

    Attributes:
        feats: Dense features of the manifest's images, in manifest order.
        pairs: ``[src, trg, src_kps, trg_kps, trg_bndbox]`` per pair: row indices into
            ``feats``, matching lists of ``[x, y]`` pixels, the target's ``[x1, y1, x2, y2]``.
        sizes: (N, 2): each image's (width, height).
        geometry: The backbone's resize and crop, as for :class:`WarpPairs`.
        input_size: The side of the backbone's square input.
    """

    feats: FeatureRows
    pairs: list
    sizes: np.ndarray
    geometry: Geometry
    input_size: int
