"""Reading NAVI's per-image camera poses into view pairs with their relative pose.

NAVI (Jampani et al., 2023; https://github.com/google/navi) ships, per object, scene folders
``root/<object>/<scene>/`` (``multiview-XX-<camera>``, ``video-XX-<camera>``, ``wild_set``) with
``annotations.json``, a list with one entry per image: ``filename`` (under the scene's
``images/``), ``camera`` with ``q`` (a rotation quaternion, scalar first: ``[qw, qx, qy, qz]``)
and ``t`` (a translation), and ``split`` (``train`` or ``val``). The conventions are NAVI's own
code's (``data_util.camera_matrices_from_annotation`` and ``transformations.py``): the pose maps
the object's scan coordinates to the camera's, ``X_cam = R(q) X_obj + t`` (world-to-camera, the
object being the world), the camera frame is OpenCV's (``u = fx x / z + cx``, x right, y down,
z forward), ``q`` is normalised by NAVI's quaternion-to-matrix, and ``t`` is in the scan's units
(millimetres, per NAVI's tutorial).

Pairs are formed within each scene among the views of the asked split: every unordered pair of
two views, the :data:`PAIRS_PER_SCENE` whose ids hash lowest kept. Each pair's pose is the
``pairs`` layout's, taking camera A's coordinates to camera B's: ``R = R_b R_a^T``,
``t = t_b - R t_a``. An image without a ``split`` field goes to the split its object's name
hashes to (:func:`hashed_split`: one object in five to ``val``).

VisBench's pair draw (its NAVI pose dataset's flags), used instead when any of its options is
given (:data:`DRAW_OPTIONS`; absent, the pairs and manifest ids are as before): within each
scene, in sorted order, every view is an *anchor* and gets one partner drawn uniformly among
the scene's views whose rotation from it is above 0 and at most ``max_angle`` degrees (120),
seeded by ``pair_seed`` (8); ``stride`` keeps every Nth anchor (of every split, before the
split is chosen); a pair belongs to its anchor's split; a ``train`` anchor then gets
``partners - 1`` more distinct partners (``partners``, 1 by default here, VisBench's CLI says
8) from a second stream seeded ``pair_seed + 1``, so a one-partner draw is the first partner
of every larger one. The draw follows VisBench's rules, not its random numbers (numpy's
generator here, torch's there): the same protocol, other pairs.
"""

from __future__ import annotations

import heapq
import json
import math
import os
from pathlib import Path
from typing import Any

from ..errors import BadInput, UsageError, field_ref
from ._files import is_image, name_hash, subdirs
from ._scan import Entry, Scan

ANNOTATIONS, IMAGES_DIR = "annotations.json", "images"
# at most this many pairs per scene and split: a 25-view scene has 300, a video scene thousands
PAIRS_PER_SCENE = 50
# VisBench's pair-draw options and their defaults (module docstring)
DRAW_OPTIONS = {"partners": 1, "max_angle": 120.0, "pair_seed": 8, "stride": 1}
_ORIENTATION = 0x0112  # the EXIF tag
Quat = tuple[float, float, float, float]
Vec = tuple[float, float, float]


def is_navi(root: Path) -> bool:
    """Whether ``root`` looks like NAVI: one of its first three folders (objects; NAVI also has
    ``custom_splits/``) has a scene folder holding ``annotations.json``. Three, not all: this
    runs on every folder detected, and a class folder of an image folder lists its images."""
    if not root.is_dir():
        return False
    return any((root / obj / scene / ANNOTATIONS).is_file()
               for obj in subdirs(root)[:3] for scene in subdirs(root / obj))


def hashed_split(obj: str) -> str:
    """The split of an object whose annotations name none: ``val`` for one name hash in five."""
    return "val" if int(name_hash(obj)[:8], 16) % 5 == 0 else "train"


def check_orientation(images: list[tuple[str, Path]]) -> None:
    """Refuse images whose EXIF orientation turns them: NAVI's poses are those of the upright
    image (its reader applies the orientation), and vbstore decodes the stored pixels as they are.

    Raises:
        BadInput: every image with an EXIF orientation other than 1, named.
    """
    from PIL import Image  # only when a manifest is built, as the decode check does

    problems = []
    for _, path in images:
        try:
            with Image.open(path) as image:  # reads the header only
                orientation = image.getexif().get(_ORIENTATION, 1)
        except Exception:  # noqa: S112 - PIL raises many types; the decode check named any bad file
            continue
        if orientation != 1:
            problems.append((str(path), f"EXIF orientation {orientation}: the pose is the "
                                        "upright image's, the stored pixels are turned"))
    if problems:
        raise BadInput("NAVI images turned by their EXIF orientation", problems,
                       hint="write them upright (e.g. mogrify -auto-orient) and run again")


def _numbers(value: Any, size: int, what: str) -> list[float]:
    if (not isinstance(value, list) or len(value) != size
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       and math.isfinite(v) for v in value)):
        raise ValueError(f"{what} {value!r} is not {size} finite numbers")
    return [float(v) for v in value]


