"""The task registry: ``@register_task``, ``get_task``, ``list_tasks``.

Built-in tasks register through exactly this path, like a user's plugin does. Registration
instantiates the task and checks its declaration, so a malformed task fails when its module is
imported, not in the middle of a run. A built-in task's module is imported when the task is
first asked for (:data:`BUILTIN`), so a cached ``vbstore get`` loads one task module, not all.

```python
from vbstore.tasks import Task, register_task

@register_task(name="my_probe")
class MyProbe(Task):
    ...

@register_task                     # registered as "knn_k10"
def knn_k10() -> Task:
    return KnnClassification(defaults={"k": 10})
```
"""

from __future__ import annotations

import fnmatch
import importlib
import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

from ..data import get_target_kind, list_target_kinds
from ..errors import UsageError
from ._base import Metric, Param, Task
from ._errors import UnknownTask
from ._shapes import SHAPES

_TASKS: dict[str, Task] = {}
# how a built-in task module registers each of its tasks (a plugin may register any way)
_REGISTERS = re.compile(r'^@register_task\(name="([a-z][a-z0-9_]*)"\)', re.M)


def _builtin_modules() -> dict[str, str]:
    """Each built-in task and the module of this package that registers it, read from the
    modules' own ``@register_task(name="...")`` lines: a new built-in probe is its module
    alone, and a cached ``get`` still imports only the module of its task."""
    found: dict[str, str] = {}
    for path in sorted(Path(__file__).parent.glob("[a-z]*.py")):
        for name in _REGISTERS.findall(path.read_text(encoding="utf-8")):
            found[name] = path.stem
    return found


BUILTIN = _builtin_modules()
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")

T = TypeVar("T", bound=Callable[..., Any])


def _check_declaration(task: Task) -> None:
    """Refuse a declaration the engine could not use; each message names the attribute."""

    def bad(what: str) -> UsageError:
        return UsageError(f"task {task.name!r} ({type(task).__name__}): {what}")

    for attr in ("level", "op_version", "target_kind"):
        if not hasattr(task, attr):
            raise bad(f"declares no {attr}")
    if task.level not in ("high", "mid", "low"):
        raise bad(f"level must be high, mid or low, not {task.level!r}")
    if isinstance(task.op_version, bool) or not isinstance(task.op_version, int):
        raise bad("op_version must be an int")
    if task.op_version < 1:
        raise bad("op_version must be >= 1")
    if task.feature_mode not in ("pooled", "dense"):
        raise bad(f"feature_mode must be pooled or dense, not {task.feature_mode!r}")
    if task.target_kind not in list_target_kinds():
        raise bad(f"unknown target_kind {task.target_kind!r} (kinds: "
                  f"{', '.join(list_target_kinds())}; vbstore.data.register_target_kind adds one)")
    # a pair task may read dense maps, average-pooled to a grid of vectors ("pooled dense")
    vectors = get_target_kind(task.target_kind).dense_shape == "pairs"
    per_pixel = get_target_kind(task.target_kind).per_pixel
    if (task.feature_mode == "dense") != per_pixel and not vectors:
        raise bad("a dense task takes a per-pixel target_kind, and only a dense task does")
    if task.trains_head == task.zero_shot:
        raise bad("exactly one of trains_head and zero_shot must be true")
    if task.shape and task.shape not in SHAPES:
        raise bad(f"unknown shape {task.shape!r} (shapes: {', '.join(SHAPES)})")
    shape = task.shape_spec
    if task.views is not None and task.views not in ("homography", "keypoints"):
        raise bad("views (homography or keypoints) are for a zero-shot dense task")
    if (shape.feature_mode, shape.trains_head, shape.needs_text, shape.views) != (
            task.feature_mode, task.trains_head, task.needs_text, task.views):
        raise bad(f"its flags contradict its shape {shape.name!r} (declare the shape alone)")
    # the hooks the engine will call must be the task's own, not Task's unimplemented defaults
    # (a plugin shape's own hook, which Task does not know, must be the task's too)
    missing = [h for h in shape.hooks if getattr(type(task), h, None) is getattr(Task, h, None)]
    if missing:
        raise bad(f"implements no {', '.join(missing)}")
    if task.needs_text and not task.zero_shot:
        raise bad("needs_text is only for zero-shot tasks")
    for key, spec in task.params.items():
        if not isinstance(spec, Param):
            raise bad(f"params[{key!r}] is not a Param")
        spec.normalise(task.name, key, spec.default)  # a default must pass its own bounds
    if not all(isinstance(m, Metric) for m in (*task.metrics, *task.train_metrics)):
        raise bad("metrics and train_metrics must hold Metric objects")
    names = [m.name for m in (*task.metrics, *task.train_metrics)]
    if not task.metrics:
        raise bad("declares no metrics")
    if len(set(names)) != len(names):
        raise bad("declares a metric name twice")
    if any(m.direction not in ("higher", "lower") for m in (*task.metrics, *task.train_metrics)):
        raise bad("a metric direction must be higher or lower")
    if task.headline not in [m.name for m in task.metrics]:
        raise bad(f"headline {task.headline!r} is not one of its metrics")


