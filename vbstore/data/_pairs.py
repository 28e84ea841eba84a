"""Reading image pairs with their relative pose, and flat folders of unlabelled images.

**Pairs** (``layout pairs``): ``root/pairs.csv`` (or ``root/<split>/pairs.csv``) has one row per
pair, columns by name: ``image_a`` and ``image_b`` (image paths relative to the table's folder),
the relative rotation as a unit quaternion ``qw, qx, qy, qz`` (scalar first) and the relative
translation ``tx, ty, tz``, and optionally ``id``. The pose takes a point from camera A's frame
to camera B's: ``X_b = R X_a + t``. The manifest's samples are the distinct images of the pairs;
its ``pairs`` field lists ``[a, b, qw, qx, qy, qz, tx, ty, tz]`` with sample indices, and
``--limit N`` keeps N pairs.

**Images** (``layout images``): ``root/<image>`` (or ``root/<split>/<image>``), a flat folder of
unlabelled images, for zero-shot probes that need no annotation (``correspondence``).
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import BadInput, UsageError, field_ref
from ._files import (
    Within,
    check_unique_ids,
    loose_images,
    read_table,
    relative_image,
    subdirs,
)
from ._scan import Entry, Scan

PAIRS_FILE = "pairs.csv"
POSE = ("qw", "qx", "qy", "qz", "tx", "ty", "tz")
REQUIRED = ("image_a", "image_b", *POSE)


def pairs_csv(root: Path, split: str | None) -> Path | None:
    """The pair table ``root`` (with ``split``) stands for, else None."""
    base = root / split if split is not None and root.is_dir() else root
    path = base / PAIRS_FILE if base.is_dir() else base
    if path.name != PAIRS_FILE or not path.is_file():
        return None
    return path


def _pose(row: dict[str, str]) -> tuple[float, ...]:
    values = []
    for column in POSE:
        text = (row.get(column) or "").strip()
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{column} {text!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"{column} {text!r} is not finite")
        values.append(value)
    norm = math.sqrt(sum(v * v for v in values[:4]))
    if abs(norm - 1.0) > 1e-3:
        raise ValueError(f"the quaternion (qw, qx, qy, qz) has norm {norm:.4g}, not 1")
    return tuple(values)


def scan_pairs(root: Path, split: str | None) -> Scan:
    """Read a pair table; the scan's ``pairs`` hold image names and poses.

    Raises:
        UsageError: no pair table where ``root`` and ``split`` point.
        BadInput: an empty or unreadable table, missing columns, a bad cell, a pair with one
            view or a view that does not exist (each with ``file:line``), repeated ids.
    """
    path = pairs_csv(root, split)
    if path is None:
        where = root / split if split is not None else root
        raise UsageError(f"no pose table {where / PAIRS_FILE}",
                         hint=f"the pairs layout reads {PAIRS_FILE} with columns "
                              f"{', '.join(REQUIRED)}")
    base = path.parent
    reader = read_table(path, "pose", REQUIRED, "id")
    within = Within(base)
    rows: list[tuple[str, str, str, tuple[float, ...]]] = []
    problems: list[tuple[str, str]] = []
    for number, row in enumerate(reader, 2):
        at = f"{path}:{number}"
        try:
            names = [relative_image(row.get(c), c, ": a pair needs two views")
                     for c in ("image_a", "image_b")]
            for name in names:
                within(name)
            pose = _pose(row)
        except ValueError as exc:
            problems.append((at, str(exc)))
            continue
        if names[0] == names[1]:
            problems.append((at, f"image_a and image_b are both {names[0]}: a pair needs "
                                    "two views"))
            continue
        absent = [n for n in names if not (base / n).is_file()]
        if absent:
            problems.append((at, f"{absent[0]} does not exist"))
            continue
        key = (row.get("id") or "").strip() or f"row{number}"
        rows.append((key, names[0], names[1], pose))
    if problems:
        raise BadInput("bad pair rows", problems,
                       hint="every row names two existing images and a relative pose")
    if not rows:
        raise BadInput("empty pose tables", [(str(path), "no rows")])
    check_unique_ids(rows, path, "pose tables")
    images = sorted({name for r in rows for name in r[1:3]})
    return Scan("pairs", base, split, [], "pairs", [Entry(name=n, key=n) for n in images],
                limit_by="pair", pairs=rows)


def scan_images(root: Path, split: str | None) -> Scan:
    """``root/<image>`` (or ``root/<split>/<image>``): unlabelled images, no subfolders read.

    Raises:
        UsageError: ``split`` names no folder.
        BadInput: a folder without images.
    """
    base = root / split if split is not None else root
    if not base.is_dir():
        found = subdirs(root) if root.is_dir() else []
        raise UsageError(f"no split {split!r} in {root}",
                         hint=f"splits found: {', '.join(found)}" if found
                         else f"omit {field_ref('split')}")
    names = loose_images(base)
    if not names:
        raise BadInput("image folders without images", [(str(base), "no image files in it")],
                       hint="the images layout is a flat folder of image files")
    return Scan("images", base, split, [], "none", [Entry(name=n, key=n) for n in names])
