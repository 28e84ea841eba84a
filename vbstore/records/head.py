"""A head's compatibility record (schemas/head.compat.schema.json) and the one check on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._base import Record

# What must agree between a head and the features it is applied to; a field the head lacks is
# a mismatch too, so a head that omits its record cannot pass the check.
CHECKED = (
    "task",
    "task_op_version",
    "weights",
    "input_size",
    "pooling",
    "feature_mode",
    "layers",
    "embed_dim",
)


@dataclass(frozen=True)
class HeadCompat(Record):
    """What a head was fit on: it may only be applied to features that agree on ``CHECKED``."""

    kind = "head.compat"

    backbone: str
    weights: str
    extractor_key: str
    pooling: str
    layers: list[int]
    feature_mode: str
    embed_dim: int
    task: str
    task_op_version: int
    input_size: int | None = None
    params: dict[str, Any] | None = None
    seed: int | None = None
    class_names: list[str] | None = None
    train_manifest: str | None = None
    train_metrics: dict[str, float] | None = None
    # the fine-tuned blocks it was trained with ({"weights", "blocks", "backbone_lr"}); None:
    # a head on frozen features
    finetune: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def differences(self, expected: Mapping[str, Any]) -> list[str]:
        """Each way this head differs from the features ``expected`` describes (a head on
        fine-tuned blocks fits only features made by those blocks: ``finetune``, when
        ``expected`` names it, None for frozen features)."""
        mine = self.to_dict()
        problems = []
        if "finetune" in expected and self.finetune != expected["finetune"]:
            def said(value: Any) -> str:
                return "frozen" if not value else (
                    f"fine-tuned weights {value['weights'][:12]} ({value['blocks']} blocks)")
            problems.append(f"the head was trained on {said(self.finetune)} features, these "
                            f"are {said(expected['finetune'])}")
        for name in CHECKED:
            if name not in expected:
                continue
            if name not in mine:
                problems.append(f"{name} is missing from the head, {expected[name]!r} here")
            elif mine[name] != expected[name]:
                problems.append(f"{name} is {mine[name]!r} in the head, {expected[name]!r} here")
        return problems
