"""Verdicts: whether an evaluation can be ranked on its suite, and if not, exactly why.

Pure functions of an evaluation document and its suite, so the same evidence always gets the
same verdict. ``incompatible`` means the numbers measure something else (other data, another
protocol, random or fixed weights on a pretrained board); ``incomplete`` means part of the
measurement is missing (a condition, a sample count). Every reason is named; the evaluation is
kept either way.
"""

from __future__ import annotations

import re
from typing import Any

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
    """The verdict: ``{"state", "reasons", "ranked", "scores"}``.

    ``scores`` holds the suite's metrics per condition and, when every condition has them, the
    overall figure by the suite's aggregation (the unweighted mean over conditions).
    """
    incompatible = _incompatible(suite, doc)
    incomplete = _incomplete(suite, doc)
    state = "incompatible" if incompatible else "incomplete" if incomplete else "eligible"
    return {
        "state": state,
        "reasons": incompatible + incomplete,
        "ranked": state == "eligible",
        "scores": scores_of(suite, doc["results"]),
    }


def _incompatible(suite: Suite, doc: dict[str, Any]) -> list[str]:
    reasons = []
    protocol = suite.protocol
    data = doc.get("data") or {}
    pinned = protocol["data"].get("manifestSha256")
    given = data.get("manifestSha256")
    names = {c["name"] for c in suite.conditions}
    # a partial manifest differs by construction; missing-condition already says why
    if pinned and given and given != pinned and set(doc["results"]) >= names:
        reasons.append("data-mismatch(manifestSha256)")
    ran = doc.get("protocol")
    if ran:
        if ran.get("task") != protocol["task"]:
            reasons.append("protocol-mismatch(task)")
        params = ran.get("params") or {}
        reasons += [
            f"protocol-mismatch({key})"
            for key, value in sorted(protocol["params"].items())
            if params.get(key) != value
        ]
    present = [c for c in suite.conditions if c["name"] in doc["results"]]
    for metric in suite.metrics:
        if any(metric["key"] not in _overall(doc["results"][c["name"]]) for c in present):
            reasons.append(f"metric-missing({metric['key']})")
    weights = doc["checkpoint"]["weights"]
    wanted = protocol["weights"]
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
    return reasons


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
