"""A suite drives its runs: ``get result --suite S@V`` scores a checkpoint the suite's way.

The suite names the task, every task parameter and the settings it pins; the caller names the
backbone (and the data where the suite's lives elsewhere, and the training data). Whatever the
caller also gives must agree with the suite: a value that contradicts it (``-p k=20`` on a
suite pinning ``k=5``) is refused, naming both, before a manifest is stored or a model built,
because a run made that way would be recorded as an attempt the suite cannot rank. Every
condition is planned before any is computed, so data one condition cannot use (checked at plan
time, vbstore.engine._datachecks) stops the run before the first feature is extracted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data import SOURCES, decode_once
from ..engine import execute, plan, result_request, store_param_files
from ..errors import UsageError, field_ref
from ..records import ManifestRecord
from ..store import Store
from ..tasks import get_task
from ._board import leaderboard
from ._evaluate import Evaluation, conditions_to_compute, from_results, record
from ._new import condition_source
from ._settings import content_sha256, pin_value, show
from ._suite import Suite, get_suite
from ._verdict import UNTRAINED, same_task, task_name

# the settings a request can set, as (setting, argument of get_result, flag of get result)
_ARGUMENTS = (
    ("layers", "layers", field_ref("layers")),
    ("pooling", "pooling", field_ref("pooling")),
    ("input_size", "input_size", field_ref("input_size")),
    ("precision", "precision", field_ref("precision")),
    ("seeds", "seeds", field_ref("seeds")),
)


@dataclass(frozen=True)
class SuiteRun:
    """What ``get result --suite`` did: each condition's plan, and unless it was a dry run,
    its result, the evaluation recorded and the checkpoint's place on the suite's board."""

    suite: Suite
    plans: dict[str, Any]
    results: dict[str, Any] = field(default_factory=dict)
    evaluation: Evaluation | None = None
    place: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        if self.evaluation is None:
            return {"suite": self.suite.ref, "dry_run": True,
                    "conditions": {c: p.as_dict() for c, p in self.plans.items()}}
        return {
            **self.evaluation.as_dict(),
            "condition_results": {c: r.as_dict() for c, r in self.results.items()},
            "place": self.place,
        }


def suite_arguments(suite: Suite, given: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`vbstore.engine.result_request` the suite sets: its task,
    its parameters and the settings it pins, with what the caller ``given`` added where the
    suite leaves it open.

    ``given`` holds only what the caller chose (``task``, ``params``, ``layers``, ``pooling``,
    ``input_size``, ``precision``, ``seeds``, ``finetune_blocks``, ``backbone_lr``,
    ``weights``); a key left out is the suite's.

    Raises:
        UsageError: a given value that contradicts the suite, naming both; a suite made under
            another version of the task's numbers (op_version).
        UnknownTask: the suite's task is not registered here.
    """
    ref = suite.ref
    pinned_task = task_name(suite.protocol["task"])
    asked = given.get("task")
    if asked is not None and not same_task(asked, pinned_task):
        raise UsageError(f"{field_ref('task', asked)} contradicts {ref}, whose task is "
                         f"{pinned_task}",
                         hint=f"drop {field_ref('task')}: {ref} sets it")
    task = get_task(pinned_task)
    settings = suite.settings
    if "op_version" in settings and settings["op_version"] != task.op_version:
        raise UsageError(
            f"{ref} pins {pinned_task} op_version {settings['op_version']}; this vbstore "
            f"computes op_version {task.op_version}, which it could not rank",
            hint=f"use the vbstore version {ref} was made with, or a suite made now "
                 "(vbstore suite new)")
    params = _params(suite, task, dict(given.get("params") or {}))
    out: dict[str, Any] = {"task": pinned_task, "params": params}
    for setting, argument, flag in _ARGUMENTS:
        value = given.get(argument)
        if setting in settings:
            pinned = settings[setting]
            if value is not None and not _same(value, pinned):
                raise UsageError(f"{flag} {show(value)} contradicts {ref}, which pins "
                                 f"{setting}={show(pinned)}", hint=f"drop {flag}: {ref} sets it")
            value = _as_argument(setting, pinned)
        if value is not None:
            out[argument] = value
    out.update(_finetune(suite, given))
    # untrained weights on a pretrained suite are not refused: they are the baselines a board
    # shows below its ranked rows (weights(random)), evaluated on purpose
    weights = given.get("weights")
    if weights is not None:
        out["weights"] = weights
    return out


def _as_argument(setting: str, pinned: Any) -> Any:
    """A pinned value as get_result takes it: ``layers`` is a list (a suite may pin ``-1``)."""
    if setting == "layers":
        return list(pinned) if isinstance(pinned, (list, tuple)) else [pinned]
    return pinned


