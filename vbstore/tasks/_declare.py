"""What a task declares about its numbers and its parameters: :class:`Metric`, :class:`Param`,
:class:`FileParam` (plain values; :mod:`._base` and every shape's base read them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..errors import UndefinedMetric, UsageError

Direction = Literal["higher", "lower"]
ParamValue = bool | int | float | str


@dataclass(frozen=True)
class Metric:
    """One number a task reports, and which way is better.

    Attributes:
        min_classes: Reported only when the scored data has at least this many classes, absent
            otherwise (0: always). VisBench's rule for top-k: top5 over 5 classes or fewer is
            1.0 by construction, and a number that cannot differ says nothing.
    """

    name: str
    direction: Direction
    description: str
    min_classes: int = 0

    def reported(self, classes: int | None) -> bool:
        """Whether the metric is reported on data of ``classes`` classes (None: not known)."""
        return classes is None or classes >= self.min_classes


@dataclass(frozen=True)
class FileParam:
    """How a str parameter may name a file of strings (prompt templates, class names), or
    files of tensors (CLIP_benchmark's saved classifiers).

    The engine reads a named file with ``parse``, stores the entries as a JSON blob and replaces
    the path by the blob's id, so a result depends on the file's content and not its path; the
    task then finds the entries in ``context["files"][key]``. A parameter with ``load`` names
    tensor files instead: ``load`` reads the value (one path, or several comma-separated) into
    the bytes of a ``tensors`` object, stored and named by its id in the same way, and
    ``entries`` turns those stored bytes back into the task's entries.

    Attributes:
        parse: The file's text -> its entries; raises UsageError on bad content.
        names: Values that name no file (built-in sets, an empty default).
        load: The value -> the safetensors bytes to store (kind ``tensors``); raises
            UsageError on a file it cannot read. None: a text file read with ``parse``.
        entries: The stored bytes of ``load`` -> the entries the task reads.
    """

    parse: Callable[[str], list[str]] | None
    names: tuple[str, ...] = ()
    load: Callable[[str], bytes] | None = None
    entries: Callable[[bytes], list[Any]] | None = None

    @property
    def kind(self) -> str:
        """The kind of the stored object: ``tensors`` for tensor files, else ``blob``."""
        return "tensors" if self.load is not None else "blob"


@dataclass(frozen=True)
class Param:
    """One task parameter: its default (whose type is the parameter's type) and its bounds.

    Attributes:
        default: The value used when the user gives none; ``bool``, ``int``, ``float`` or ``str``.
        help: One line for ``vbstore list tasks`` and the docs.
        minimum: Inclusive lower bound for numbers.
        above: Exclusive lower bound for numbers (a learning rate must be > 0).
        maximum: Inclusive upper bound for numbers.
        choices: The allowed values of a string parameter.
        file: Set when a string parameter may name a file whose content the result depends on.
        added: Set on a parameter added after results of its task were stored: at its default
            it is left out of derivation keys and records (:meth:`Task.keyed_params`), so those
            results keep their keys; any other value enters them.
        scoring: Set on a parameter read only when scoring (detection's decoding): it is left
            out of head keys and head records (:meth:`Task.head_params`), so another value
            scores the same head again instead of training a new one.
    """

    default: ParamValue
    help: str
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    file: FileParam | None = None
    added: bool = False
    scoring: bool = False

    def normalise(self, task: str, key: str, value: Any) -> ParamValue:
        """Check ``value`` and return it in canonical form (an integral float for an int becomes
        an int; an int for a float becomes a float), so equal settings hash equal.

        Raises:
            UsageError: the value has the wrong type, is out of bounds or not a choice.
        """

        def refuse(expected: str) -> UsageError:
            return UsageError(
                f"parameter {key!r} of task {task!r} must be {expected}, got {value!r}",
                hint=f"{key}: {self.help} (default {self.default!r})",
            )

        kind = type(self.default)
        if kind is bool:
            if not isinstance(value, bool):
                raise refuse("true or false")
            return value
        if kind is str:
            if not isinstance(value, str):
                raise refuse("a string")
            if self.choices is not None and value not in self.choices:
                raise refuse("one of " + ", ".join(repr(c) for c in self.choices))
            return value
        # bool is an int subclass; `k=True` is a mistake, never 1.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise refuse("an integer" if kind is int else "a number")
        if not math.isfinite(value):
            raise refuse("a finite number")
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise refuse("an integer")
            value = int(value)
        else:
            value = float(value)
        if self.minimum is not None and value < self.minimum:
            raise refuse(f">= {self.minimum:g}")
        if self.above is not None and value <= self.above:
            raise refuse(f"> {self.above:g}")
        if self.maximum is not None and value > self.maximum:
            raise refuse(f"<= {self.maximum:g}")
        return value

    def describe(self) -> dict[str, Any]:
        """The parameter as a JSON-ready dict (bounds only where set)."""
        out: dict[str, Any] = {"default": self.default, "help": self.help}
        for field in ("minimum", "above", "maximum"):
            if getattr(self, field) is not None:
                out[field] = getattr(self, field)
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.file is not None:
            out["file"] = True
        return out


class _Named(Protocol):
    name: str


def metrics_out(
    task: _Named, values: Mapping[str, Any], declared: Sequence[Metric]
) -> dict[str, float]:
    """Exactly the declared metrics, as finite Python floats, in declared order (a metric
    reported only from some class count on, ``Metric.min_classes``, may be absent)."""
    names = [m.name for m in declared if m.name in values or not m.min_classes]
    if set(values) != set(names):
        raise RuntimeError(
            f"task {task.name!r} returned metrics {sorted(values)}, declared {sorted(names)}"
        )
    out = {}
    for name in names:
        value = float(values[name])
        if not math.isfinite(value):
            raise UndefinedMetric(task.name, name, f"it evaluated to {value}")
        out[name] = value
    return out

