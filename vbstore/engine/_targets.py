"""A task meets its data: the kind of targets it declares against the kind a split holds.

Checked on the split's listing, before a file is hashed, a backbone built or anything stored, so
``semantic_segmentation`` on depth maps is refused as that, with the target or the task that
fits, rather than as the ``num_classes`` it then lacks or a loss over millimetres.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..data import TargetsSeen, describe_kind, get_target_kind, list_split
from ..errors import UsageError, VbstoreError, field_ref
from ..tasks import Task, list_tasks


def check_targets(task: Task, seen: TargetsSeen, flag: str) -> None:
    """Refuse a split whose targets are not of the kind ``task`` declares.

    A target type vbstore does not know (``seen.kind`` None) is not judged.

    Raises:
        UsageError: the kinds differ; the hint names the ``--target`` folders of the data that
            fit, and the tasks made for the data's kind.
    """
    wanted = get_target_kind(task.target_kind)
    if seen.kind is None or wanted.reads(seen.kind):
        return
    need = wanted.description
    have = describe_kind(seen.kind).split(" (")[0]
    # a kind that reads any data (images alone) is no answer: name the ones made for it
    picks = [field_ref("target", name) for name, kind in seen.folders.items()
             if kind is not None and kind in wanted.reads_strictly()]
    fits = list_tasks(reads=seen.kind)
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


def data_options(task: Task, given: Mapping[str, Any], listed: Sequence[tuple[Any, Any, str]]
                 ) -> dict[str, Any]:
    """The data options of ``task``'s target kind (``target_scale``...) that the user did not
    give as task parameters (``given``): from each ``DataRef``'s options, else from what its
    listed data states (a dataset's ``targets.json``).

    Raises:
        UsageError: the eval and train data hold different values (one goes to the task).
    """
    out: dict[str, Any] = {}
    for name in get_target_kind(task.target_kind).option_names():
        if name in given:
            continue
        values = {flag: ref.options.get(name, listing.targets.options.get(name))
                  for ref, listing, flag in listed}
        values = {flag: v for flag, v in values.items() if v is not None}
        if len(set(values.values())) > 1:
            raise UsageError(
                f"{' and '.join(values)} state different {name} ("
                f"{', '.join(f'{flag} {v}' for flag, v in values.items())})",
                hint="one value serves both splits: pass "
                     f"{field_ref('param:' + name, 'VALUE')}")
        if values:
            out[name] = next(iter(values.values()))
    return out


def check_data_options(task: Task, params: Mapping[str, Any], stated: Mapping[str, Any],
                       listings: Sequence[Any]) -> None:
    """Refuse, before anything is stored, a split that ``task``'s target kind cannot read with
    these data options (a depth PNG with no scale to metres).

    Raises:
        UsageError: naming the option to pass.
    """
    kind = get_target_kind(task.target_kind)
    if kind.check is None:
        return
    options = {**stated, **{k: params[k] for k in kind.option_names() if k in params}}
    for listing in listings:
        kind.check(listing.target_files(), options)
