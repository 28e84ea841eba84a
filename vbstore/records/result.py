"""The ``result`` record: metrics and everything that produced them (schemas/result.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._base import Record


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
    timings: dict[str, float] | None = None
    finetune: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

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
            for k, v in list(ordered_metrics(self.task, self.metrics).items())[:count]
        )
        return f"{self.task}: {shown}"
