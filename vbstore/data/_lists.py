"""Reading a CSV or JSONL sample list into a :class:`Scan`.

Columns: ``image`` (a path relative to the list file) and exactly one of ``label`` (a class
name), ``labels`` (class names: a list, or ``;``-separated), ``target`` (a path) or ``captions``
(strings); optionally ``condition``. Rows naming the same image merge their captions.

Bounds: a cell (any string, key or value) holds at most :data:`CELL_LIMIT` bytes and a JSONL row
nests at most :data:`MAX_NESTING` levels, so a hostile list is a one-line :class:`BadInput`, not
a traceback or a recursion deep into the JSON decoder.
"""

from __future__ import annotations

import csv
import json
import posixpath
import reprlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BadInput, UsageError, field_ref
from ._files import CONTROL, Within
from ._scan import Entry, Scan

TARGET_COLUMNS = ("label", "labels", "target", "captions")
COLUMNS = ("image", *TARGET_COLUMNS, "condition")
LIST_SUFFIXES = (".csv", ".jsonl")
_TARGET_TYPES = {
    "label": "class",
    "labels": "multi_label",
    "captions": "captions",
    "target": "target",
}
CELL_LIMIT = 128 * 1024  # bytes of one cell: csv's own default field limit
MAX_NESTING = 8  # a row is an object of strings and lists of strings: 2 levels
_SHORT = reprlib.Repr()  # keyword arguments only from Python 3.12
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxlevel = 40, 40, 4, 4, 2


def _show(value: Any) -> str:
    """A value as error messages quote it: short, whatever its size or depth."""
    return _SHORT.repr(value)


def _check_cells(value: Any) -> None:
    """Refuse a string over :data:`CELL_LIMIT` bytes or nesting over :data:`MAX_NESTING`.

    Raises:
        ValueError: naming the bound.
    """
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ValueError(f"nested over {MAX_NESTING} levels deep; a row holds strings and "
                             "lists of strings")
        if isinstance(item, str):
            if len(item) > CELL_LIMIT // 4 and len(item.encode("utf-8")) > CELL_LIMIT:
                raise ValueError(f"a cell is longer than {CELL_LIMIT // 1024} KiB")
        elif isinstance(item, dict):
            stack += [(k, depth + 1) for k in item] + [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]