def _params(suite: Suite, task, given: dict[str, Any]) -> dict[str, Any]:
    """The task parameters to request: the suite's where it pins them (only those off their
    default are passed, so the data checks treat the rest as a plain run does), the caller's
    where it leaves them open.

    Raises:
        UsageError: a given parameter that contradicts the suite's, naming both values.
    """
    pinned = suite.params
    for key, value in sorted(given.items()):
        if key in pinned and not _same(task.resolve_params({key: value})[key], pinned[key]):
            raise UsageError(
                f"{field_ref('param:' + key, show(value))} contradicts {suite.ref}, which pins "
                f"{key}={show(pinned[key])}",
                hint=f"drop {field_ref('param:' + key)}: {suite.ref} sets it")
    declared = task.params  # a parameter this vbstore's task no longer has: the verdict's
    own = {k: v for k, v in pinned.items()
           if k in declared and not _same(v, declared[k].default)}
    return {**given, **own}


def _finetune(suite: Suite, given: Mapping[str, Any]) -> dict[str, Any]:
    """``finetune_blocks`` and ``backbone_lr`` as the suite pins ``finetune`` (null: frozen).

    Raises:
        UsageError: a given value that contradicts the pin.
    """
    blocks, lr = given.get("finetune_blocks"), given.get("backbone_lr")
    if "finetune" not in suite.settings:
        return {k: v for k, v in (("finetune_blocks", blocks), ("backbone_lr", lr))
                if v is not None}
    pinned = pin_value("finetune", suite.settings["finetune"]) or {}
    want_blocks, want_lr = pinned.get("blocks", 0), pinned.get("backbone_lr")
    shown = show(pinned or None)
    if blocks is not None and blocks != want_blocks:
        raise UsageError(f"{field_ref('finetune_blocks', blocks)} contradicts {suite.ref}, "
                         "which pins "
                         f"finetune={shown}", hint=f"drop {field_ref('finetune_blocks')}: "
                                                   f"{suite.ref} sets it")
    if lr is not None and (want_lr is None or not math.isclose(lr, want_lr)):
        raise UsageError(f"{field_ref('backbone_lr', lr)} contradicts {suite.ref}, which pins "
                         f"finetune={shown}", hint=f"drop {field_ref('backbone_lr')}: "
                                                   f"{suite.ref} sets it")
    return {"finetune_blocks": want_blocks,
            **({"backbone_lr": want_lr} if want_lr is not None else {})}


