"""Typed records: one frozen dataclass per JSON artifact kind (each schema in schemas/).

Every reader (CLI, exports, lineage, remotes) goes through these instead of indexing raw dicts,
so a field is named in one place. Each record round-trips: ``Record.from_dict(d).to_dict() == d``
for every document its schema accepts, unknown fields included (kept in ``extra``), so records
written by an older or newer vbstore read back unchanged.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# each record loads with its module on first use (a cached result reads no head record)
_LAZY = {
    "CHECKED": ".head", "HeadCompat": ".head", "ResultRecord": ".result",
    "RESULT_SCHEMA_VERSION": ".result", "RENAMED_METRICS": ".result",
    "WeightsRecord": ".artifacts", "BackboneRecord": ".artifacts",
    "ManifestRecord": ".artifacts", "FeaturesetRecord": ".artifacts",
    "SuiteRecord": ".suites", "EvaluationRecord": ".suites",
    "PackMetadata": ".metadata", "HeadMetadata": ".metadata",
    "StagedReader": ".answer", "StoreReader": ".answer", "answer_differences": ".gate",
    "check_answer": ".gate", "rows_differences": ".answer", "ARRIVALS": ".gate",
    "QUESTIONS": ".gate", "arrival_problems": ".gate", "finetuned_differences": ".answer",
    "prefix_rows_differences": ".answer",
}

if TYPE_CHECKING:
    from .answer import (
        StagedReader,
        StoreReader,
        finetuned_differences,
        prefix_rows_differences,
        rows_differences,
    )
    from .artifacts import BackboneRecord, FeaturesetRecord, ManifestRecord, WeightsRecord
    from .gate import ARRIVALS, QUESTIONS, answer_differences, arrival_problems, check_answer
    from .head import CHECKED, HeadCompat
    from .metadata import HeadMetadata, PackMetadata
    from .result import RENAMED_METRICS, ResultRecord
    from .result import SCHEMA_VERSION as RESULT_SCHEMA_VERSION
    from .suites import EvaluationRecord, SuiteRecord

# one record per JSON artifact kind (schemas/), by the schema's name
RECORDS = {
    "backbone": "BackboneRecord", "evaluation": "EvaluationRecord",
    "featureset": "FeaturesetRecord", "head.compat": "HeadCompat",
    "head.metadata": "HeadMetadata", "manifest": "ManifestRecord",
    "pack.metadata": "PackMetadata", "result": "ResultRecord", "suite": "SuiteRecord",
    "weights": "WeightsRecord",
}

__all__ = [
    "ARRIVALS",
    "CHECKED",
    "QUESTIONS",
    "RECORDS",
    "RENAMED_METRICS",
    "RESULT_SCHEMA_VERSION",
    "BackboneRecord",
    "EvaluationRecord",
    "FeaturesetRecord",
    "HeadCompat",
    "HeadMetadata",
    "ManifestRecord",
    "PackMetadata",
    "ResultRecord",
    "StagedReader",
    "StoreReader",
    "SuiteRecord",
    "WeightsRecord",
    "answer_differences",
    "arrival_problems",
    "check_answer",
    "finetuned_differences",
    "prefix_rows_differences",
    "rows_differences",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        attr = "SCHEMA_VERSION" if name == "RESULT_SCHEMA_VERSION" else name
        return getattr(importlib.import_module(_LAZY[name], __name__), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
