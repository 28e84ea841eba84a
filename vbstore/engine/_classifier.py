"""``--save_clf``: the zero-shot classifier a result scores with, written as CLIP_benchmark
writes it.

CLIP_benchmark 1.6.2's ``--save_clf FILE`` is ``torch.save(classifier, FILE)``, the classifier
being the ``(D, C)`` class-embedding matrix of the text tower (or the average of the loaded
ones: ``--load_clfs``). Here the classifier is made from the plan's task parameters through
the stored text-tower outputs (:mod:`._textcache`): for a stored result the text tower runs
only if its outputs were collected since. Writing the file changes no id: it is an output of
the request, like ``--results``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..tasks import Task, get_task

# Local imports: torch and the compute path (the task's classifier code, the runners) load
# inside the functions that make or write a classifier, not with the engine's names.


def check_saves_classifier(task: Task | str) -> None:
    """Refuse ``--save_clf`` for a task that scores no zero-shot classifier.

    Raises:
        UsageError: naming the tasks that have one.
    """
    task = get_task(task) if isinstance(task, str) else task
    if "load_clfs" not in task.params:
        raise UsageError(f"--save-clf saves a zero-shot classifier; task {task.name!r} scores "
                         "with none",
                         hint="use it with zeroshot_classification or zeroshot_multilabel "
                              "(CLIP_benchmark's --save_clf)")


def zero_shot_classifier(plan: Any) -> Any:
    """The ``(D, C)`` float32 CPU classifier of ``plan``'s zero-shot result (CLIP_benchmark's
    ``zero_shot_classifier``, or the average of ``load_clfs``).

    Raises:
        UsageError: the plan's task scores no classifier; the plan has no backbone yet (a dry
            run's of a backbone never seen).
    """
    from ..tasks.zeroshot_classification import saved_classifier
    from ._requests import param_files
    from ._runners import ZeroShotRunner, runner_for

    check_saves_classifier(plan.task)
    runner = runner_for(plan.task)
    assert isinstance(runner, ZeroShotRunner)  # the tasks with load_clfs score zero-shot
    if plan.backbone is None:
        raise UsageError("the classifier needs the backbone, and a dry run does not build it",
                         hint="drop --dry-run")
    files = param_files(plan.store, plan.task, plan.task_params)
    context = runner.context(plan, files)
    dim = int(plan.backbone.doc["geometry"]["embed_dim"])
    return saved_classifier(plan.task.resolve_params(plan.task_params), context,
                            list(plan.eval_m.classes), dim)


def save_classifier(plan: Any, path: str | Path) -> Path:
    """Write ``plan``'s classifier to ``path`` with ``torch.save``, the bytes CLIP_benchmark's
    ``--save_clf`` writes and its ``--load_clfs`` reads (written whole: saved in a temp folder
    beside it, then renamed). Returns the path.

    Raises:
        UsageError: see :func:`zero_shot_classifier`; a folder that cannot be written.
    """
    import torch

    target = Path(path).expanduser()
    tensor = zero_shot_classifier(plan)
    if target.is_dir():
        raise UsageError(f"--save-clf {path} is a folder", hint="name a file, e.g. clf.pt")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # saved under its own name in a temp folder beside it: torch names the archive inside
        # after the file, so the bytes are those torch.save(classifier, path) writes
        folder = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
        try:
            temp = folder / target.name
            torch.save(tensor, temp)
            with open(temp, "rb") as written:
                os.fsync(written.fileno())
            os.replace(temp, target)
        finally:
            for left in folder.iterdir():
                left.unlink()
            folder.rmdir()
    except OSError as exc:
        raise UsageError(f"--save-clf {path}: {exc.strerror or exc}",
                         hint="name a file in a folder you can write") from None
    return target
