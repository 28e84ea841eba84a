"""Importing other tools' result files as *reported* evaluations, with their source named.

- VisBench JSONL: one record per line (``backbone``, ``backbone_key``, ``task``, ``dataset``,
  ``split``, ``metrics``, ``visbench_version``, ``dataset_size``, ``task_params``...). Records of
  one ``backbone_key`` become one evaluation, each record's split (or ``condition``) one condition.
- CLIP_benchmark JSON: ``{"dataset", "model", "pretrained", "task", "metrics", "language"}`` (or a
  list of them); each dataset is a condition of the ``open_clip:MODEL@PRETRAINED`` checkpoint,
  or, for a vbstore export, of the weights its ``vbstore`` field names
  (:func:`vbstore.interop.clip_benchmark_identity`; a row that names neither is refused).

- Visin results JSON: the condition → class → metric object one checkpoint's evaluator wrote,
  with the checkpoint named by the caller (``--checkpoint FILE``: its SHA-256).

Neither of the first two carries the SHA-256 manifest of the samples it scored, so imports are
``reported`` evidence ("data" missing); CLIP_benchmark names no evaluator version either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import BadInput, UsageError
from ..interop import clip_benchmark_identity
from ..store import Store
from ._evaluate import Evaluation, build, record
from ._external import external_evidence, is_visin_results
from ._openclip import is_openclip_table
from ._suite import get_suite

FORMATS = ("visbench", "clip_benchmark", "visin")
# the evaluation schema's kinds
WEIGHTS = ("pretrained", "fixed", "checkpoint", "random", "unknown")


def read_records(path: str | Path) -> tuple[str, list[dict[str, Any]]]:
    """The format of a result file and its records.

    Raises:
        UsageError: unreadable, or neither a VisBench JSONL nor a CLIP_benchmark JSON file.
        BadInput: lines that are not JSON objects, each named.
    """
    file = Path(path)
    if is_openclip_table(file):  # one suite per dataset: not one suite's results
        raise UsageError(f"{file.name} is one of open_clip's results tables, with a column per "
                         "dataset", hint=f"vbstore import openclip {file} (a suite per dataset)")
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None
    if file.suffix.lower() == ".jsonl":
        records, problems = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append((f"{file.name}:{number}", f"not JSON ({exc.msg})"))
                continue
            if not isinstance(item, dict) or not {"backbone", "task", "metrics"} <= set(item):
                problems.append(
                    (f"{file.name}:{number}", "not a VisBench record (backbone, task, metrics)")
                )
                continue
            records.append({**item, "_line": number})
        if problems:
            raise BadInput(
                "unusable result lines", problems, hint="fix or remove them; nothing was imported"
            )
        return "visbench", records
    try:
        loaded = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{file.name} is not valid JSON: {exc}") from None
    if is_visin_results(loaded) and not {"model", "pretrained", "metrics"} <= set(loaded):
        return "visin", [loaded]
    items = loaded if isinstance(loaded, list) else [loaded]
    if not items or not all(
        isinstance(i, dict) and {"model", "pretrained", "dataset", "metrics"} <= set(i)
        for i in items
    ):
        raise UsageError(
            f"{file.name} is neither a VisBench .jsonl, a CLIP_benchmark result JSON nor a Visin "
            "results file",
            hint="CLIP_benchmark files hold dataset, model, pretrained, task and metrics; Visin's "
                 "condition -> class -> metric",
        )
    return "clip_benchmark", items


def import_results(
    store: Store,
    path: str | Path,
    suite_ref: str,
    *,
    condition: str | None = None,
    sample_counts: Mapping[str, int] | None = None,
    weights: str | None = None,
    dry_run: bool = False,
    recorded: float | None = None,
    checkpoint: Mapping[str, str] | None = None,
) -> list[Evaluation]:
    """Record the file's results on suite ``suite_ref`` as reported evaluations.

    ``condition`` puts every record under one condition name (default: the record's split, or
    dataset for CLIP_benchmark); ``sample_counts`` and ``weights`` (pretrained, fixed, checkpoint,
    random or unknown) vouch for what the file does not say.

    Raises:
        UsageError: an unknown ``weights`` kind (and see :func:`read_records`).
        UnidentifiedWeights: a CLIP_benchmark row that does not say which weights made it;
            nothing is stored.
    """
    if weights is not None and weights not in WEIGHTS:
        raise UsageError(f"unknown weights kind {weights!r}", hint=f"one of {', '.join(WEIGHTS)}")
    suite = get_suite(store, suite_ref)
    fmt, records = read_records(path)
    if fmt == "visin":
        return [_visin(store, suite, Path(path), records[0], checkpoint, weights, sample_counts,
                       dry_run, recorded)]
    if checkpoint is not None:
        raise UsageError(f"{Path(path).name} names its checkpoints itself",
                         hint="--checkpoint is for a Visin results file")
    groups: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(records):
        if fmt == "visbench":
            checkpoint, name, count, extra = _visbench(item)
        else:
            where = Path(path).name + (f"[{index}]" if len(records) > 1 else "")
            checkpoint, name, count, extra = _clip_benchmark(item, where, weights)
        name = condition or name
        if weights is not None:
            checkpoint = {**checkpoint, "weights": weights}
        group = groups.setdefault(
            checkpoint["id"],
            {"checkpoint": checkpoint, "results": {}, "counts": {}, "sources": {}, **extra},
        )
        if name in group["results"]:
            raise UsageError(
                f"{Path(path).name} has two results of {checkpoint['label']} for condition "
                f"{name!r}",
                hint="import them separately, or name conditions with --condition",
            )
        group["results"][name] = {
            "overall": {
                k: v
                for k, v in item["metrics"].items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
        }
        if count is not None:
            group["counts"][name] = count
        group["sources"][name] = {
            "format": fmt,
            "file": Path(path).name,
            **({"line": item["_line"]} if "_line" in item else {}),
            "dataset": item.get("dataset"),
            # a VisBench record's free-text field, e.g. where a transcribed figure was published
            **({"notes": item["notes"]} if item.get("notes") else {}),
        }
    out = []
    for group in groups.values():
        given = {k: v for k, v in (sample_counts or {}).items() if k in group["results"]}
        counts = {**group["counts"], **given}
        # what the importer vouched for rather than read from the file stays visible
        for name, source in group["sources"].items():
            vouched = [
                *(["weights"] if weights is not None and not group["names_weights"] else []),
                *(["sample_count"] if name in given else []),
            ]
            if vouched:
                source["vouched"] = vouched
        doc = build(
            suite,
            checkpoint=group["checkpoint"],
            results=group["results"],
            sample_counts=counts,
            protocol=group["protocol"],
            evaluator=group["evaluator"],
            sources=group["sources"],
        )
        out.append(record(store, doc, dry_run=dry_run, recorded=recorded))
    return out


def _visbench(item: dict[str, Any]):
    key = item.get("backbone_key") or item["backbone"]
    checkpoint = {"id": f"visbench:{key}", "label": item["backbone"], "weights": "unknown"}
    version = item.get("visbench_version")
    extra = {
        "names_weights": False,
        "protocol": {"task": item["task"], "params": item.get("task_params") or {}},
        "evaluator": {"package": "visbench", "version": version} if version else None,
    }
    return (
        checkpoint,
        item.get("split") or item.get("dataset") or "test",
        item.get("dataset_size"),
        extra,
    )


def _clip_benchmark(item: dict[str, Any], where: str, vouched: str | None):
    identity = clip_benchmark_identity(item, where, vouched=vouched)
    params = {"language": item["language"]} if item.get("language") else {}
    extra = {"protocol": {"task": item.get("task", ""), "params": params}, "evaluator": None,
             # a vbstore export names its weights: a --weights that agrees vouches for nothing
             "names_weights": identity.tensor_hash is not None}
    checkpoint = identity.checkpoint()
    return checkpoint, str(item["dataset"]), None, extra


def _visin(store: Store, suite, path: Path, results: dict[str, Any],
           checkpoint: Mapping[str, str] | None, weights: str | None,
           sample_counts: Mapping[str, int] | None, dry_run: bool, recorded: float | None
           ) -> Evaluation:
    """A Visin results file: one checkpoint's condition → class → metric results."""
    if checkpoint is None:
        raise UsageError(f"{path.name} is a Visin results file, which does not say which weights "
                         "made it", hint="name them: --checkpoint FILE (its SHA-256 is kept)")
    if weights is not None:
        checkpoint = {**checkpoint, "weights": weights}
    kwargs = external_evidence(results, checkpoint=checkpoint, sample_counts=sample_counts,
                               source={"format": "visin", "file": path.name})
    return record(store, build(suite, **kwargs), dry_run=dry_run, recorded=recorded)
