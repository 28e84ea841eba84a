"""Task parameters checked against the data before anything is stored.

A parameter can be valid on its own and still make no sense for the data it meets: ``k=5000``
neighbours from a train split of 200 images, ``num_classes=4`` for data with 21 named classes.
The plan lists both splits first (nothing hashed or stored yet), counts them here, and asks the
task: a task that defines ``check_data(params, given, data)`` refuses what the data cannot
support (raising UsageError naming the fix) and returns warnings for what it will quietly
adapt (a default ``k`` over a small train split uses every image).

Every task whose targets are class indices is refused data with one class (its train split's
class list, else its eval split's): every prediction is then that class, so the probe and its
trivial baseline both score 1.0 and the number says nothing. A check that reads the label
maps (``SplitCounts.labels``) is not run for a result already stored: its data passed the same
checks when it was computed, and answering it reads no target file.

Imported by the planner: torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..data import get_target_kind
from ..errors import UsageError


@dataclass(frozen=True)
class SplitCounts:
    """What a task may check its parameters against: samples kept and the class list.

    ``labels()`` reads the distinct labels of the split's label maps (each file decoded once):
    a task calls it only when a parameter needs the values, so a plan pays for it only then.
    """

    samples: int
    classes: tuple[str, ...]
    labels: Callable[[], frozenset[int]] = field(default=frozenset, compare=False, repr=False)
    # the first label map holding a value (after ``labels()``), for an error to name its file
    holding: Callable[[int], str | None] = field(default=lambda value: None, compare=False,
                                                 repr=False)


@dataclass(frozen=True)
class DataCounts:
    """The eval split's counts, and the train split's (None: zero-shot or a given head)."""

    eval: SplitCounts
    train: SplitCounts | None


class _Stored(Exception):
    """A check asked for the label maps of a request whose result is stored: not needed."""


def counts(listing, stored: Callable[[], bool] = bool) -> SplitCounts:
    """The counts of a listed split (``vbstore.data.Listing``), without hashing a file.

    ``stored()`` says whether the result asked for is already stored; then ``labels()`` ends
    the check instead of reading the files (see :func:`check_against_data`).
    """
    read: dict[str, frozenset[int]] = {}

    def labels() -> frozenset[int]:
        if stored():
            raise _Stored
        if not read:  # each file decoded once, however many checks ask
            from ..data import label_values  # numpy: only when a task reads the labels

            read.update((str(path), label_values([path])) for path in listing.target_files())
            read.setdefault("", frozenset())  # read, even when the split has no label maps
        return frozenset().union(*read.values())

    def holding(value: int) -> str | None:
        return next((path for path, seen in read.items() if value in seen), None)

    return SplitCounts(listing.samples, tuple(listing.scan.classes or ()), labels, holding)


def check_against_data(task, params: Mapping[str, Any], given: Mapping[str, Any],
                       eval_listing, train_listing,
                       stored: Callable[[], bool] = bool) -> list[str]:
    """Ask ``task`` whether its resolved ``params`` (``given``: what the user set) fit the data.

    ``stored()`` (asked at most once, and only when a check reads label maps) says whether the
    result is already stored: a check that reads them is then not run.

    Returns:
        Warnings the record carries (what the task will adapt).

    Raises:
        UsageError: a parameter the data cannot support, naming the bound; data of one class.
        BadInput: a label map that cannot be read (when the task reads the labels).
    """
    known: list[bool] = []

    def once() -> bool:
        if not known:
            known.append(bool(stored()))
        return known[0]

    data = DataCounts(counts(eval_listing, once),
                      counts(train_listing, once) if train_listing is not None else None)
    _check_classes(task, data)
    check = getattr(task, "check_data", None)
    if check is None:
        return []
    try:
        return list(check(dict(params), dict(given), data) or [])
    except _Stored:
        return []


def _check_classes(task, data: DataCounts) -> None:
    """Refuse data listing fewer classes than its target kind needs (``min_classes``: the
    train split's classes, else the eval split's): with one class, the probe and its trivial
    baseline would both score 1.0.

    Raises:
        UsageError: naming the class and the fix.
    """
    needed = get_target_kind(task.target_kind).min_classes
    split, role = (data.train, "train") if data.train is not None else (data.eval, "eval")
    if not 0 < len(split.classes) < needed:  # none listed (unknown here), or enough
        return
    named = ", ".join(repr(c) for c in split.classes)
    raise UsageError(
        f"task {task.name!r}: the {role} data has {len(split.classes)} class"
        f"{'es' * (len(split.classes) != 1)} ({named}), so every prediction is right and the "
        "probe scores 1.0 like its trivial baseline",
        hint=f"give data with at least {needed} classes (one folder per class)")