@overload
def register_task(obj: T, *, name: str | None = None) -> T: ...
@overload
def register_task(obj: None = None, *, name: str | None = None) -> Callable[[T], T]: ...


def register_task(obj: Any = None, *, name: str | None = None) -> Any:
    """Register a :class:`Task` subclass, or a function returning a :class:`Task`.

    The registered name is ``name`` when given, else the decorated object's ``__name__``.
    Names are lower-case identifiers (``[a-z][a-z0-9_]*``) so they read the same in a CLI, a
    record and a glob.

    Raises:
        UsageError: the name is taken or malformed, or the task's declaration is invalid.
    """

    def decorate(target: T) -> T:
        task_name = name if name else getattr(target, "__name__", "")
        if not _NAME.match(task_name):
            raise UsageError(
                f"task name {task_name!r} is not a lower-case identifier",
                hint="pass register_task(name='my_task')",
            )
        if task_name in BUILTIN and BUILTIN[task_name] != _module_of(target):
            _load_builtin(task_name)  # a plugin taking a built-in's name is refused, as before
        if task_name in _TASKS:
            owner = type(_TASKS[task_name]).__module__
            raise UsageError(
                f"task {task_name!r} is already registered (by {owner})",
                hint="register yours under another name: register_task(name=...)",
            )
        if isinstance(target, type):
            if not issubclass(target, Task):
                raise UsageError(f"{target.__name__} is not a vbstore.tasks.Task subclass")
            task = target()
        elif callable(target):
            task = target()
            if not isinstance(task, Task):
                raise UsageError(f"{task_name}() returned {type(task).__name__}, not a Task")
        else:
            raise UsageError(f"cannot register {target!r} as a task")
        if task.name and task.name != task_name:
            raise UsageError(
                f"{type(task).__name__} declares name {task.name!r} but registers as {task_name!r}",
                hint=f"use register_task(name={task.name!r})",
            )
        task.name = task_name
        _check_declaration(task)
        _TASKS[task_name] = task
        return target

    return decorate(obj) if obj is not None else decorate


def _module_of(target: Any) -> str:
    """The name of the module of this package that defines ``target``, or ''."""
    module = getattr(target, "__module__", "")
    return module.rpartition(".")[2] if module.startswith(f"{__package__}.") else ""


def _load_builtin(name: str) -> None:
    if name not in _TASKS:
        importlib.import_module(f".{BUILTIN[name]}", __package__)


def _load_all() -> None:
    for name in BUILTIN:
        _load_builtin(name)


def get_task(name: str) -> Task:
    """The registered task called ``name``.

    Raises:
        UnknownTask: no task has that name (the message suggests the closest).
    """
    task = _TASKS.get(name)
    if task is None and name in BUILTIN:
        _load_builtin(name)
        task = _TASKS.get(name)
    if task is None:
        names = sorted({*_TASKS, *BUILTIN})
        import difflib  # a suggestion, on the error path only

        # names are lower case: KNN means knn
        same = [n for n in names if n == str(name).lower()]
        raise UnknownTask(name, same or difflib.get_close_matches(str(name).lower(), names, n=1))
    return task


def list_tasks(pattern: str = "*", *, shapes: Collection[str] | None = None,
               reads: str | None = None) -> list[str]:
    """Sorted names of the registered tasks matching the fnmatch ``pattern``; given ``shapes``,
    of one of those probe shapes; given ``reads``, made for data of that target kind (a task
    that reads any data, from the pixels alone, is not)."""
    _load_all()
    return sorted(n for n in _TASKS if fnmatch.fnmatchcase(n, pattern)
                  and (shapes is None or _TASKS[n].shape_spec.name in shapes)
                  and (reads is None or _made_for(get_target_kind(_TASKS[n].target_kind), reads)))


def _made_for(kind: Any, data_kind: str) -> bool:
    return "*" not in kind.also_reads and data_kind in kind.reads_strictly()


def metric_order(task: str, params: Mapping[str, Any] | None = None) -> list[str]:
    """The metric names ``task`` declares (under ``params``, a record's: see
    ``Task.metrics_for``), in its order; none for a task no longer registered."""
    known = task in _TASKS or task in BUILTIN
    return [m.name for m in get_task(task).metrics_for(params or {})] if known else []


def ordered_metrics(task: str, metrics: Mapping[str, Any],
                    params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``metrics`` in the order ``task`` declares them under ``params`` (records store keys
    sorted).

    A task no longer registered keeps the stored order.
    """
    rank = {name: i for i, name in enumerate(metric_order(task, params))}
    return dict(sorted(metrics.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
