"""A task meets its data: the kind of targets it declares against the kind a split holds.

Checked on the split's listing, before a file is hashed, a backbone built or anything stored, so
``semantic_segmentation`` on depth maps is refused as that, with the target or the task that
fits, rather than as the ``num_classes`` it then lacks or a loss over millimetres.
"""

from __future__ import annotations

from typing import Any

from ..data import KIND_NAMES, TargetsSeen, list_split
from ..errors import UsageError, VbstoreError
from ..tasks import Task, get_task, list_tasks

# the data kinds a task kind reads besides its own
_ALSO = {
    "multi_hot": ("class_index",),  # a single-label split is a one-hot multi-label one
    "instances": ("boxes",),  # box files that name their instance masks (COCO, scenes)
}


def reads(task_kind: str, data_kind: str) -> bool:
    """Whether a task declaring ``task_kind`` reads targets of ``data_kind``."""
    return task_kind == "image" or data_kind in (task_kind, *_ALSO.get(task_kind, ()))


def check_targets(task: Task, seen: TargetsSeen, flag: str) -> None:
    """Refuse a split whose targets are not of the kind ``task`` declares.

    A target type vbstore does not know (``seen.kind`` None) is not judged.

    Raises:
        UsageError: the kinds differ; the hint names the ``--target`` folders of the data that
            fit, and the tasks made for the data's kind.
    """
    if seen.kind is None or reads(task.target_kind, seen.kind):
        return
    need = KIND_NAMES.get(task.target_kind, task.target_kind)
    have = KIND_NAMES.get(seen.kind, seen.kind).split(" (")[0]
    picks = [f"--target {name}" for name, kind in seen.folders.items()
             if kind is not None and kind != "image" and reads(task.target_kind, kind)]
    fits = [name for name in list_tasks()
            if get_task(name).target_kind != "image" and reads(get_task(name).target_kind,
                                                               seen.kind)]
    ways = []
    if picks:
        ways.append(f"read its {need.split(' (')[0]} with {' or '.join(picks)}")
    if fits:
        ways.append(f"run a task made for {have}: {', '.join(fits)}")
    raise UsageError(
        f"task {task.name!r} needs {need} as targets, but the targets of {flag} are {have} "
        f"({seen.target_type})",
        hint=", or ".join(ways) or "see what each task reads with: vbstore list tasks",
    )


def explain_mismatch(store, task: Task, data: Any, flag: str, options: dict[str, Any]) -> None:
    """Raise :func:`check_targets`' error when ``data`` (a ``DataRef``) does not fit ``task``.

    Reads the listing alone (nothing is hashed or stored). A data problem is left for
    ``load_manifest`` to report, with its flags.
    """
    try:
        seen = list_split(store, data.source, split=data.split, **options).targets
    except VbstoreError:
        return
    check_targets(task, seen, flag)
