"""Which numbers a chart shows: one bar per stored result, with its seed interval.

A bar's value is the metric's mean over seeds and its interval the bootstrap 95% CI the
result recorded (a single-seed result has none). When one backbone has several results for the
chart (other limits, parameters or seed counts), the one with the most seeds is shown, then the
most recent id order, so a chart never averages incomparable runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..records import ResultRecord
from ..tasks import get_task

LEVELS = ("high", "mid", "low")


@dataclass(frozen=True)
class Bar:
    """One bar: its label, group (task level or task), metric, value and interval."""

    label: str
    group: str
    metric: str
    value: float
    low: float | None = None
    high: float | None = None
    seeds: int = 1
    result: str = ""


def _records(store) -> list[tuple[str, ResultRecord]]:
    out = []
    for info in store.ls("result"):
        if store.has(info.id):
            out.append((info.id, ResultRecord.from_dict(store.read_json(info.id))))
    return out


def _bar(oid: str, record: ResultRecord, metric: str, label: str, group: str) -> Bar | None:
    value = record.metrics.get(metric)
    if not isinstance(value, (int, float)):
        return None
    ci: dict[str, Any] = (record.aggregate or {}).get(metric) or {}
    seeds = int(ci.get("n", 1))
    low, high = (ci.get("ci_low"), ci.get("ci_high")) if seeds > 1 else (None, None)
    return Bar(label, group, metric, float(value), low, high, seeds, oid)


def _manifest(record: ResultRecord) -> str:
    return record.eval_data.get("manifest", "")


def _one_dataset(chosen: list[tuple[str, ResultRecord]], data: str | None, what: str):
    if data is not None:
        chosen = [(o, r) for o, r in chosen if _manifest(r).startswith(data)]
    manifests = sorted({_manifest(r) for _, r in chosen})
    if len(manifests) > 1:
        raise UsageError(f"{what} has results on {len(manifests)} eval datasets",
                         hint="choose one with --data MANIFEST_ID_PREFIX: "
                         + "; ".join(_described(m, [r for _, r in chosen if _manifest(r) == m])
                                     for m in manifests))
    return chosen


def _described(manifest: str, records: list[ResultRecord]) -> str:
    """A manifest id prefix with what its results say of it: split, samples and tasks."""
    evaluation = records[0].eval_data
    tasks = ", ".join(sorted({str(r.task) for r in records}))
    return (f"{manifest[:12]} ({evaluation.get('split') or 'no split'}, "
            f"{evaluation.get('samples', '?')} samples: {tasks})")


def _best(candidates: list[Bar]) -> Bar:
    return max(candidates, key=lambda b: (b.seeds, b.result))


def task_bars(store, task: str, metric: str | None = None, data: str | None = None) -> list[Bar]:
    """One bar per backbone for ``task``'s headline (or ``metric``), sorted by backbone.

    The headline is the one the results name (``Task.headline_for`` their params).

    Raises:
        UnknownTask: no such task.
        UsageError: no result of the task, results on several datasets without ``data``, or
            results naming different headlines without ``metric``.
    """
    spec = get_task(task)
    chosen = _one_dataset([(o, r) for o, r in _records(store) if r.task == task], data,
                          f"task {task}")
    if metric is None:  # the headline the results name (correspondence's follows its units)
        named = sorted({spec.headline_for(r.params) for _, r in chosen}) or [spec.headline]
        if len(named) > 1:
            raise UsageError(f"the stored {task} results name different headlines: "
                             f"{', '.join(named)}",
                             hint=f"choose one with --metric (e.g. --metric {named[0]})")
        metric = named[0]
    by_backbone: dict[str, list[Bar]] = {}
    for oid, record in chosen:
        label = record.spec or record.inputs["backbone"][:12]
        if record.weights_kind not in (None, "pretrained"):
            label += f" ({record.weights_kind})"
        bar = _bar(oid, record, metric, label, task)
        if bar is not None:
            by_backbone.setdefault(label, []).append(bar)
    if not by_backbone:
        raise UsageError(f"no stored {task} result reports {metric!r}",
                         hint="compute some with: vbstore get result -t " + task)
    return [_best(by_backbone[label]) for label in sorted(by_backbone)]


def backbone_bars(store, backbone: str, data: str | None = None) -> list[Bar]:
    """One bar per task and headline for ``backbone`` (a spec, or a backbone id prefix): each
    task's headline (the one its results name), grouped by level (high, mid, low), then by
    task name.

    Raises:
        UsageError: no result of this backbone, or results on several datasets without ``data``.
    """
    mine = [(o, r) for o, r in _records(store)
            if r.spec == backbone or r.inputs.get("backbone", "").startswith(backbone)]
    if not mine:
        raise UsageError(f"no stored result for backbone {backbone!r}",
                         hint="give its spec as `vbstore ls results` shows it")
    # one bar per task and headline: results whose params name another headline
    # (correspondence's units) are another bar, never a candidate for this one
    by_task: dict[str, list[Bar]] = {}
    for oid, record in _one_dataset(mine, data, f"backbone {backbone}"):
        task = get_task(record.task)
        headline = task.headline_for(record.params)
        bar = _bar(oid, record, headline, f"{task.name}\n{headline}", task.level)
        if bar is not None:
            by_task.setdefault(bar.label, []).append(bar)
    bars = [_best(group) for group in by_task.values()]
    return sorted(bars, key=lambda b: (LEVELS.index(b.group) if b.group in LEVELS else 3,
                                       b.label))
