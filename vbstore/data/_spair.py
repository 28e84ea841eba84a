"""Reading annotated keypoint pairs in the SPair-71k layout into a :class:`Scan`.

``root/PairAnnotation/<split>/*.json`` holds one pair per file (``split``: ``trn``, ``val`` or
``test``), with ``src_imname``, ``trg_imname``, ``category``, ``src_kps`` and ``trg_kps`` (lists
of ``[x, y]`` in pixels, one per shared keypoint, in the same order) and ``trg_bndbox``
(``[x1, y1, x2, y2]``); the images are ``root/JPEGImages/<category>/<imname>``. The manifest's
samples are the distinct images; its ``keypoint_pairs`` field lists
``[src, trg, src_kps, trg_kps, trg_bndbox]`` with sample indices, and ``--limit N`` keeps N
pairs. Other fields of the files are not read.

Every annotation is checked against its images (their headers, no pixel decoded): keypoints
and the box lie inside the image they annotate, so a box of ``[-5, -5, 1e300, 1e300]`` (which
would make every transfer "correct") is refused. Names stay inside the tree: no ``..``, no
link out of it. A file over :data:`MAX_PAIR_BYTES` or nested too deeply is refused by name.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..errors import BadInput, UsageError, field_ref
from ._files import Within, subdirs
from ._scan import Entry, Scan

PAIRS_DIR, IMAGES_DIR = "PairAnnotation", "JPEGImages"
MAX_PAIR_BYTES = 1 << 20  # SPair-71k's own files are a few KiB


def is_spair(root: Path) -> bool:
    """Whether ``root`` is laid out as SPair-71k."""
    return (root / PAIRS_DIR).is_dir() and (root / IMAGES_DIR).is_dir()


def _points(value: Any, what: str) -> list[list[float]]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{what} is not a non-empty list of [x, y]")
    out = []
    for point in value:
        if (not isinstance(point, list) or len(point) != 2
                or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in point)):
            raise ValueError(f"{what} holds {point!r}, not [x, y]")
        out.append([float(point[0]), float(point[1])])
    return out


def _inside_image(points: list[list[float]], size: tuple[int, int], what: str) -> None:
    width, height = size
    for x, y in points:
        if not (0 <= x <= width and 0 <= y <= height):
            raise ValueError(f"{what} holds [{x:g}, {y:g}], outside its {width}x{height} image")


def _pair(path: Path, root: Path, within: Within, sizes: dict[str, tuple[int, int]]
          ) -> tuple[str, str, str, tuple[Any, ...]]:
    from PIL import Image  # image headers: only when a split is listed

    if path.stat().st_size > MAX_PAIR_BYTES:
        raise ValueError(f"larger than {MAX_PAIR_BYTES >> 10} KiB; a pair file is a few KiB")
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    missing = [k for k in ("src_imname", "trg_imname", "category", "src_kps", "trg_kps",
                           "trg_bndbox") if k not in doc]
    if missing:
        raise ValueError(f"no {', '.join(missing)}")
    if not all(isinstance(doc[k], str) and doc[k] for k in ("src_imname", "trg_imname",
                                                           "category")):
        raise ValueError("src_imname, trg_imname and category are not names")
    names = [f"{IMAGES_DIR}/{doc['category']}/{doc[k]}" for k in ("src_imname", "trg_imname")]
    if names[0] == names[1]:
        raise ValueError(f"src and trg are both {names[0]}: a pair needs two views")
    for name in names:
        if not within(name).is_file():
            raise ValueError(f"{name} does not exist")
        if name not in sizes:
            try:
                with Image.open(root / name) as image:
                    sizes[name] = image.size
            except Exception as exc:  # PIL raises many types for a file it cannot read
                raise ValueError(f"{name} is not a readable image ({type(exc).__name__})"
                                 ) from None
    src, trg = _points(doc["src_kps"], "src_kps"), _points(doc["trg_kps"], "trg_kps")
    if len(src) != len(trg):
        raise ValueError(f"{len(src)} src_kps but {len(trg)} trg_kps")
    box = doc["trg_bndbox"]
    if (not isinstance(box, list) or len(box) != 4
            or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in box)
            or box[2] <= box[0] or box[3] <= box[1]):
        raise ValueError(f"trg_bndbox {box!r} is not [x1, y1, x2, y2] with x2 > x1, y2 > y1")
    _inside_image(src, sizes[names[0]], "src_kps")
    _inside_image(trg, sizes[names[1]], "trg_kps")
    _inside_image([box[:2], box[2:]], sizes[names[1]], "trg_bndbox")
    return path.stem, names[0], names[1], (src, trg, [float(v) for v in box])


def scan_spair(root: Path, split: str | None) -> Scan:
    """Read one split of SPair-71k's pair annotations.

    Raises:
        UsageError: no split given, or none of that name.
        BadInput: an unreadable, oversized, deeply nested or malformed pair file, a pair
            with one view, a missing image or a name out of the tree, keypoints or a box
            outside their image (each naming the file), or a split without pairs.
    """
    found = subdirs(root / PAIRS_DIR)
    if split is None or split not in found:
        raise UsageError(f"SPair-71k needs {field_ref('split')} "
                         f"({', '.join(found) or 'none found'})"
                         if split is None else f"no split {split!r} in {root / PAIRS_DIR}",
                         hint=f"splits found: {', '.join(found) or 'none'}")
    rows, problems = [], []
    within, sizes = Within(root), dict[str, tuple[int, int]]()
    for path in sorted((root / PAIRS_DIR / split).glob("*.json")):
        try:
            rows.append(_pair(path, root, within, sizes))
        except RecursionError:
            problems.append((str(path), "JSON nested too deeply; a pair file is a flat object"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError,
                TypeError) as exc:
            problems.append((str(path), str(exc)))
    if problems:
        raise BadInput("bad pair annotations", problems,
                       hint="each file names two existing images, matching keypoints and a box")
    if not rows:
        raise BadInput("pair splits without pairs", [(str(root / PAIRS_DIR / split), "no .json")])
    images = sorted({name for r in rows for name in r[1:3]})
    return Scan("spair", root, split, [], "keypoint_pairs", [Entry(name=n, key=n) for n in images],
                limit_by="pair", pairs=rows, pair_field="keypoint_pairs")
