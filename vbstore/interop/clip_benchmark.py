"""CLIP_benchmark's conventions: ``model,pretrained`` lines and one result JSON per run.

CLIP_benchmark (LAION, MIT) reads model lists whose lines are ``MODEL,PRETRAINED`` (an
OpenCLIP model name and pretrained tag) and writes, per run, a JSON object with exactly the
fields ``dataset``, ``model``, ``pretrained``, ``task``, ``metrics`` and ``language``, named
``{dataset}_{pretrained}_{model}_{language}_{task}.json``. Its linear probe is vbstore's
``classification`` task, whose ``top1``/``top5`` it calls ``lp_acc1``/``lp_acc5``; its zero-shot
tasks share vbstore's task and metric names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..backbones import parse_spec
from ..errors import UsageError, VbstoreError

CLIP_BENCHMARK_FIELDS = ("dataset", "model", "pretrained", "task", "metrics", "language")
# CLIP_benchmark runs multi-label sets (voc2007_multilabel) under zeroshot_classification
_TASKS = {"classification": "linear_probe", "zeroshot_multilabel": "zeroshot_classification"}
_METRICS = {
    "classification": {"top1": "lp_acc1", "top5": "lp_acc5",
                       "mean_per_class_recall": "lp_mean_per_class_recall"},
}


def clip_benchmark_spec(line: str) -> str:
    """The open_clip spec of a CLIP_benchmark ``MODEL,PRETRAINED`` line.

    Raises:
        UsageError: not exactly two non-empty comma-separated fields.
    """
    parts = [part.strip() for part in line.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"{line!r} is not a MODEL,PRETRAINED line",
                         hint="e.g. ViT-B-32-quickgelu,laion400m_e32")
    model, pretrained = parts
    return f"open_clip:{model}@{pretrained}"


def _dataset(manifest: Mapping[str, Any] | None, manifest_id: str) -> str:
    source = (manifest or {}).get("source") or {}
    name = source.get("name")
    if not name:
        return manifest_id[:12]  # a folder has no name of its own: its content id names it
    if source.get("kind") == "torchvision":
        return name.lower()  # CLIP_benchmark's names for torchvision sets: cifar10, mnist...
    if source.get("kind") == "wds":
        return f"wds/{name}"
    return name


def _model(record: Mapping[str, Any]) -> tuple[str, str]:
    backbone = record.get("backbone", {})
    spec = backbone.get("spec", "")
    kind = record.get("weights_kind")
    try:
        parsed = parse_spec(spec)
    except VbstoreError:  # a plugin unregistered since: its spec still names it
        return spec, kind or "pretrained"
    arch, tag = parsed.arch, parsed.tag
    if parsed.source == "timm" and tag is None and "." in arch:
        arch, tag = arch.split(".", 1)
    model = arch if parsed.source == "open_clip" else f"{parsed.source}:{arch}"
    if parsed.source == "custom":
        model = parsed.name
    return model, (tag or "default") if kind in (None, "pretrained") else kind


def clip_benchmark_record(record: Mapping[str, Any],
                          manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A vbstore ``result`` record as the JSON CLIP_benchmark writes for one run.

    Args:
        record: The result record.
        manifest: Its evaluation manifest's document (names the dataset when it has a
            ``source``; otherwise the manifest id stands for it).
    """
    task = record["task"]
    rename = _METRICS.get(task, {})
    metrics = {rename.get(k, k): v for k, v in record.get("metrics", {}).items()
               if isinstance(v, (int, float))}
    model, pretrained = _model(record)
    manifest_id = (record.get("data", {}).get("eval", {}).get("manifest")
                   or record.get("inputs", {}).get("eval_manifest", ""))
    return {
        "dataset": _dataset(manifest, manifest_id),
        "model": model,
        "pretrained": pretrained,
        "task": _TASKS.get(task, task),
        "metrics": metrics,
        "language": record.get("params", {}).get("language", "en"),
    }


def clip_benchmark_filename(doc: Mapping[str, Any]) -> str:
    """CLIP_benchmark's default file name, ``{dataset}_{pretrained}_{model}_{language}_{task}``."""
    parts = [doc["dataset"], doc["pretrained"], doc["model"], doc["language"], doc["task"]]
    return "_".join(str(p).replace("/", "_").replace(":", "-") for p in parts) + ".json"