def _quat(value: Any) -> Quat:
    q = _numbers(value, 4, "camera q")
    norm = math.sqrt(sum(v * v for v in q))
    if norm < 1e-6:  # NAVI's own conversion divides by the squared norm
        raise ValueError(f"camera q {value!r} has norm 0: not a rotation [qw, qx, qy, qz]")
    w, x, y, z = (v / norm for v in q)
    return (w, x, y, z)


def _mul(a: Quat, b: Quat) -> Quat:
    """The Hamilton product ``a b`` (the rotation ``b`` then ``a``)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


def _rotate(q: Quat, v: Vec) -> Vec:
    _, x, y, z = _mul(_mul(q, (0.0, *v)), (q[0], -q[1], -q[2], -q[3]))
    return (x, y, z)


def relative_pose(q_a: Quat, t_a: Vec, q_b: Quat, t_b: Vec) -> tuple[float, ...]:
    """The pose taking camera A's coordinates to camera B's, from two world-to-camera poses:
    ``(qw, qx, qy, qz, tx, ty, tz)`` with ``R = R_b R_a^T``, ``t = t_b - R t_a`` and
    ``qw >= 0``."""
    w, x, y, z = _mul(q_b, (q_a[0], -q_a[1], -q_a[2], -q_a[3]))
    scale = (-1.0 if w < 0 else 1.0) / math.sqrt(w * w + x * x + y * y + z * z)
    q = (scale * w, scale * x, scale * y, scale * z)
    moved = _rotate(q, t_a)
    return (*q, *(b - m for b, m in zip(t_b, moved, strict=True)))


def _files_in(folder: Path) -> set[str]:
    try:
        with os.scandir(folder) as it:
            return {e.name for e in it if e.is_file()}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def _views(path: Path, obj: str) -> list[tuple[str, str, Quat, Vec]]:
    """``(filename, split, q, t)`` of every image ``path`` lists, each checked."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, list):
        raise ValueError("not a JSON list of per-image annotations")
    views, seen, fallback = [], set(), hashed_split(obj)
    present = _files_in(path.parent / IMAGES_DIR)  # one listing, not a stat per image
    for i, item in enumerate(doc):
        at = f"entry {i}"
        if not isinstance(item, dict) or not isinstance(item.get("camera"), dict):
            raise ValueError(f"{at} has no camera object")
        name = item.get("filename")
        if not isinstance(name, str) or not is_image(name) or "/" in name or name in seen:
            raise ValueError(f"{at}: filename {name!r} is not a distinct image file name")
        seen.add(name)
        at = f"{at} ({name})"
        split = item.get("split", fallback)
        if not isinstance(split, str) or not split:
            raise ValueError(f"{at}: split {split!r} is not a split name")
        try:
            q = _quat(item["camera"].get("q"))
            t = _numbers(item["camera"].get("t"), 3, "camera t")
        except ValueError as exc:
            raise ValueError(f"{at}: {exc}") from None
        if name not in present:
            raise ValueError(f"{at}: {IMAGES_DIR}/{name} does not exist")
        views.append((name, split, q, (t[0], t[1], t[2])))
    if not views:
        raise ValueError("no views: a pair needs two")
    if len(views) == 1:
        raise ValueError(f"one view ({views[0][0]}): a pair with one view cannot be formed")
    return views


def _scene_pairs(prefix: str, views: list[tuple[str, str, Quat, Vec]], split: str
                 ) -> list[tuple[str, str, str, tuple[float, ...]]]:
    kept = sorted((v for v in views if v[1] == split), key=lambda v: v[0])
    # rank every pair by its id's hash, then compute the poses of the kept ones only: a video
    # scene of a hundred frames has thousands of pairs
    ranked = heapq.nsmallest(PAIRS_PER_SCENE, (
        (name_hash(key), key, i, j)
        for i in range(len(kept)) for j in range(i + 1, len(kept))
        for key in (f"{prefix}/{kept[i][0]}|{kept[j][0]}",)))
    rows = []
    for _, key, i, j in ranked:
        (name_a, _, q_a, t_a), (name_b, _, q_b, t_b) = kept[i], kept[j]
        rows.append((key, f"{prefix}/{IMAGES_DIR}/{name_a}", f"{prefix}/{IMAGES_DIR}/{name_b}",
                     relative_pose(q_a, t_a, q_b, t_b)))
    return rows


def _angle(q_a: Quat, q_b: Quat) -> float:
    """Degrees of the rotation between two camera orientations."""
    w = abs(_mul(q_b, (q_a[0], -q_a[1], -q_a[2], -q_a[3]))[0])
    norm = math.sqrt(sum(c * c for c in q_a) * sum(c * c for c in q_b))
    return math.degrees(2 * math.acos(min(1.0, w / norm)))


