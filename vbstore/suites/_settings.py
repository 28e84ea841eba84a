"""Comparability keys: every setting that changes a number is pinned by the suite or labelled.

A suite pins a setting by giving its value in its ``vbstore.settings`` block (``suite new``
pins the task's parameters, its op_version, and whatever ``--pin`` names); an evaluation whose
value differs is ``incompatible`` with a reason naming the setting and both values
(``layers(-2 != -1)``). A setting the suite leaves open may vary: it joins the evaluation's
**variant**, and the board ranks one row per checkpoint and variant, its label showing the
settings that differ between rows, so two rows that differ in a setting never share a label.

The rule set is :data:`SETTINGS` (docs/suites.md prints it as one table), and
:data:`RESULT_FIELDS` says for every field of the result record whether it is one of those
settings, the result itself, or provenance that changes no number; a test walks the record's
fields and the schema and fails on a field that is in neither.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import canonical
from ..records import BackboneRecord, ManifestRecord, ResultRecord
from ..store import Store


@dataclass(frozen=True)
class Setting:
    """One setting that changes a number: where it is read and what a change means."""

    name: str
    source: str  # where it is read from the result record (and the backbone record)
    why: str


# The table. Task parameters are one family: each parameter is a setting of its own (named by
# the parameter: a head kind ``head``, its width ``hidden_dim``/``hidden``, ``lr``...), checked
# with the ``protocol-mismatch: <param>(<ran> != <pinned>)`` reason.
SETTINGS: tuple[Setting, ...] = (
    Setting("op_version", "op_version", "the version of the task's numbers"),
    Setting("layers", "extractor.layers", "which blocks the features come from"),
    Setting("pooling", "extractor.pooling", "how a feature map becomes a vector"),
    Setting("mode", "extractor.mode", "pooled vectors or dense maps"),
    Setting("input_size", "extractor.input_size, else the backbone's preprocessing size",
            "the resolution the backbone sees"),
    Setting("preprocessing", "the backbone record's preprocessing (mean, std, crop, "
            "interpolation; input_size above)", "what the pixels are before the forward pass"),
    Setting("precision", "extractor.precision", "fp32 or bf16 compute"),
    Setting("dense_dtype", "extractor.dense_dtype (dense features only)",
            "the stored precision of dense maps"),
    Setting("finetune", "finetune {blocks, backbone_lr}; absent: frozen",
            "whether the backbone was trained with the head"),
    Setting("seeds", "the number of seeds (seeds)", "a mean over more seeds is another estimate"),
    Setting("train_data", "data.train.manifest (the train manifest's id)",
            "what the head was trained on"),
)
PARAMS = "params"  # the task-parameter family
NAMES = tuple(s.name for s in SETTINGS)

# Every field of the result record (records/result.py, schemas/result.schema.json): a setting
# (pinned or labelled), checked by another verdict rule, the result itself, or provenance.
RESULT_FIELDS: dict[str, str] = {
    "kind": "provenance: the document kind",
    "task": "pinned: protocol-mismatch: task(<ran> != <pinned>) (Visin's names and vbstore's "
            "are aliases)",
    "op_version": "setting: op_version",
    "params": "setting: params (each parameter)",
    "inputs": "see INPUT_ROLES",
    "level": "provenance: follows from the task",
    "protocol": "provenance: the task's protocol name, follows from task and op_version",
    "seed": "attempt: the seed values are chance; a re-run is another attempt and the "
            "latest ranked attempt counts, never the best (the count is the setting seeds)",
    "seeds": "setting: seeds",
    "backbone": "identity: the checkpoint the row ranks (spec, source, architecture)",
    "weights_kind": "pinned: weights(<kind>) by the suite's weights rule",
    "extractor": "setting: layers, pooling, mode, input_size, precision, dense_dtype",
    "data": "pinned: data(content) or data(names) for eval, sample-count for its size; "
            "setting: train_data",
    "finetune": "setting: finetune",
    "comparable": "pinned: not-comparable(--no-strict)",
    "metrics": "result",
    "train_metrics": "result",
    "per_seed": "result",
    "aggregate": "result",
    "train_aggregate": "result",
    "sample_ci": "result",
    "sample_ci_skipped": "result",
    "baseline": "result: the trivial predictor beside it",
    "versions": "provenance: the evaluator version is checked against evaluator.minVersion",
    "device": "provenance",
    "timings": "provenance",
    "features_from_cache": "provenance",
    "warnings": "provenance",
    # VisBench's fields (issue 23's record, schema version 2)
    "schema_version": "provenance: the document's shape",
    "dataset": "pinned: data(content)/data(names); the name labels the data the manifest is",
    "dataset_params": "pinned: data(content)/data(names); options that change the samples "
                      "change the manifest",
    "pooling_requested": "setting: pooling (resolved per backbone into extractor.pooling)",
    "notes": "provenance: free text (older documents; notes are the registry's now)",
}
# the extractor's keys (features/_params.py ExtractorParams.to_dict)
EXTRACTOR_FIELDS: dict[str, str] = {
    "layers": "layers", "pooling": "pooling", "mode": "mode", "input_size": "input_size",
    "precision": "precision", "dense_dtype": "dense_dtype",
    "bf16": "precision",  # how bf16 ran (weights), part of precision
}
# roles of ``inputs``: ids of what the result was computed from
INPUT_ROLES: dict[str, str] = {
    "backbone": "setting: preprocessing, input_size (identity: architecture)",
    "weights": "identity: the checkpoint (its tensor hash)",
    "eval_manifest": "pinned: data(content)/data(names)",
    "eval_features": "follows from the backbone, the eval manifest and the extractor settings",
    "train_manifest": "setting: train_data",
    "train_features": "follows from the backbone, the train manifest and the extractor settings",
    "head": "follows from the train data, params, seeds and extractor settings (an applied "
            "head that does not match: not-comparable)",
    "views_manifest": "pinned: data (the views of the eval samples)",
    "views_features": "follows from the backbone, the views and the extractor settings",
    # fine-tuning (issue 25): the frozen part's features and the trained blocks' weights
    "train_prefix": "follows from the backbone, the train manifest and the finetune setting",
    "eval_prefix": "follows from the backbone, the eval manifest and the finetune setting",
    "finetuned": "setting: finetune (its blocks' weights follow from it, the train data, seeds)",
}


def settings_of(store: Store, record: ResultRecord) -> dict[str, Any]:
    """The settings of one stored result, by :data:`SETTINGS` name, plus ``params``."""
    extractor = dict(record.extractor or {})
    preprocessing: dict[str, Any] = {}
    backbone_id = record.inputs.get("backbone")
    if backbone_id and store.has(backbone_id):
        preprocessing = dict(BackboneRecord.from_dict(store.read_json(backbone_id)).preprocessing)
    size = extractor.get("input_size") or preprocessing.get("input_size")
    preprocessing.pop("input_size", None)
    mode = extractor.get("mode")
    train = (record.data or {}).get("train") or {}
    finetune = record.finetune
    return {
        "op_version": record.op_version,
        "layers": list(extractor["layers"]) if "layers" in extractor else None,
        "pooling": extractor.get("pooling"),
        "mode": mode,
        "input_size": size,
        "preprocessing": preprocessing or None,
        "precision": extractor.get("precision", "fp32"),
        "dense_dtype": extractor.get("dense_dtype") if mode in ("dense", "both") else None,
        "finetune": finetune or None,  # absent: the backbone stayed frozen
        "seeds": len(record.seeds) if record.seeds else 1,
        "train_data": train.get("manifest"),
        PARAMS: dict(record.params),
    }


def show(value: Any) -> str:
    """A setting's value as a reason or a label prints it: compact JSON, ids shortened."""
    if value is None:
        return "none"
    if isinstance(value, str):
        return value[:12] if len(value) == 64 and all(c in "0123456789abcdef" for c in value) \
            else value
    if isinstance(value, list) and len(value) == 1:
        return show(value[0])
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def compare(
    pinned: Mapping[str, Any], params: Mapping[str, Any], given: Mapping[str, Any] | None
) -> tuple[list[str], dict[str, Any]]:
    """The reasons a result's settings break the suite's pins, and its variant.

    ``pinned`` is the suite's ``settings`` block, ``params`` its pinned task parameters;
    ``given`` the evaluation's settings (None: not known, as for evidence from elsewhere: then
    nothing is checked and the variant is empty). The variant holds every setting and task
    parameter the suite leaves open.
    """
    if given is None:
        return [], {}
    reasons, variant = [], {}
    for name in NAMES:
        value = given.get(name)
        if name in pinned:
            if _norm(value) != _norm(pin_value(name, pinned[name])):
                reasons.append(f"{name}({show(value)} != {show(pinned[name])})")
        elif value is not None or name in NULLABLE:
            variant[name] = value  # a frozen result's finetune is null, not unknown
    ran = given.get(PARAMS) or {}
    for key, value in sorted(ran.items()):
        if key not in params:
            variant[f"{PARAMS}.{key}"] = value
    return reasons, variant


