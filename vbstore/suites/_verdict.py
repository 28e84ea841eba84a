"""Verdicts: whether an evaluation can be ranked on its suite, and if not, exactly why.

Pure functions of an evaluation document and its suite, so the same evidence always gets the
same verdict. ``incompatible`` means the numbers measure something else (other data, another
protocol, random or fixed weights on a pretrained board); ``incomplete`` means part of the
measurement is missing (a condition, a sample count). Every reason is named; the evaluation is
kept either way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidScores
from ._settings import compare, show
from ._suite import Suite

EVIDENCE_FIELDS = ("data", "protocol", "evaluator")
# every evidence level an evaluation can have (the schema's enum; a test keeps them equal)
EVIDENCE_LEVELS = ("attested", "observed", "reported")
# weights nothing was trained into: seeded random inits and fixed ones (set by construction, e.g.
# test_pixels' filter bank). They are baselines: ranked on a random-weights suite, beside each
# other with their kind shown, and never on a pretrained one
UNTRAINED = ("random", "fixed")
_VERSION_PART = re.compile(r"^(\d+)")


def evidence_of(doc: dict[str, Any]) -> tuple[str, list[str]]:
    """``observed`` when data, protocol and evaluator are all known, else ``reported`` with what is
    missing; ``attested`` when a maintainer promoted it."""
    missing = [name for name in EVIDENCE_FIELDS if not doc.get(name)]
    if doc.get("promoted_from"):
        return "attested", missing
    return ("reported" if missing else "observed"), missing


def judge(suite: Suite, doc: dict[str, Any]) -> dict[str, Any]:
    """The verdict: ``{"state", "reasons", "ranked", "scores", "checked", "variant"}``.

    ``scores`` holds the suite's metrics per condition and, when every condition has them, the
    overall figure by the suite's aggregation (the unweighted mean over conditions).
    ``checked`` says how the data was compared (``data(content)``: vbstore manifests on both
    sides, what each sample is; ``data(names)``: Visin's digest of sample names); ``variant``
    holds the settings the suite leaves open, which the board's label shows.
    """
    checked: list[str] = []
    incompatible, variant = _incompatible(suite, doc, checked)
    incomplete = _incomplete(suite, doc)
    state = "incompatible" if incompatible else "incomplete" if incomplete else "eligible"
    return {
        "state": state,
        "reasons": incompatible + incomplete,
        "ranked": state == "eligible",
        "scores": scores_of(suite, doc["results"]),
        "checked": checked,
        "variant": variant,
    }


def same_task(a: str | None, b: str | None) -> bool:
    """Visin's task names and vbstore's are aliases: ``semantic-segmentation`` is
    ``semantic_segmentation``."""
    return task_name(a) == task_name(b)


def task_name(name: str | None) -> str:
    """vbstore's spelling of a task name: ``semantic-segmentation`` is ``semantic_segmentation``."""
    return str(name or "").strip().lower().replace("-", "_")


def _as_run(task: str, params: dict[str, Any]) -> dict[str, Any]:
    """A result's params as it ran: a parameter added after results of its task were stored is
    left out of them at its default (``Task.keyed_params``), so it reads back as that default."""
    # the errors and the task registry (no torch): read only for a result's params
    from ..errors import UnknownTask
    from ..tasks import get_task

    try:
        declared = get_task(task_name(task)).params
    except UnknownTask:
        return params
    return {**{k: p.default for k, p in declared.items() if p.added}, **params}


def _incompatible(suite: Suite, doc: dict[str, Any], checked: list[str]
                  ) -> tuple[list[str], dict[str, Any]]:
    reasons = []
    protocol = suite.protocol
    names = {c["name"] for c in suite.conditions}
    # a partial manifest differs by construction; missing-condition already says why
    if set(doc["results"]) >= names:
        reasons += _data(suite, doc.get("data") or {}, checked)
    ran = doc.get("protocol")
    if ran:
        if ran.get("digest") and ran["digest"] != suite.digest:
            reasons.append("protocol-mismatch(digest)")
        if "task" in ran and not same_task(ran.get("task"), protocol["task"]):
            reasons.append(f"protocol-mismatch: task({ran.get('task')} != {protocol['task']})")
        if "params" in ran or "task" in ran:  # evidence that names what it ran
            params = _as_run(protocol["task"], ran.get("params") or {})
            # both values named: ``protocol-mismatch: k(20 != 5)``, what ran and what is pinned
            reasons += [
                f"protocol-mismatch: {key}({show(params.get(key))} != {show(value)})"
                for key, value in sorted(suite.params.items())
                if params.get(key) != value
            ]
    setting_reasons, variant = compare(suite.settings, suite.params, doc.get("settings"))
    reasons += setting_reasons
    reasons += _classes(protocol.get("classes"), doc.get("classes"))
    present = [c for c in suite.conditions if c["name"] in doc["results"]]
    for metric in suite.metrics:
        if any(metric["key"] not in _overall(doc["results"][c["name"]]) for c in present):
            reasons.append(f"metric-missing({metric['key']})")
    weights = doc["checkpoint"]["weights"]
    wanted = suite.weights
    if wanted == "pretrained" and weights in UNTRAINED:
        reasons.append(f"weights({weights})")
    elif wanted == "random" and weights not in UNTRAINED:
        reasons.append(f"weights({weights})")
    if doc.get("comparable") is False:
        reasons.append("not-comparable(--no-strict)")
    evaluator = doc.get("evaluator")
    wanted_evaluator = protocol.get("evaluator")
    if evaluator and wanted_evaluator:
        if evaluator.get("package") != wanted_evaluator["package"]:
            reasons.append(f"evaluator({evaluator.get('package')}!={wanted_evaluator['package']})")
        elif wanted_evaluator.get("minVersion") and version_tuple(
            evaluator.get("version", "")
        ) < version_tuple(wanted_evaluator["minVersion"]):
            reasons.append(
                f"evaluator({wanted_evaluator['package']}<{wanted_evaluator['minVersion']})"
            )
    return reasons, variant


# Visin's data kinds and the fields that identify the data of each; vbstore's own manifests
# are external data to Visin (suites written before said ``vbstore``)
_DATA_IDENTITY = {"external": ("manifestSha256",), "hf": ("repo", "commit"),
                  "visin": ("archiveSha256",)}


def _data(suite: Suite, data: dict[str, Any], checked: list[str]) -> list[str]:
    """Data identity: the content of vbstore manifests where both sides have it, else the
    identity Visin's data kind names (sample names for ``external``)."""
    pinned_content = suite.extension.get("contentSha256")
    if pinned_content and data.get("contentSha256"):
        checked.append("data(content)")
        return [] if data["contentSha256"] == pinned_content else ["data-mismatch(content)"]
    pinned = suite.protocol["data"]
    kind = _kind(pinned.get("kind"))
    if not data or kind not in _DATA_IDENTITY:
        return []
    fields = [f for f in _DATA_IDENTITY[kind] if pinned.get(f)]
    if not fields:
        return []
    given_kind = _kind(data.get("kind", kind))
    if given_kind != kind:
        checked.append("data(kind)")
        return [f"data-mismatch(kind: {given_kind} != {kind})"]
    compared = [f for f in fields if data.get(f)]
    if not compared:
        return []
    checked.append("data(names)" if kind == "external" else f"data({kind})")
    return [f"data-mismatch({f})" for f in compared if data[f] != pinned[f]]


def _kind(kind: Any) -> str:
    return "external" if kind in (None, "vbstore") else str(kind)


def _classes(pinned: dict[str, Any] | None, given: dict[str, Any] | None) -> list[str]:
    """Visin's classes check: the classes scored and ignored, compared when both sides say."""
    if not pinned or not given:
        return []
    return [
        f"classes({part})"
        for part in ("scored", "ignored")
        if sorted(map(str, pinned.get(part) or [])) != sorted(map(str, given.get(part) or []))
    ]


def _incomplete(suite: Suite, doc: dict[str, Any]) -> list[str]:
    reasons = []
    counts = doc.get("sample_counts") or {}
    for condition in suite.conditions:
        name = condition["name"]
        if name not in doc["results"]:
            reasons.append(f"missing-condition({name})")
        elif name not in counts:
            reasons.append(f"sample-count({name}: unknown)")
        elif counts[name] != condition["sampleCount"]:
            reasons.append(f"sample-count({name}: {counts[name]} != {condition['sampleCount']})")
    return reasons


def _overall(block: dict[str, Any]) -> dict[str, Any]:
    """The class-independent metrics of one condition (Visin's ``overall`` class)."""
    return block.get("overall", {})


def scores_of(suite: Suite, results: dict[str, Any]) -> dict[str, Any]:
    """``{"conditions": {name: {metric: value}}, "overall": {metric: mean}}`` of suite metrics."""
    keys = [m["key"] for m in suite.metrics]
    conditions = {}
    for condition in suite.conditions:
        block = _overall(results.get(condition["name"], {}))
        values = {k: block[k] for k in keys if isinstance(block.get(k), (int, float))}
        if values:
            conditions[condition["name"]] = values
    overall = {}
    for key in keys:
        per_condition = [conditions.get(c["name"], {}).get(key) for c in suite.conditions]
        present = [v for v in per_condition if v is not None]
        if len(present) == len(per_condition):
            overall[key] = sum(present) / len(present)
    return {"conditions": conditions, "overall": overall}


def version_tuple(text: str) -> tuple[int, ...]:
    """``(0, 3, 1)`` from ``"0.3.1"``; parts after the first non-numeric one are ignored."""
    parts = []
    for part in str(text).split("."):
        match = _VERSION_PART.match(part)
        if not match:
            break
        parts.append(int(match.group(1)))
        if match.group(1) != part:
            break
    return tuple(parts)


def score_problems(suite: Suite, results: Mapping[str, Any]) -> list[str]:
    """What is wrong with the numbers of ``results`` (condition → class → metric): a score
    that is not a finite number, or a suite metric outside the suite's ``range``.

    The one rule ``evaluate``, ``import results`` and a board pull apply.
    """
    ranges = {m["key"]: m["range"] for m in suite.metrics if isinstance(m.get("range"), dict)}
    problems = []
    for condition, classes in results.items():
        if not isinstance(classes, Mapping):
            continue
        for name, metrics in classes.items():
            if not isinstance(metrics, Mapping):
                continue
            where = condition if name == "overall" else f"{condition}/{name}"
            for key, value in metrics.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                if isinstance(value, float) and not math.isfinite(value):
                    problems.append(f"{where} {key} is {value}, not a finite number")
                    continue
                bounds = ranges.get(key)
                if bounds is None:
                    continue
                low, high = bounds.get("min", -math.inf), bounds.get("max", math.inf)
                if not low <= value <= high:
                    problems.append(f"{where} {key} is {short_repr(value)}, outside the suite's "
                                    f"range [{low}, {high}]")
    return problems


def check_scores(suite: Suite, results: Mapping[str, Any]) -> None:
    """Refuse ``results`` that :func:`score_problems` finds fault with.

    Raises:
        InvalidScores: a non-finite score or one outside its metric's range.
    """
    problems = score_problems(suite, results)
    if problems:
        raise InvalidScores(suite.ref, problems)


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 5,000-digit number stays one line)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**60 else "a huge number"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def per_class(metrics: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Visin's class → metric block of one condition from a result's metrics: the numbers under
    ``overall``, and a metric given per class (``{"iou": {"road": 0.8, ...}}``) under each
    class."""
    out: dict[str, dict[str, float]] = {"overall": _numbers(metrics)}
    for metric, value in metrics.items():
        if isinstance(value, Mapping) and value and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()
        ):
            for name, number in value.items():
                if name != "overall":
                    out.setdefault(str(name), {})[metric] = number
    return out


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {
        k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
