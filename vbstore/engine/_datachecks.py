"""Task parameters checked against the data before anything is stored.

A parameter can be valid on its own and still make no sense for the data it meets: ``k=5000``
neighbours from a train split of 200 images, ``num_classes=4`` for data with 21 named classes.
The plan lists both splits first (nothing hashed or stored yet), counts them here, and asks the
task: a task that defines ``check_data(params, given, data)`` refuses what the data cannot
support (raising UsageError naming the fix) and returns warnings for what it will quietly
adapt (a default ``k`` over a small train split uses every image).

Imported by the planner: torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SplitCounts:
    """What a task may check its parameters against: samples kept and the class list.

    ``labels()`` reads the distinct labels of the split's label maps (each file decoded once):
    a task calls it only when a parameter needs the values, so a plan pays for it only then.
    """

    samples: int
    classes: tuple[str, ...]
    labels: Callable[[], frozenset[int]] = field(default=frozenset, compare=False, repr=False)


@dataclass(frozen=True)
class DataCounts:
    """The eval split's counts, and the train split's (None: zero-shot or a given head)."""

    eval: SplitCounts
    train: SplitCounts | None


def counts(listing) -> SplitCounts:
    """The counts of a listed split (``vbstore.data.Listing``), without hashing a file."""
    def labels() -> frozenset[int]:
        from ..data import label_values  # numpy: only when a task reads the labels, never cached

        return label_values(listing.target_files())

    return SplitCounts(listing.samples, tuple(listing.scan.classes or ()), labels)


def check_against_data(task, params: Mapping[str, Any], given: Mapping[str, Any],
                       eval_listing, train_listing) -> list[str]:
    """Ask ``task`` whether its resolved ``params`` (``given``: what the user set) fit the data.

    Returns:
        Warnings the record carries (what the task will adapt).

    Raises:
        UsageError: a parameter the data cannot support, naming the bound.
        BadInput: a label map that cannot be read (when the task reads the labels).
    """
    check = getattr(task, "check_data", None)
    if check is None:
        return []
    data = DataCounts(counts(eval_listing),
                      counts(train_listing) if train_listing is not None else None)
    return list(check(dict(params), dict(given), data) or [])