# settings whose null is a value (frozen), recorded in a variant and pinned by ``none``
NULLABLE = ("finetune",)


def pin_value(name: str, value: Any) -> Any:
    """A pinned value as compared: ``finetune`` ``none``/``frozen`` (as ``--pin`` writes it)
    is null, the frozen backbone."""
    if name in NULLABLE and isinstance(value, str) and value.lower() in ("none", "frozen"):
        return None
    return value


def _norm(value: Any) -> Any:
    """Equal settings compare equal however they were written (``-1`` and ``[-1]``)."""
    if isinstance(value, list) and len(value) == 1:
        return _norm(value[0])
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def variant_key(variant: Mapping[str, Any]) -> str:
    """The canonical text the registry indexes a variant by ('' for none)."""
    return canonical.dumps(dict(variant)).decode() if variant else ""


def content_sha256(conditions: Mapping[str, tuple[str | None, ManifestRecord]]) -> str:
    """The SHA-256 of what each condition's samples *are*: split, classes, each sample's image
    and target hashes (not only its name), and any pairs or triplets, from vbstore manifests.

    Two splits with the same file names and other pixels or labels differ here; the Visin
    names digest (:func:`manifest_sha256`) cannot tell them apart.
    """
    document = {
        "version": 1,
        "conditions": {
            str(name): {
                "split": split,
                **{k: v for k, v in manifest.to_dict().items() if k in _CONTENT},
            }
            for name, (split, manifest) in conditions.items()
        },
    }
    return hashlib.sha256(canonical.dumps(document)).hexdigest()


# the manifest fields that say what the samples are (not how the files were laid out)
_CONTENT = ("samples", "classes", "target_type", "triplets", "pairs", "keypoint_pairs")


def rules_table() -> str:
    """The rule set as the Markdown table docs/suites.md prints (a test keeps them equal)."""
    lines = ["| setting | read from | why it changes a number |", "|---|---|---|"]
    lines += [f"| `{s.name}` | {s.source} | {s.why} |" for s in SETTINGS]
    lines.append("| `params.<name>` | params (every task parameter, defaults filled: a head "
                 "kind `head`, its width `hidden_dim`/`hidden`, `lr`, `k`...) | the probe itself |")
    return "\n".join(lines)
