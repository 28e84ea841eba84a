"""Task errors live in :mod:`vbstore.errors`; re-exported here for the tasks."""

from ..errors import (  # noqa: F401
    TaskInputError,
    TrainingDiverged,
    UndefinedMetric,
    UnknownTask,
)
