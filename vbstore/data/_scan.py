"""Reading folder layouts into a :class:`Scan`: names and labels, before any file is hashed.

A scan only lists and pairs files, so structural problems (an empty class, an image without
its target) are reported before a single byte is read, and ``--limit`` can pick the samples to
hash first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput, UsageError, field_ref
from ._files import is_hidden, loose_images, subdirs, walk_files


@dataclass(slots=True)
class Entry:
    """One sample as listed, before hashing. Paths are POSIX and relative to ``Scan.root``."""

    name: str
    label: int | None = None
    labels: list[int] | None = None
    target_name: str | None = None
    captions: list[str] | None = None
    condition: str | None = None
    # --limit keeps N entries per group, ranked by the hash of key
    group: str = ""
    key: str = ""


@dataclass
class Scan:
    """A listed split: where its names are rooted, its classes and entries."""

    layout: str
    root: Path
    split: str | None
    classes: list[str]
    target_type: str
    entries: list[Entry] = field(default_factory=list)
    # how --limit counts: "class" (N per class), "stem"/"sample" (N in all), "triplet", "pair"
    limit_by: str = "sample"
    # 2AFC triplets (key, ref, left, right, left_vote, right_vote) over entry names, or None
    triplets: list[tuple[str, str, str, str, int, int]] | None = None
    # view pairs (key, image_a, image_b, payload) over entry names, or None; the payload is
    # the pose (qw, qx, qy, qz, tx, ty, tz), or (src_kps, trg_kps, trg_bbox) for keypoint pairs
    pairs: list[tuple[str, str, str, tuple[Any, ...]]] | None = None
    # the manifest field the pairs go to: pairs (poses) or keypoint_pairs
    pair_field: str = "pairs"
    # a check of the kept target files' contents (box annotations), run before anything is stored
    check_targets: Callable[[list[tuple[str, Path]]], None] | None = None
    # a check of the kept images' contents beyond decoding (NAVI's EXIF orientation), likewise
    check_images: Callable[[list[tuple[str, Path]]], None] | None = None


def _splits_hint(root: Path) -> str:
    found = subdirs(root) if root.is_dir() else []
    return (
        f"splits found in {root}: {', '.join(found)}" if found else f"{root} has no split folders"
    )


def scan_image_folder(root: Path, split: str | None) -> Scan:
    """``root/<split>/<class>/<image>``, or ``root/<class>/<image>`` when ``split`` is None.

    With a split level the class list is the union over every split folder, so label indices
    agree between train and val even when a split lacks a class.

    Raises:
        UsageError: ``split`` names no folder.
        BadInput: empty class folders, images outside any class folder, no class at all.
    """
    if split is None:
        base, classes = root, subdirs(root)
    else:
        base = root / split
        if not base.is_dir():
            raise UsageError(f"no split {split!r} in {root}", hint=_splits_hint(root))
        classes = sorted({c for s in subdirs(root) for c in subdirs(root / s)})
    stray = loose_images(base)
    if stray:
        raise BadInput(
            "images outside any class folder",
            [(str(base / n), "not in a class folder") for n in stray],
            hint="move each image into a folder named after its class",
        )
    index = {name: i for i, name in enumerate(classes)}
    entries: list[Entry] = []
    empty: list[tuple[str, str]] = []
    for cls in subdirs(base):
        names = sorted(walk_files(base / cls))
        if not names:
            empty.append((str(base / cls), "no images"))
        label, prefix = index[cls], f"{cls}/"
        # one entry per file of every read: one string and one call, its fields given in order
        # (name, label, labels, target_name, captions, condition, group, key; a third faster)
        entries.extend([Entry(name, label, None, None, None, None, cls, name)
                        for name in [prefix + n for n in names]])
    if empty:
        raise BadInput("empty class folders", empty, hint="remove them or add images")
    if not entries:
        raise BadInput(
            "folders without images",
            [(str(base), "no class folder with images")],
            hint="an image folder is root/<class>/<image> or root/<split>/<class>/<image>",
        )
    return Scan("image_folder", base, split, classes, "class", entries, limit_by="class")


def _index(top: Path, images_only: bool) -> dict[str, list[str]]:
    """Files under ``top`` keyed by their relative path without extension."""
    if not top.is_dir():
        raise BadInput("missing folders", [(str(top), "not a folder")])
    by_stem: dict[str, list[str]] = {}
    for rel in walk_files(top, images_only=images_only):
        by_stem.setdefault(os.path.splitext(rel)[0], []).append(rel)
    return by_stem


def _pair(root: Path, image_dir: Path, target_dir: Path, stems: list[str] | None) -> list[Entry]:
    """Images and targets paired by stem; every image needs exactly one target and vice versa."""
    images = _index(image_dir, images_only=True)
    targets = _index(target_dir, images_only=False)
    image_rel = Path(os.path.relpath(image_dir, root)).as_posix()
    target_rel = Path(os.path.relpath(target_dir, root)).as_posix()
    problems: list[tuple[str, str]] = []
    keys = sorted(set(images) | set(targets)) if stems is None else stems
    entries = []
    for stem in keys:
        image, target = images.get(stem, []), targets.get(stem, [])
        for found, folder, what in ((image, image_dir, "images"), (target, target_dir, "targets")):
            if len(found) > 1:
                problems.append(
                    (str(folder / found[0]), f"{len(found)} {what} share the stem {stem!r}")
                )
        if not image or not target:
            missing = " and ".join(
                f"no {what} in {rel}/"
                for found, what, rel in (
                    (image, "image", image_rel),
                    (target, "target", target_rel),
                )
                if not found
            )
            where = image_dir / image[0] if image else target_dir / target[0] if target else stem
            problems.append((str(where), missing))
        if len(image) == 1 and len(target) == 1:
            entries.append(
                Entry(
                    name=f"{image_rel}/{image[0]}",
                    target_name=f"{target_rel}/{target[0]}",
                    key=stem,
                )
            )
    if problems:
        raise BadInput(
            "images and targets that do not pair",
            problems,
            hint="every image needs exactly one target with the same file stem",
        )
    if not entries:
        raise BadInput("folders without images", [(str(image_dir), "no images")])
    return entries


def scan_dense(base: Path, split: str | None, target: str | None, target_type: str | None,
               image_dir: str = "images", layout: str = "dense") -> Scan:
    """``<base>/{images,<target>}`` paired by stem; the target folder's name is the target type.

    A split with ``images/`` alone is read too (target type ``image``), for tasks that compute
    their target from the pixels (``corner``).

    Args:
        base: The split folder (``<root>/<split>``, or the root when there is no split level).
        split: Recorded in the manifest.
        target: Which target folder, when there are several (``masks``, ``depth``...);
            ``images`` reads the images alone, whatever folders lie beside them.
        target_type: Overrides the recorded target type (default: the target folder's name).
        image_dir: The image folder's name (``rgb`` in NYUv2 folders).
        layout: Recorded in the manifest (``dense``, ``nyu``).

    Raises:
        UsageError: no, or an ambiguous, target folder.
        BadInput: unpaired or ambiguous stems, no images.
    """
    if not (base / image_dir).is_dir():
        raise BadInput(
            "dense splits without images",
            [(str(base / image_dir), "not a folder")],
            hint=f"a {layout} split is <root>/<split>/{{{image_dir},<target>}}",
        )
    others = [d for d in subdirs(base) if d != image_dir]
    if (target is None and not others) or target in ("images", image_dir):
        # images only: for tasks whose targets come from pixels (corner, orientation)
        names = sorted(walk_files(base / image_dir))
        if not names:
            raise BadInput("dense splits without images", [(str(base / image_dir), "no images")])
        entries = [Entry(name=f"{image_dir}/{n}", key=os.path.splitext(n)[0]) for n in names]
        return Scan(layout, base, split, [], target_type or "image", entries, limit_by="stem")
    if target is None:
        if len(others) != 1:
            found = ", ".join(others) or "none"
            raise UsageError(
                f"{base} has {len(others)} target folders beside {image_dir}/ ({found})",
                hint=f"choose one with {field_ref('target', 'NAME')}"
                if others
                else "add a folder of targets (masks, depth...)",
            )
        target = others[0]
    elif target not in others:
        raise UsageError(
            f"no target folder {target!r} in {base}",
            hint=f"target folders found: {', '.join(others) or 'none'}",
        )
    entries = _pair(base, base / image_dir, base / target, None)
    return Scan(layout, base, split, [], target_type or target, entries, limit_by="stem")


def looks_paired(base: Path, image_dir: str) -> bool:
    """Whether ``base/<image_dir>/`` has siblings that pair with it by stem (NYUv2 folders), as
    class folders would not: the first image's stem has a file in every other folder."""
    first = next((n for n in sorted(os.listdir(base / image_dir)) if not is_hidden(n)), None)
    others = [d for d in subdirs(base) if d != image_dir]
    if first is None or not others:
        return False
    stem = os.path.splitext(first)[0]
    return all(any(os.path.splitext(n)[0] == stem for n in os.listdir(base / d)) for d in others)


def read_stems(path: Path) -> list[str]:
    """The stems of a VOC-style list: one per line; blank lines and ``#`` comments skipped.

    Raises:
        BadInput: a line with several fields (a VOC per-class list, not a stems list), or a
            duplicate stem.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInput("unreadable stems lists", [(str(path), exc.strerror or str(exc))]) from None
    stems, seen, problems = [], set(), []
    for number, line in enumerate(lines, 1):
        stem = line.strip()
        if not stem or stem.startswith("#"):
            continue
        if len(stem.split()) > 1:
            problems.append((f"{path}:{number}", f"expected one stem, got {stem!r}"))
        elif stem in seen:
            problems.append((f"{path}:{number}", f"duplicate stem {stem!r}"))
        seen.add(stem)
        stems.append(stem)
    if problems:
        raise BadInput("bad lines in a stems list", problems)
    if not stems:
        raise BadInput("empty stems lists", [(str(path), "no stems")])
    return stems


def scan_stems(
    root: Path,
    split: str | None,
    stems_file: Path,
    image_dir: Path,
    target_dir: Path,
    target_type: str | None,
) -> Scan:
    """An official stems list over an image folder and a target folder (VOC style).

    Only the listed stems become samples; each must have exactly one image and one target.
    """
    entries = _pair(root, image_dir, target_dir, read_stems(stems_file))
    return Scan("stems", root, split, [], target_type or target_dir.name, entries, limit_by="stem")


def scan_voc(root: Path, split: str | None, stems: Path | None = None) -> Scan:
    """VOC detection: ``ImageSets/Main/<split>.txt`` stems (or the ``stems`` list given, as
    VisBench's ``--stems ImageSets/Main/val.txt``), ``JPEGImages/<stem>.*`` images and
    ``Annotations/<stem>.xml`` boxes (classes and the box check are set by the caller).

    Raises:
        UsageError: no split, or no stems list for it.
        BadInput: a listed stem without its image or annotation.
    """
    if stems is not None:
        entries = _pair(root, root / "JPEGImages", root / "Annotations", read_stems(stems))
        return Scan("voc", root, split, [], "boxes", entries, limit_by="stem")
    main = root / "ImageSets" / "Main"
    found = sorted(p.stem for p in main.glob("*.txt") if "_" not in p.stem)
    if split is None or not (main / f"{split}.txt").is_file():
        raise UsageError(
            f"no VOC stems list ImageSets/Main/{split}.txt in {root}" if split
            else f"{root} is a VOC folder: choose its split",
            hint=f"choose a split with {field_ref('split')} ({', '.join(found) or 'none found'})",
        )
    entries = _pair(root, root / "JPEGImages", root / "Annotations",
                    read_stems(main / f"{split}.txt"))
    return Scan("voc", root, split, [], "boxes", entries, limit_by="stem")


def scan_coco(root: Path, split: str | None) -> Scan:
    """COCO: every image of ``<split>/`` paired with ``annotations/instances_<split>.json``
    (classes and the box check, which needs every image in that file, are set by the caller).

    Raises:
        UsageError: no split, or no annotation file for it.
        BadInput: no images.
    """
    found = sorted(p.stem.removeprefix("instances_")
                   for p in (root / "annotations").glob("instances_*.json"))
    target = root / "annotations" / f"instances_{split}.json"
    if split is None or not target.is_file() or not (root / split).is_dir():
        raise UsageError(
            f"no COCO split {split!r} (annotations/instances_{split}.json and {split}/) in {root}"
            if split else f"{root} is a COCO folder: choose its split",
            hint=f"choose a split with {field_ref('split')} ({', '.join(found) or 'none found'})",
        )
    names = sorted(walk_files(root / split))
    if not names:
        raise BadInput("folders without images", [(str(root / split), "no images")])
    entries = [Entry(name=f"{split}/{n}", target_name=f"annotations/instances_{split}.json",
                     key=n) for n in names]
    return Scan("coco", root, split, [], "boxes", entries, limit_by="stem")
