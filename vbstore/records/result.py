"""The ``result`` record: metrics and everything that produced them (schemas/result.schema.json)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._base import R, Record

# 2: schema_version, dataset, dataset_params, pooling_requested, notes (VisBench's fields). A
# time is never a field: the document is hashed, and when it ran is the registry's run log.
SCHEMA_VERSION = 2

# Metric names a task used before it took its peer's name: task -> {old: new}. A record stored
# under an old name reads under the new one; its document is never rewritten (its bytes are its
# id), so ``to_dict`` of a record read this way gives back the stored document.
# retrieval: VisBench writes ``mAP`` (CLIP_benchmark's multilabel ``mean_average_precision``
# keeps its name).
RENAMED_METRICS: dict[str, dict[str, str]] = {"retrieval": {"mean_average_precision": "mAP"}}


def renamed_metrics(task: str, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics`` (a record's, or any dict keyed by metric name) under ``task``'s current
    names."""
    names = RENAMED_METRICS.get(task, {})
    return {names.get(k, k): v for k, v in metrics.items()}


def _renamed_doc(doc: Mapping[str, Any], task: str) -> dict[str, Any]:
    out = dict(doc)
    for key in ("metrics", "aggregate", "sample_ci"):
        if isinstance(out.get(key), Mapping):
            out[key] = renamed_metrics(task, out[key])
    if isinstance(out.get("per_seed"), list):
        out["per_seed"] = [renamed_metrics(task, m) if isinstance(m, Mapping) else m
                           for m in out["per_seed"]]
    baseline = out.get("baseline")
    if isinstance(baseline, Mapping):
        baseline = dict(baseline)
        if isinstance(baseline.get("metrics"), Mapping):
            baseline["metrics"] = renamed_metrics(task, baseline["metrics"])
        if baseline.get("headline") is not None:
            baseline["headline"] = RENAMED_METRICS[task].get(baseline["headline"],
                                                             baseline["headline"])
        out["baseline"] = baseline
    return out


@dataclass(frozen=True)
class ResultRecord(Record):
    """A stored result.

    Attributes:
        task, op_version, level: The task and the version of its numbers.
        params: Every task parameter (defaults filled).
        seed, seeds: The first seed and every seed run.
        metrics: Headline numbers (the mean over seeds when several ran).
        inputs: Role -> artifact id of every input (backbone, manifests, features, heads...).
        backbone: ``spec``, ``source``, ``architecture``.
        weights_kind: ``pretrained``, ``fixed`` (set by construction, nothing learned),
            ``checkpoint`` or ``random``: the weights record's origin.
        extractor: The feature settings.
        data: ``eval`` (and ``train``): manifest id, split, samples.
        versions, device, timings: Where and with what it ran.
        features_from_cache: Whether no forward pass ran.
        comparable: False when a mismatched head was applied (``--no-strict``).
        warnings, train_metrics, per_seed, aggregate, protocol: Present when they apply.
            ``aggregate`` (and ``train_aggregate`` for training metrics) is the spread over the
            seeds only (``over: "seeds"``): mean, std, min, max and a Student-t interval.
        sample_ci: Per metric, the percentile bootstrap interval over eval samples (``over:
            "eval samples"``): ``ci_low``, ``ci_high``, ``std``, ``n_boot``, ``confidence``,
            ``method``; what a reader needs to compare two backbones on one eval split
            (vbstore.tasks.bootstrap). Absent from results stored before it existed.
        sample_ci_skipped: Why no ``sample_ci`` was computed (a dense task: cost).
        baseline: The task's trivial predictor on the same eval split (``predictor``,
            ``metrics``, ``headline``, ``value``, ``margin`` = headline minus its value,
            ``beaten``), or ``skipped`` with why (vbstore.engine._baseline). Absent from
            results stored before it existed and from tasks with no constant predictor.
        schema_version: The version of this document's shape (:data:`SCHEMA_VERSION`);
            absent from records written before it (version 1).
        dataset, dataset_params: The eval data's name (a folder's or list's own name, a named
            source's) and its parameters (a source's options, layout options, limit), as
            VisBench records them. Labels: the manifest id in ``data`` is the data's identity.
        pooling_requested: The pooling the request named (``default``: the task's choice,
            resolved per backbone in ``extractor.pooling``, also when the request named that
            one), as VisBench records it.
        notes: Free text given with the request, in documents written while notes were keyed
            (before registry migration 9); vbstore keeps notes in the registry now
            (``store.notes``), so it writes none.
        finetune: ``{"blocks", "backbone_lr"}`` when the backbone's last blocks were trained
            with the head (docs/finetune.md); absent: a frozen probe. The two are different
            measurements and never ranked together.
    """

    kind = "result"

    task: str
    op_version: int
    metrics: dict[str, Any]
    params: dict[str, Any]
    inputs: dict[str, str]
    level: str | None = None
    seed: int | None = None
    seeds: list[int] | None = None
    backbone: dict[str, Any] | None = None
    weights_kind: str | None = None
    extractor: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    device: str | None = None
    features_from_cache: bool | None = None
    comparable: bool | None = None
    warnings: list[str] | None = None
    train_metrics: dict[str, float] | None = None
    per_seed: list[dict[str, Any]] | None = None
    aggregate: dict[str, dict[str, Any]] | None = None
    train_aggregate: dict[str, dict[str, Any]] | None = None
    sample_ci: dict[str, dict[str, Any]] | None = None
    sample_ci_skipped: str | None = None
    protocol: str | None = None
    baseline: dict[str, Any] | None = None
    schema_version: int | None = None
    dataset: str | None = None
    dataset_params: dict[str, Any] | None = None
    pooling_requested: str | None = None
    notes: str | None = None
    timings: dict[str, float] | None = None
    finetune: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls: type[R], doc: Mapping[str, Any]) -> R:
        """The record of a document, its metrics under their current names
        (:data:`RENAMED_METRICS`); ``to_dict`` still gives back the document as stored.

        Raises:
            SchemaError: a required field is missing.
        """
        old = RENAMED_METRICS.get(doc.get("task"), {})  # type: ignore[arg-type]
        if not old.keys() & set(doc.get("metrics") or {}):
            return super().from_dict(doc)  # type: ignore[misc]
        record = super().from_dict(_renamed_doc(doc, doc["task"]))  # type: ignore[misc]
        object.__setattr__(record, "_stored", dict(doc))
        return record

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (as stored, for a record read under renamed metrics)."""
        stored = self.__dict__.get("_stored")
        return dict(stored) if stored is not None else super().to_dict()

    @property
    def spec(self) -> str:
        """The backbone as the user named it."""
        return (self.backbone or {}).get("spec", "")

    @property
    def eval_data(self) -> dict[str, Any]:
        """``manifest``, ``split`` and ``samples`` of the evaluation split."""
        return (self.data or {}).get("eval", {})

    @property
    def is_comparable(self) -> bool:
        return self.comparable is not False

    def summary(self, count: int = 4) -> str:
        """``task: metric=value, ...`` for the first ``count`` metrics in the task's order."""
        # an import cycle: tasks import data, whose manifest view reads its record from here
        from ..tasks import ordered_metrics

        shown = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, (int, float)) else f"{k}=…"
            for k, v in list(ordered_metrics(self.task, self.metrics, self.params).items())[:count]
        )
        return f"{self.task}: {shown}"
