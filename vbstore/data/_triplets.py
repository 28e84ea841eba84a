"""Reading human 2AFC triplets (the NIGHTS layout) into a :class:`Scan`.

``root/data.csv`` has one row per triplet, columns by name: ``ref_path``, ``left_path``,
``right_path`` (paths relative to ``root``), ``left_vote`` and ``right_vote`` (how many people
found that candidate closer to the reference), ``votes`` (how many people were asked), and
optionally ``id`` and ``split``. As in DreamSim's NIGHTS evaluation and VisBench, a triplet needs
at least :data:`MIN_VOTES` votes (the ``min_votes`` option, VisBench's ``--min-votes``). The
manifest's samples are the distinct images of the kept triplets; its ``triplets`` field lists
``[ref, left, right, left_vote, right_vote]`` with sample indices.

``--split test`` keeps rows whose split is ``test`` or starts with ``test_`` (NIGHTS ships
``test_imagenet`` and ``test_no_imagenet``); a table with several splits needs one; ``--limit N``
keeps N triplets, not N images.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..errors import BadInput, UsageError, field_ref
from ._files import Within, check_unique_ids, read_table, relative_image
from ._scan import Entry, Scan

MIN_VOTES = 6
REQUIRED = ("ref_path", "left_path", "right_path", "left_vote", "right_vote", "votes")
DATA_FILE = "data.csv"


def triplet_csv(root: Path) -> Path | None:
    """The triplet table ``root`` stands for (``root/data.csv`` or the file itself), else None."""
    path = root / DATA_FILE if root.is_dir() else root
    if path.suffix.lower() != ".csv" or not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return None  # not a table this layout can read: the layout search says so
    return path if {"ref_path", "left_path", "right_path"} <= set(header) else None


def _split_matches(wanted: str | None, value: str) -> bool:
    return wanted is None or value == wanted or value.startswith(wanted + "_")


def _count(row: dict[str, str], column: str) -> int:
    value = (row.get(column) or "").strip()
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{column} {value!r} is not a number") from None
    if number < 0 or not number.is_integer():
        raise ValueError(f"{column} {value!r} is not a count")
    return int(number)


def scan_triplets(root: Path, split: str | None, min_votes: int = MIN_VOTES) -> Scan:
    """Read a NIGHTS-style triplet table; the scan's ``triplets`` hold image names.

    ``min_votes``: keep triplets with at least this many votes.

    Raises:
        UsageError: ``root`` holds no triplet table, ``split`` names no row, or ``min_votes`` is
            not a count.
        BadInput: an empty table, missing columns, a bad cell or a row pointing to a missing
            file (each with ``file:line``), or no triplet with enough votes.
    """
    if isinstance(min_votes, bool) or not isinstance(min_votes, int) or min_votes < 0:
        raise UsageError(f"min_votes must be an integer >= 0, not {min_votes!r}",
                         hint=f"e.g. {field_ref('min_votes', MIN_VOTES)} (the default)")
    path = root / DATA_FILE if root.is_dir() else root
    if not path.is_file():
        raise UsageError(f"no triplet table {path}",
                         hint=f"the triplets layout reads {DATA_FILE} with ref_path, left_path "
                              "and right_path columns")
    base = path.parent
    reader = read_table(path, "triplet", REQUIRED, "id and split")
    within = Within(base)
    rows: list[tuple[str, str, str, str, int, int]] = []
    problems: list[tuple[str, str]] = []
    splits: set[str] = set()
    total = 0
    for number, row in enumerate(reader, 2):
        total += 1
        splits.add(row.get("split") or "")
        if not _split_matches(split, (row.get("split") or "").strip()):
            continue
        where = f"{path}:{number}"
        try:
            names = [relative_image(row.get(c), c)
                     for c in ("ref_path", "left_path", "right_path")]
            for name in names:
                within(name)
            left, right, votes = (_count(row, c) for c in ("left_vote", "right_vote", "votes"))
        except ValueError as exc:
            problems.append((where, str(exc)))
            continue
        absent = [n for n in names if not (base / n).is_file()]
        if absent:
            problems.append((where, f"{absent[0]} does not exist"))
            continue
        if votes >= min_votes:
            key = (row.get("id") or "").strip() or f"row{number}"
            rows.append((key, names[0], names[1], names[2], left, right))
    if problems:
        raise BadInput("bad triplet rows", problems,
                       hint="every row names three existing images and vote counts")
    if total == 0:
        raise BadInput("empty triplet tables", [(str(path), "no rows")])
    found = ", ".join(sorted(s.strip() for s in splits if s.strip())) or "none"
    if split is not None and not any(_split_matches(split, s.strip()) for s in splits):
        raise UsageError(f"no split {split!r} in {path}", hint=f"splits found: {found}")
    if split is None and len({s.strip() for s in splits}) > 1:  # as for split folders: no mixing
        raise UsageError(f"{path} has splits ({found})", hint="choose one with "
                                                              f"{field_ref('split')}")
    if not rows:
        raise BadInput("triplet tables without usable triplets",
                       [(str(path), f"no triplet has {min_votes} or more votes")])
    check_unique_ids(rows, path, "triplet tables")
    images = sorted({name for r in rows for name in r[1:4]})
    return Scan("triplets", base, split, [], "triplets", [Entry(name=n, key=n) for n in images],
                limit_by="triplet", triplets=rows)

