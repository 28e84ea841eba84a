"""``suite new``: a suite file written from vbstore's own manifests, so nobody hashes by hand."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import __version__
from ..data import load_manifest
from ..engine import data_options_for, store_param_files
from ..errors import UsageError, field_ref
from ..records import ManifestRecord
from ..store import Store, validate
from ..tasks import get_task
from ._manifest import manifest_sha256
from ._settings import NAMES, content_sha256, pin_value
from ._suite import EXTENSION, normalize

_LIST_SUFFIXES = (".csv", ".jsonl")


def condition_source(data: str, where: str) -> tuple[str, str | None]:
    """``(data, split)`` holding one condition: a split of ``data``, or a .csv/.jsonl list."""
    if where.lower().endswith(_LIST_SUFFIXES) and Path(where).is_file():
        return where, None
    return data, where


def condition_manifest(
    store: Store, data: str, where: str, data_options: Mapping[str, Any] | None = None
):
    """The manifest of one condition (see :func:`condition_source`)."""
    source, split = condition_source(data, where)
    return load_manifest(store, source, split=split, **(data_options or {}))


def new_suite(
    store: Store,
    *,
    slug: str,
    task: str,
    data: str,
    split: str,
    conditions: Mapping[str, str] | None = None,
    version: int = 1,
    name: str | None = None,
    params: Mapping[str, Any] | None = None,
    weights: str = "pretrained",
    data_options: Mapping[str, Any] | None = None,
    pin: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A suite document for ``task`` on ``data``: every condition's samples hashed into the
    manifest digest (Visin's, of names) and the content digest (what each sample is), sample
    counts counted, the task's metrics, its op_version and resolved params pinned, and
    ``finetune`` pinned null (frozen backbones) unless ``pin`` names it.

    ``conditions`` maps a condition name to a split of ``data`` or a sample list; without it the
    suite has one condition, named after ``split``. ``pin`` pins more settings (``layers``,
    ``pooling``, ``precision``...: vbstore.suites._settings.SETTINGS); any setting left open
    may vary, and the board's label then shows it.

    Raises:
        UsageError: an unknown task parameter or setting, or data that cannot be read.
        SchemaError: a document the schema refuses (a slug with capitals, say).
    """
    task_obj = get_task(task)
    # a templates/classnames file is pinned by its content, never by a local path
    pinned = store_param_files(store, task_obj, task_obj.resolve_params(dict(params or {})))
    where = dict(conditions or {split: split})
    unknown = sorted(set(pin or {}) - set(NAMES))
    if unknown:
        raise UsageError(f"{unknown[0]!r} is not a setting a suite pins",
                         hint=f"one of: {', '.join(NAMES)} (task parameters: "
                              f"{field_ref('params')})")
    samples, counts, manifests, splits = {}, [], {}, {}
    classes: set[str] = set()
    for condition, source in where.items():
        # read as the task reads it (correspondence: a dense split's images alone), so the
        # suite pins the samples its results hold (data(content))
        reading = data_options_for(task_obj, dict(data_options or {}),
                                   condition_source(data, source)[0])
        view = condition_manifest(store, data, source, reading)
        if not view.samples:
            raise UsageError(f"condition {condition!r} ({source}) has no samples")
        classes.update(view.classes)
        samples[condition] = view.names
        manifest = ManifestRecord.from_dict(view.doc)
        manifests[condition] = (manifest.split, manifest)
        counts.append({"name": condition, "sampleCount": len(view.names)})
        splits[condition] = source
    metrics = [
        {
            "key": m.name,
            "direction": "max" if m.direction == "higher" else "min",
            "headline": m.name == task_obj.headline_for(pinned),
        }
        # a metric the task leaves out on this many classes (top5 over 5) is not asked for
        for m in task_obj.metrics_for(pinned) if m.reported(len(classes) or None)
    ]
    doc = {
        "slug": slug,
        "version": version,
        "name": name or f"{task} on {data} ({split})",
        "protocol": {  # what Visin reads, as Visin writes it
            "task": task_obj.name,
            "split": split,
            "data": {
                "kind": "external",
                "label": str(data),
                "manifestSha256": manifest_sha256(samples),
            },
            "conditions": counts,
            "metrics": metrics,
            "aggregation": "equal-mean-of-conditions",
            "evaluator": {"package": "vbstore", "minVersion": __version__},
        },
        EXTENSION: {  # what only vbstore reads, under its own digest
            "params": pinned,
            "weights": weights,
            # frozen unless pinned otherwise: a fine-tuned result never ranks beside frozen ones
            "settings": {"op_version": task_obj.op_version, "finetune": None,
                         **{k: pin_value(k, v) for k, v in (pin or {}).items()}},
            "splits": splits,
            "contentSha256": content_sha256(manifests),
        },
    }
    suite = normalize(doc)
    validate("suite", suite)  # a bad slug or name is refused here, not when the file is pushed
    return suite
