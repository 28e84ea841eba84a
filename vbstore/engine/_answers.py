"""What a stored result's answer read, for the store's answer cache (``vbstore.store._answers``).

A plan knows which data folders its manifests were listed from, which files they named and
which checkpoint its backbone hashed; the store records their states with the answer, so a
repeated request is answered while none of them changed. Only what a plan can vouch for
qualifies: a head given by name (a ref that can move), a task parameter naming a file, data
from a list file or a remote source, layout options naming files, or a table naming files
beside its folder leave the answer unrecorded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..data import local_folder
from ._plan import Plan
from ._requests import ResultRequest

# the options a data reference may take and stay answerable: none of them names a file
_PLAIN_OPTIONS = frozenset({"layout", "target", "target_type"})


@dataclass(frozen=True)
class AnswerInputs:
    """What ``store.answers.record`` needs to know of a plan's answer.

    Attributes:
        folders: Each data folder (absolute, through any link given) with the states its
            listing took already, by name under it.
        samples: How many samples the answer read.
        used: The ids the plan resolved (backbone, manifests).
        files: Other files it read: a checkpoint given as ``--weights``.
    """

    folders: dict[str, dict[str, tuple[int, ...]]]
    samples: int
    used: frozenset[str]
    files: frozenset[str]


def answer_inputs(the_plan: Plan) -> AnswerInputs | None:
    """The inputs of ``the_plan``'s answer, or None when they cannot all be named."""
    request = the_plan.request
    if request.probe.head is not None or the_plan.task_params != request.probe.resolved_params():
        return None  # a given head is a ref that can move; a file parameter is read from a file
    roots = _data_roots(the_plan)
    if roots is None:
        return None
    alias = the_plan.ref.alias if the_plan.ref is not None else None
    files = ({os.path.join(os.getcwd(), os.path.expanduser(request.backbone.weights))}
             if alias is not None and alias["params"].get("checkpoint") else set())
    views = (the_plan.eval_m, the_plan.train_m)
    return AnswerInputs(
        folders={root: _listed(root, in_root) for root, in_root in roots.items()},
        samples=sum(len(m) for m in views if m is not None),
        used=frozenset(m.id for m in (the_plan.ref, *views) if m is not None),
        files=frozenset(files),
    )


def _data_roots(the_plan: Plan) -> dict[str, list[Any]] | None:
    """The folders every file of the plan's data lies in, each with the views of the plan whose
    files lie in it; None when that cannot be said."""
    roots: dict[str, list[Any]] = {}
    request = the_plan.request
    if not isinstance(request, ResultRequest):  # only a result's answer is cached
        return None
    for ref, view in ((request.data, the_plan.eval_m), (request.train, the_plan.train_m)):
        if ref is None or view is None:
            continue
        if {k for k, v in ref.options.items() if v not in (None, False)} - _PLAIN_OPTIONS:
            return None
        folder = local_folder(the_plan.store, ref.source)
        if folder is None:
            return None
        # the names as listed (or, for a view not listed here, as the manifest holds them)
        names = view.files[0] if view.files is not None else (
            n for s in view.samples for n in (s["name"], s.get("target_name")) if n)
        listing = "\0".join(names)
        if ".." in listing and any(".." in name.split("/") for name in listing.split("\0")):
            return None  # a table naming files beside its folder (pairs.csv can)
        # a folder given through a link is statted through it, as the full command resolves it
        # afresh each time: the link pointed elsewhere changes the root's own state
        given = os.path.join(os.getcwd(), os.path.expanduser(ref.source))  # `link/..` kept
        roots.setdefault(given if os.path.realpath(given) == str(folder) else str(folder),
                         []).append(view)
    return dict(sorted(roots.items()))


def _listed(root: str, views: list[Any]) -> dict[str, tuple[int, ...]]:
    """The states the views' listings took of their files, by name under ``root`` (a view's
    folder is ``root`` or a folder in it: a split's)."""
    top = os.path.realpath(root)
    known: dict[str, tuple[int, ...]] = {}
    for view in views:
        if view is None or view.files is None:
            continue
        base = str(view.root)
        if base == top:
            prefix = ""
        elif base.startswith(top + os.sep):
            prefix = base[len(top) + 1:] + "/"
        else:
            continue
        names, numbers = view.files
        fives = zip(*[iter(numbers)] * 5, strict=True)
        known.update(zip([prefix + n for n in names], fives, strict=True))
    return known
