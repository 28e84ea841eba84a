"""Reading Taskonomy's folders into a :class:`Scan`: one domain folder per target, by building.

Taskonomy (Zamir et al., 2018) ships one folder per domain, each holding one folder per building::

    taskonomy/
      rgb/<building>/point_<P>_view_<V>_domain_rgb.png
      depth_zbuffer/<building>/point_<P>_view_<V>_domain_depth_zbuffer.png
      normal/<building>/point_<P>_view_<V>_domain_normal.png
      edge_texture/ edge_occlusion/ keypoints2d/ ...  (the same naming)
      train_val_test_tiny.csv    (a split CSV: building, then a 0/1 column per split)

An image and its target pair by building and ``point_<P>_view_<V>``, never by position. Splits
are by building, as Taskonomy's CSVs list them: ``--split val`` keeps the buildings whose ``val``
cell is 1.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

from ..errors import BadInput, UsageError, field_ref
from ._files import subdirs, walk_files
from ._scan import Entry, Scan

IMAGE_DOMAIN = "rgb"
SPLIT_COLUMNS = ("train", "val", "test")  # the order of a split CSV without a header
_NAME = re.compile(r"point_(\d+)_view_(\d+)_domain_([A-Za-z0-9_]+)\.[A-Za-z]+")


def is_taskonomy(root: Path) -> bool:
    """Whether ``root`` looks like Taskonomy: an ``rgb/`` folder of building folders, the first
    holding a file named in Taskonomy's pattern (a class folder called ``rgb`` is not)."""
    rgb = root / IMAGE_DOMAIN
    buildings = subdirs(rgb) if rgb.is_dir() else []
    if not buildings:
        return False
    with os.scandir(rgb / buildings[0]) as it:
        for entry in it:
            match = _NAME.fullmatch(entry.name)
            if match is not None and match.group(3) == IMAGE_DOMAIN:
                return True
    return False


def read_split_csv(path: Path) -> dict[str, list[str]]:
    """Split name → sorted buildings of a Taskonomy split CSV.

    Rows are ``building,train,val,test`` with 0/1 cells (Taskonomy's ``train_val_test_*.csv``);
    a first row whose cells are not 0/1 is a header naming the split columns.

    Raises:
        BadInput: an unreadable file, a row of another width, a cell that is not 0 or 1, a
            building listed twice, no rows.
    """
    try:
        rows = list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines()))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise BadInput("unreadable split lists", [(str(path), str(exc))]) from None
    numbered = [(n, [c.strip() for c in row]) for n, row in enumerate(rows, 1) if any(row)]
    columns = list(SPLIT_COLUMNS)
    if numbered and not set(numbered[0][1][1:]) <= {"0", "1"}:
        columns = numbered.pop(0)[1][1:]
    out: dict[str, list[str]] = {c: [] for c in columns}
    seen: set[str] = set()
    problems = []
    for number, cells in numbered:
        where = f"{path}:{number}"
        if len(cells) != len(columns) + 1 or not cells[0]:
            problems.append((where, f"expected a building and {len(columns)} 0/1 cells "
                                    f"({', '.join(columns)}), got {len(cells)} cells"))
        elif not set(cells[1:]) <= {"0", "1"}:
            problems.append((where, "split cells are 0 or 1"))
        elif cells[0] in seen:
            problems.append((where, f"building {cells[0]!r} is listed twice"))
        else:
            seen.add(cells[0])
            for column, cell in zip(columns, cells[1:], strict=True):
                if cell == "1":
                    out[column].append(cells[0])
    if problems:
        raise BadInput("bad rows in a split list", problems,
                       hint="a Taskonomy split CSV has rows building,train,val,test of 0/1")
    if not seen:
        raise BadInput("empty split lists", [(str(path), "no buildings")])
    return {k: sorted(v) for k, v in out.items()}