def _same(a: Any, b: Any) -> bool:
    """Equal however written: ``-1`` and ``[-1]``, ``5`` and ``5.0``."""
    def norm(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return norm(value[0]) if len(value) == 1 else [norm(v) for v in value]
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value
    return norm(a) == norm(b)


def suite_data(suite: Suite, data: Any) -> Any:
    """Where the suite's samples are: ``data`` when given, else the data the suite was made
    from, when it can be read here (a named source, or a folder that exists).

    Raises:
        UsageError: the suite's data is not here, naming what to give.
    """
    if data is not None:
        return data
    label = str((suite.protocol.get("data") or {}).get("label") or "")
    # a source by name: NAME:... (sklearn:digits, scenes:size=32) or a bare generated one (shapes)
    named = ((":" in label and not Path(label).exists() and len(label.partition(":")[0]) > 1)
             or label in SOURCES)
    if label and (named or Path(label).exists()):
        return label
    raise UsageError(
        f"{suite.ref}'s data ({label or 'unnamed'}) is not on this machine",
        hint=f"give {field_ref('data')}: where its samples are here (the suite checks they are "
             "the same)")


# get_result's keywords that the suite decides (a value given must agree with it), and those
# execute takes; every other one (train_data, train_split, limit, seed, data_options...) is the
# request's
DECIDED = ("task", "params", "layers", "pooling", "input_size", "precision", "seeds",
           "finetune_blocks", "backbone_lr", "weights")
RUN = ("device", "progress", "recompute", "executor", "batch_size")


def run_suite(store: Store, suite_ref: str, backbone: Any, *, data: Any = None,
              dry_run: bool = False, **arguments: Any) -> SuiteRun:
    """Score ``backbone`` on every condition of the suite, the suite's way, and record the
    evaluation.

    ``arguments`` are :func:`vbstore.get_result`'s keywords. What the suite decides (``task``,
    ``params``, ``layers``, ``pooling``, ``input_size``, ``precision``, ``seeds``,
    ``finetune_blocks``, ``backbone_lr``) is the suite's when left out, and checked against it
    when given (see :func:`suite_arguments`); the rest (``train_data``, ``train_split``,
    ``limit``, ``seed``, ``weights``, ``data_options``, ``notes``, ``device``, ``progress``...)
    is passed on; ``split`` is refused (the suite names each condition's). ``data`` defaults to
    the suite's (:func:`suite_data`). Every condition is planned before one is computed; with
    ``dry_run`` nothing is computed or recorded and the plans are returned.

    ```python
    done = vbstore.run_suite(store, "tex-knn@1", "efficientnet_lite0",
                             train_data="tex/", train_split="train")
    done.evaluation.verdict["state"], done.place["rank"]
    ```

    Raises:
        UsageError: a given value that contradicts the suite (both named), a split given,
            the suite's data not here, training data other than the manifest the suite pins,
            data whose samples are not the suite's; whatever planning refuses.
        SuiteNotFound: no such suite.
        TypeError: a keyword get_result does not take.
    """
    suite = get_suite(store, suite_ref)
    if arguments.get("split") is not None:
        raise UsageError(f"{field_ref('split')} and --suite both say where the samples are",
                         hint=f"drop {field_ref('split')}: {suite.ref} names each condition's "
                              "split")
    arguments.pop("split", None)
    chosen = {k: arguments.pop(k) for k in DECIDED if k in arguments}
    given = {k: v for k, v in chosen.items() if v is not None}  # None: the suite's
    run = {k: arguments.pop(k) for k in RUN if k in arguments}
    if given.get("params"):  # a file parameter (templates...) compares by content, as pinned
        given["params"] = store_param_files(
            store, get_task(task_name(suite.protocol["task"])), given["params"])
    settings = suite_arguments(suite, given)
    source = suite_data(suite, data)
    task = settings.pop("task")
    train_data = arguments.pop("train_data", None)
    plans = {}
    # one request: an image the plans' manifests decode is decoded once, for its extraction
    with decode_once():
        for condition, where in conditions_to_compute(suite):
            eval_data, split = condition_source(source, where)
            asked = result_request(backbone, task, eval_data, train_data, split=split,
                                   **settings, **arguments)
            plans[condition] = plan(asked, store, dry_run=dry_run)
            _check_train_data(suite, plans[condition])
        _check_content(suite, source, plans)
        if "weights" not in given:
            _check_weights(suite, backbone, plans)
        if dry_run:
            return SuiteRun(suite, plans)
        results = {c: execute(p, **run) for c, p in plans.items()}
    evaluation = record(store, from_results(store, suite, {c: r.id for c, r in results.items()}))
    return SuiteRun(suite, plans, results, evaluation, board_place(store, suite, evaluation))


def _check_train_data(suite: Suite, planned) -> None:
    """Refuse training data other than the manifest the suite pins (``train_data``), before
    anything is computed.

    Raises:
        UsageError: naming both manifests.
    """
    pinned = suite.settings.get("train_data")
    if pinned is None or planned.train_m is None or planned.train_m.id == pinned:
        return
    raise UsageError(
        f"the training data given is manifest {show(planned.train_m.id)}; {suite.ref} pins "
        f"train_data={show(pinned)}",
        hint=f"give the {field_ref('train_data')} and {field_ref('train_split')} the suite was "
             "made with")


def _check_weights(suite: Suite, backbone: Any, plans: Mapping[str, Any]) -> None:
    """Refuse a backbone's default weights when they are trained and the suite ranks untrained
    ones (``weights: random``): nothing asked for them, and they could not rank. Weights given
    on purpose are judged by the verdict (a baseline on the other kind of board).

    Raises:
        UsageError: naming the weights and the fix.
    """
    if suite.weights != "random":
        return
    for planned in plans.values():
        if planned.ref is None:  # a dry run that could not name the backbone
            continue
        origin = planned.ref.weights_origin
        if origin not in UNTRAINED:
            raise UsageError(
                f"{backbone}'s default weights are {origin}; {suite.ref} ranks untrained "
                "weights (random or fixed)",
                hint=f"give {field_ref('weights', 'random')} (or "
                     f"{field_ref('weights', 'default')} to "
                     "evaluate these on purpose:"
                     " they will not rank)")


def _check_content(suite: Suite, source: Any, plans: Mapping[str, Any]) -> None:
    """Refuse data whose samples are not those the suite pins (its ``contentSha256``, what
    ``suite new`` hashed), before anything is extracted: the verdict would say
    ``data-mismatch(content)`` after the computation.

    Raises:
        UsageError: naming the data and where the suite's came from.
    """
    pinned = suite.extension.get("contentSha256")
    if not pinned:
        return
    manifests = {}
    for condition, planned in plans.items():
        manifest = ManifestRecord.from_dict(planned.eval_m.doc)
        manifests[condition] = (manifest.split, manifest)
    if content_sha256(manifests) == pinned:
        return
    label = (suite.protocol.get("data") or {}).get("label") or "unnamed"
    raise UsageError(
        f"the samples of {source} are not those {suite.ref} pins (data-mismatch(content)): "
        f"other files, pixels, labels or a {field_ref('limit')}",
        hint=f"give the data {suite.ref} was made from ({label}), all of it")


def board_place(store: Store, suite: Suite, evaluation: Evaluation) -> dict[str, Any]:
    """Where the evaluation's checkpoint stands on the suite's board: ``rank`` of ``ranked``
    rows (None when its row does not rank), its ``attempts``, and the board's ``baseline``."""
    board = leaderboard(store, suite.ref)
    mine = next((r for r in board.rows if r["evaluation"] == evaluation.id), None)
    other = next((r for r in board.unranked if r["evaluation"] == evaluation.id), None)
    row = mine or other or {}
    return {
        "suite": suite.ref,
        "rank": mine["rank"] if mine else None,
        "ranked": len(board.rows),
        "attempts": row.get("attempts", 1),
        "label": row.get("label", evaluation.record.checkpoint["label"]),
        "headline": suite.headline["key"],
        "baseline": (board.baseline or {}).get("headline"),
    }


__all__ = ["SuiteRun", "board_place", "run_suite", "suite_arguments", "suite_data"]