def check_draw(options: dict[str, Any]) -> dict[str, Any]:
    """VisBench's draw options with their defaults filled.

    Raises:
        UsageError: a value out of range.
    """
    draw = {**DRAW_OPTIONS, **{k: v for k, v in options.items() if k in DRAW_OPTIONS}}
    if not (isinstance(draw["partners"], int) and draw["partners"] >= 1
            and isinstance(draw["stride"], int) and draw["stride"] >= 1
            and isinstance(draw["pair_seed"], int) and draw["pair_seed"] >= 0):
        raise UsageError("partners and stride are integers >= 1, pair_seed >= 0",
                         hint=f"e.g. {field_ref('partners', '8')} {field_ref('stride', '1')} "
                              f"{field_ref('pair_seed', '8')}")
    if not 0 < float(draw["max_angle"]) <= 180:
        raise UsageError(f"max_angle must be in (0, 180], got {draw['max_angle']}",
                         hint="the largest rotation a pair may span, in degrees (120)")
    return {**draw, "max_angle": float(draw["max_angle"])}


def _drawn_pairs(views: dict[str, list[tuple[str, str, Quat, Vec]]], split: str,
                 draw: dict[str, Any]) -> list[tuple[str, str, str, tuple[float, ...]]]:
    """The pairs of ``split`` by VisBench's draw (module docstring)."""
    import numpy as np  # the default reading never pays for numpy

    first_draw = np.random.default_rng(draw["pair_seed"])
    anchors = []
    for prefix in sorted(views):
        scene = sorted(views[prefix], key=lambda v: v[0])
        for i, anchor in enumerate(scene):
            eligible = [j for j, other in enumerate(scene)
                        if j != i and 0 < _angle(anchor[2], other[2]) <= draw["max_angle"]]
            if eligible:
                partner = eligible[int(first_draw.integers(len(eligible)))]
                anchors.append((prefix, scene, i, eligible, partner))
    anchors = anchors[::draw["stride"]]
    extra_draw = np.random.default_rng(draw["pair_seed"] + 1)
    rows = []
    for prefix, scene, i, eligible, partner in anchors:
        chosen = [partner]
        if scene[i][1] == "train" and draw["partners"] > 1:  # every train anchor, in order
            rest = [j for j in eligible if j != partner]
            wanted = min(draw["partners"] - 1, len(rest))
            if wanted:
                chosen += [rest[int(k)] for k in extra_draw.choice(len(rest), wanted,
                                                                   replace=False)]
        if scene[i][1] != split:
            continue
        name_a, _, q_a, t_a = scene[i]
        for j in chosen:
            name_b, _, q_b, t_b = scene[j]
            rows.append((f"{prefix}/{name_a}|{name_b}", f"{prefix}/{IMAGES_DIR}/{name_a}",
                         f"{prefix}/{IMAGES_DIR}/{name_b}", relative_pose(q_a, t_a, q_b, t_b)))
    return rows


def scan_navi(root: Path, split: str | None, draw: dict[str, Any] | None = None) -> Scan:
    """Read NAVI's scenes into the view pairs of one split (``draw``: VisBench's pair draw,
    :func:`check_draw`'s options; None: this reader's own).

    Raises:
        UsageError: no split given, or one no image is in.
        BadInput: a scene folder without ``annotations.json``, an unreadable or malformed one
            (a camera ``q`` that is not four numbers, an image listed but missing, a scene
            with one view...), each naming the file.
    """
    views: dict[str, list[tuple[str, str, Quat, Vec]]] = {}
    problems: list[tuple[str, str]] = []
    for obj in subdirs(root):
        for scene in subdirs(root / obj):
            folder = root / obj / scene
            path = folder / ANNOTATIONS
            if not path.is_file():
                if (folder / IMAGES_DIR).is_dir():  # a scene without its poses
                    problems.append((str(path), "missing: a NAVI scene needs its annotations"))
                continue  # 3d_scan/ and other folders hold no views
            try:
                views[f"{obj}/{scene}"] = _views(path, obj)
            except RecursionError:
                problems.append((str(path), "JSON nested too deeply"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
                problems.append((str(path), str(exc)))
    if problems:
        raise BadInput("bad NAVI scenes", problems,
                       hint="each scene has annotations.json listing two or more existing "
                            "images with a camera q [qw, qx, qy, qz] and t [tx, ty, tz]")
    if not views:
        raise BadInput("NAVI folders without scenes",
                       [(str(root), f"no <object>/<scene>/{ANNOTATIONS}")])
    found = sorted({v[1] for listed in views.values() for v in listed})
    if split is None or split not in found:
        raise UsageError(f"NAVI needs {field_ref('split')}" if split is None
                         else f"no image of {root} is in split {split!r}",
                         hint=f"splits found: {', '.join(found)}")
    rows = (_drawn_pairs(views, split, draw) if draw is not None else
            [row for prefix in sorted(views) for row in _scene_pairs(prefix, views[prefix], split)])
    if not rows:
        raise BadInput("NAVI splits without pairs",
                       [(str(root), f"no scene has two views in split {split!r}")])
    names = sorted({name for r in rows for name in r[1:3]})
    return Scan("navi", root, split, [], "pairs", [Entry(name=n, key=n) for n in names],
                limit_by="pair", pairs=rows, check_images=check_orientation)