def _views(top: Path, domain: str, building: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """``point_P_view_V`` → relative file name of one domain's building folder, and the files
    whose names do not follow Taskonomy's pattern for that domain."""
    found: dict[str, str] = {}
    bad = []
    folder = top / domain / building
    for name in sorted(walk_files(folder, images_only=False)):
        match = _NAME.fullmatch(name)
        if match is None or match.group(3) != domain:
            bad.append((str(folder / name),
                        f"not named point_<P>_view_<V>_domain_{domain}.<ext>"))
            continue
        key = f"point_{match.group(1)}_view_{match.group(2)}"
        if key in found:
            bad.append((str(folder / name), f"a second file for {key}"))
            continue
        found[key] = f"{domain}/{building}/{name}"
    return found, bad


def scan_taskonomy(root: Path, split: str | None, target: str | None,
                   target_type: str | None, splits: Path | None) -> Scan:
    """Taskonomy's ``rgb/`` paired with one domain folder, over a split's buildings.

    Args:
        root: The folder holding ``rgb/`` and the domain folders.
        split: A column of ``splits`` (``train``, ``val``, ``test``); None reads every building
            ``rgb/`` holds.
        target: The domain folder (``depth_zbuffer``, ``normal``, ``edge_texture``...);
            ``images`` (or ``rgb``) reads the images alone. Needed when there are several.
        target_type: Recorded instead of the domain name.
        splits: The split CSV; needed with ``split``.

    Raises:
        UsageError: a split without a split CSV, a split the CSV has no column for, no or an
            ambiguous domain folder.
        BadInput: a building of the split missing from ``rgb/``, a file not named in
            Taskonomy's pattern, an image without its target or a target without its image.
    """
    domains = [d for d in subdirs(root) if d != IMAGE_DOMAIN]
    if split is None:
        buildings = subdirs(root / IMAGE_DOMAIN)
    else:
        if splits is None:
            raise UsageError(f"Taskonomy's split {split!r} needs the CSV listing its buildings",
                             hint=f"pass {field_ref('splits', 'FILE')} (e.g. "
                                  "train_val_test_tiny.csv)")
        table = read_split_csv(splits)
        if split not in table:
            raise UsageError(f"no split {split!r} in {splits}",
                             hint=f"its splits: {', '.join(table)}")
        buildings = table[split]
        missing = [b for b in buildings if not (root / IMAGE_DOMAIN / b).is_dir()]
        if missing:
            raise BadInput(
                "buildings of the split without images",
                [(str(root / IMAGE_DOMAIN / b), f"listed for {split} in {splits.name}")
                 for b in missing],
                hint="download these buildings, or read a split CSV of the buildings you have")
    if target in ("images", IMAGE_DOMAIN) or (target is None and not domains):
        target = None
    elif target is None:
        if len(domains) != 1:
            raise UsageError(f"{root} has {len(domains)} domain folders beside rgb/ "
                             f"({', '.join(domains)})", hint="choose one with "
                                                             f"{field_ref('target', 'DOMAIN')}")
        target = domains[0]
    elif target not in domains:
        raise UsageError(f"no domain folder {target!r} in {root}",
                         hint=f"domain folders found: {', '.join(domains) or 'none'}")
    entries: list[Entry] = []
    problems: list[tuple[str, str]] = []
    for building in buildings:
        images, bad = _views(root, IMAGE_DOMAIN, building)
        problems += bad
        if target is None:
            entries += [Entry(name=images[k], key=f"{building}/{k}") for k in sorted(images)]
            continue
        if not (root / target / building).is_dir():
            problems.append((str(root / target / building), f"no {target} folder for "
                             f"{len(images)} images of {building}"))
            continue
        targets, bad = _views(root, target, building)
        problems += bad
        for key in sorted(set(images) | set(targets)):
            if key not in targets:
                problems.append((str(root / images[key]),
                                 f"no {target}/{building}/{key}_domain_{target}.png"))
            elif key not in images:
                problems.append((str(root / targets[key]),
                                 f"no {IMAGE_DOMAIN}/{building}/{key}_domain_rgb.png"))
            else:
                entries.append(Entry(name=images[key], target_name=targets[key],
                                     key=f"{building}/{key}"))
    if problems:
        raise BadInput("Taskonomy files that do not pair", problems,
                       hint="every rgb view needs exactly one file of the domain, named "
                            "point_<P>_view_<V>_domain_<domain>")
    if not entries:
        raise BadInput("folders without images",
                       [(str(root / IMAGE_DOMAIN), f"no views in {len(buildings)} buildings")])
    return Scan("taskonomy", root, split, [], target_type or target or "image", entries,
                limit_by="stem")
