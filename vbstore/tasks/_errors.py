"""Errors the probe tasks raise.

They derive from :class:`vbstore.errors.VbstoreError` (and the builtin they refine), so the CLI
turns them into one line like every other vbstore error. They are candidates to move into
:mod:`vbstore.errors`; callers should import them from :mod:`vbstore.tasks`.
"""

from __future__ import annotations

from ..errors import VbstoreError


class UnknownTask(VbstoreError, KeyError):
    """A task name that no registered task has."""

    exit_code = 9

    def __init__(self, name: str, close: list[str]) -> None:
        hint = f"did you mean {close[0]!r}?" if close else "list them with: vbstore list tasks"
        super().__init__(f"no task is registered as {name!r}", hint=hint)
        self.name = name


class TaskInputError(VbstoreError, ValueError):
    """Features, targets, a head or a context that do not fit the task (shape, dtype, values)."""

    exit_code = 2


class UndefinedMetric(VbstoreError, ArithmeticError):
    """A metric would be NaN or infinite; the message names why."""

    exit_code = 2

    def __init__(self, task: str, metric: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"task {task!r}: {metric} is undefined: {reason}", hint=hint)
        self.task = task
        self.metric = metric


class TrainingDiverged(VbstoreError, ArithmeticError):
    """A probe head's weights or loss became NaN or infinite during training."""

    exit_code = 2