def _json(text: str) -> Any:
    """``json.loads`` within the bounds of :func:`_check_cells`.

    Raises:
        ValueError: not JSON, or over a bound.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested over {MAX_NESTING} levels deep; a row holds strings and "
                         "lists of strings") from None
    _check_cells(value)
    return value


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) pairs; ``where`` is ``file:line`` for error messages."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: spreadsheets write a BOM
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput("unreadable sample lists", [(str(path), str(exc))]) from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        rows = []
        try:
            for row in reader:
                if None in row:  # more cells than header fields
                    raise ValueError("too many cells")
                cells = {k: v for k, v in row.items() if v is not None}
                _check_cells(cells)
                rows.append((f"{path}:{reader.line_num}", cells))
        except (csv.Error, ValueError) as exc:
            why, at = str(exc), reader.line_num
            if isinstance(exc, csv.Error):  # raised before the line it is reading is counted
                at += 1
            if "field larger than field limit" in why:  # csv's own cap, before ours can look
                why = f"a cell is longer than {CELL_LIMIT // 1024} KiB"
            raise BadInput("malformed CSV rows", [(f"{path}:{at}", why)]) from None
        return rows
    rows, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except RecursionError:
            problems.append((f"{path}:{number}", f"nested over {MAX_NESTING} levels deep"))
            continue
        except ValueError as exc:
            problems.append((f"{path}:{number}", f"not JSON ({_show(str(exc))})"))
            continue
        if not isinstance(row, dict):
            problems.append((f"{path}:{number}", "not a JSON object"))
            continue
        try:
            _check_cells(row)
        except ValueError as exc:
            problems.append((f"{path}:{number}", str(exc)))
            continue
        rows.append((f"{path}:{number}", row))
    if problems:
        raise BadInput("malformed JSONL lines", problems)
    return rows


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("empty path")
    if posixpath.isabs(value) or (len(value) > 1 and value[1] == ":"):
        raise ValueError(f"{_show(value)} is absolute; write it relative to the list file")
    value = posixpath.normpath(value.strip())
    if value == ".." or value.startswith("../"):
        raise ValueError(f"{_show(value)} leads out of the list's folder; name files inside it")
    return value


def _name(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"class names are strings, not {_show(value)}")
    name = str(value).strip()
    if not name:
        raise ValueError("empty class name")
    if CONTROL.search(name):
        raise ValueError(f"class name {_show(name)} holds a control character (NUL, newline...)")
    return name


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        value = (
            _json(value)
            if value.lstrip().startswith("[")
            else [part for part in value.split(";") if part.strip()]
        )
    if not isinstance(value, list):
        raise ValueError(f"labels are a list or ;-separated names, not {_show(value)}")
    return sorted({_name(v) for v in value})


def _captions(value: Any) -> list[str]:
    if isinstance(value, str):
        value = _json(value) if value.lstrip().startswith("[") else [value]
    if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
        raise ValueError("captions are a list of non-empty strings")
    if not value:
        raise ValueError("no captions")
    return [c.strip() for c in value]


def scan_list(
    path: Path, split: str | None, classes: Sequence[str] | None, target_type: str | None
) -> Scan:
    """Read a ``.csv`` or ``.jsonl`` sample list; names are relative to the list's folder.

    Args:
        path: The list file.
        split: Recorded in the manifest.
        classes: The class names in index order; default: the sorted names the list uses.
        target_type: Recorded target type for a ``target`` column (default ``target``).

    Raises:
        BadInput: unknown or missing columns, bad cells (with ``file:line``), duplicate images,
            labels outside ``classes``.
        UsageError: ``target_type`` for a list without a ``target`` column.
    """
    rows = _rows(path)
    if not rows:
        raise BadInput("empty sample lists", [(str(path), "no rows")])
    columns = {key for _, row in rows for key in row}
    unknown = sorted(columns - set(COLUMNS))
    kinds = [c for c in TARGET_COLUMNS if c in columns]
    shown = ", ".join(_show(c)[1:-1] for c in unknown[:5])
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    why = [f"unknown columns {shown}{more}"] if unknown else []
    why += [] if "image" in columns else ["no image column"]
    why += (
        [] if len(kinds) == 1 else [f"{len(kinds)} target columns ({', '.join(kinds) or 'none'})"]
    )
    if why:
        raise BadInput(
            "sample lists with bad columns",
            [(str(path), ", ".join(why))],
            hint=f"columns are image, exactly one of {', '.join(TARGET_COLUMNS)}, "
            "and optionally condition",
        )
    kind = kinds[0]
    if target_type is not None and kind != "target":
        raise UsageError(
            f"target_type applies to a list with a target column, not to {kind!r}",
            hint=f"drop {field_ref('target_type')}",
        )
    parse = {"label": _name, "labels": _names, "target": _path, "captions": _captions}[kind]
    by_name: dict[str, tuple[Any, str | None]] = {}
    problems: list[tuple[str, str]] = []
    within = Within(path.parent)
    for where, row in rows:
        try:
            name = _path(row.get("image"))
            within(name)
            if kind not in row:
                raise ValueError(f"no {kind}")
            value = parse(row[kind])
            if kind == "target":
                within(str(value))
            condition = row.get("condition") or None
            if condition is not None and not isinstance(condition, str):
                raise ValueError(f"condition is a string, not {_show(condition)}")
        except ValueError as exc:
            problems.append((where, str(exc)))
            continue
        if name in by_name:
            if kind != "captions" or by_name[name][1] != condition:
                problems.append((where, f"{name} is listed twice"))
                continue
            value = by_name[name][0] + value
        by_name[name] = (value, condition)
    if problems:
        raise BadInput("bad rows in a sample list", problems)
    used: set[str] = set()
    for value, _ in by_name.values():
        if kind == "label":
            used.add(value)
        elif kind == "labels":
            used.update(value)
    names_used = sorted(used)
    class_list = list(classes) if classes is not None else names_used
    index = {c: i for i, c in enumerate(class_list)}
    if len(index) != len(class_list):
        raise BadInput("class lists with duplicates", [(str(path), "a class is named twice")])
    outside = sorted(set(names_used) - set(index))
    if outside:
        raise BadInput(
            "labels outside the given classes",
            [(str(path), n) for n in outside],
            hint="add them to the class list or fix the labels",
        )
    entries = []
    for name, (value, condition) in by_name.items():
        entry = Entry(name=name, condition=condition, key=name)
        if kind == "label":
            entry.label, entry.group = index[value], value
        elif kind == "labels":
            entry.labels = sorted(index[v] for v in value)
        elif kind == "target":
            entry.target_name = value
        else:
            entry.captions = value
        entries.append(entry)
    layout_type = target_type or _TARGET_TYPES[kind]
    return Scan(
        "list",
        path.parent,
        split,
        class_list,
        layout_type,
        entries,
        limit_by="class" if kind == "label" else "sample",
    )
