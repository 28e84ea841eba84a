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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._fields import options_of
from ..errors import BadInput, UsageError
from ..interop import clip_benchmark_identity
from ..store import Store
from . import _files
from ._evaluate import Evaluation, RunMetadata, build, record
from ._external import external_evidence, is_visin_results
from ._openclip import is_openclip_table
from ._suite import get_suite

FORMATS = ("visbench", "clip_benchmark", "visin")
# the evaluation schema's kinds
WEIGHTS = ("pretrained", "fixed", "checkpoint", "random", "unknown")


def read_records(path: str | Path) -> tuple[str, list[dict[str, Any]]]:
    """The format of a result file and its records.

    Raises:
        UsageError: unreadable, over :data:`~._files.MAX_RESULTS_BYTES` or its values, not UTF-8
            or not JSON, or neither a VisBench JSONL nor a CLIP_benchmark JSON file.
        BadInput: lines that are not JSON objects or VisBench records, each named.
    """
    file = Path(path)
    if is_openclip_table(file):  # one suite per dataset: not one suite's results
        raise UsageError(f"{file.name} is one of open_clip's results tables, with a column per "
                         "dataset", hint=f"vbstore import openclip {file} (a suite per dataset)")
    text = _files.read_text(file, "results file", _files.MAX_RESULTS_BYTES,
                           hint="split it into several files")
    _files.check_values(text, file.name, _files.MAX_RESULTS_VALUES)
    if file.suffix.lower() == ".jsonl":
        records, problems = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{file.name}:{number}"
            try:
                item = _files.loads(line, where)
            except UsageError as exc:
                problems.append((where, str(exc).removeprefix(f"{where} is ")))
                continue
            if not isinstance(item, dict) or not {"backbone", "task", "metrics"} <= set(item):
                problems.append((where, "not a VisBench record (backbone, task, metrics)"))
                continue
            wrong = _visbench_shape(item)
            if wrong:
                problems.append((where, wrong))
                continue
            records.append({**item, "_line": number})
        if problems:
            raise BadInput(
                "unusable result lines", problems, hint="fix or remove them; nothing was imported"
            )
        return "visbench", records
    loaded = _files.loads(text, file.name)
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
    for index, item in enumerate(items):
        if not isinstance(item["metrics"], dict):
            where = file.name + (f"[{index}]" if len(items) > 1 else "")
            raise UsageError(f"{where}: metrics is {_a(item['metrics'])}, not an object of "
                             "named numbers", hint="nothing was imported")
    return "clip_benchmark", items


# a VisBench record's fields that are read, and the JSON types each may have (None: absent)
_VISBENCH_FIELDS: dict[str, tuple[type, ...]] = {
    "backbone": (str,), "backbone_key": (str, type(None)), "task": (str,), "metrics": (dict,),
    "task_params": (dict, type(None)), "split": (str, type(None)),
    "dataset": (str, type(None)), "dataset_size": (int, type(None)),
    "visbench_version": (str, type(None)), "notes": (str, type(None)),
}


def _visbench_shape(item: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a VisBench record's fields, or None."""
    for field, types in _VISBENCH_FIELDS.items():
        value = item.get(field)
        if not isinstance(value, types) or isinstance(value, bool):
            wanted = " or ".join("null" if t is type(None) else _TYPE_NAMES[t] for t in types)
            return f"{field} is {_a(value)}, not {wanted}"
    return None


_TYPE_NAMES = {str: "a string", dict: "an object", int: "an integer"}


def _a(value: Any) -> str:
    """A JSON value's type, as a phrase: 'a list', 'a string'..."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


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
    **metadata: Any,
) -> list[Evaluation]:
    """Record the file's results on suite ``suite_ref`` as reported evaluations.

    ``condition`` puts every record under one condition name (default: the record's split, or
    dataset for CLIP_benchmark); ``sample_counts`` and ``weights`` (pretrained, fixed, checkpoint,
    random or unknown) vouch for what the file does not say. ``metadata`` is Visin's run
    metadata (:class:`~vbstore.suites._evaluate.RunMetadata`: ``project``, ``run``, ``epoch``,
    ``uuid``): a uuid names one upload, so it is refused for a file that makes several
    evaluations.

    Raises:
        TypeError: a keyword that is no field of ``RunMetadata``.
        UsageError: an unknown ``weights`` kind, a ``uuid`` for several evaluations (and see
            :func:`read_records`).
        UuidConflict: ``uuid`` names another evaluation already; nothing is stored.
        UnidentifiedWeights: a CLIP_benchmark row that does not say which weights made it;
            nothing is stored.
    """
    meta: RunMetadata = options_of(RunMetadata, metadata, "import_results")
    uuid = meta.uuid
    in_doc: dict[str, Any] = {"project": meta.project, "run": meta.run, "epoch": meta.epoch}
    if weights is not None and weights not in WEIGHTS:
        raise UsageError(f"unknown weights kind {weights!r}", hint=f"one of {', '.join(WEIGHTS)}")
    suite = get_suite(store, suite_ref)
    fmt, records = read_records(path)
    if fmt == "visin":
        return [_visin(store, suite, Path(path), records[0], checkpoint, weights, sample_counts,
                       dry_run, recorded, in_doc, uuid)]
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
    if uuid is not None and len(groups) > 1:
        raise UsageError(f"--uuid names one upload, and {Path(path).name} makes "
                         f"{len(groups)} evaluations (one per checkpoint)",
                         hint="drop --uuid, or import one checkpoint's records per file")
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
            **in_doc,
        )
        out.append(record(store, doc, dry_run=dry_run, recorded=recorded, uuid=uuid))
    return out


def _visbench(item: dict[str, Any]):
    key = item.get("backbone_key") or item["backbone"]
    checkpoint = {"id": f"visbench:{key}", "label": item["backbone"], "weights": "unknown"}
    version = item.get("visbench_version")
    # a vbstore export writes "vbstore VERSION" there (vbstore.interop.visbench): its evaluator
    package, _, number = (version or "").partition(" ")
    evaluator = ({"package": "vbstore", "version": number} if package == "vbstore" and number
                 else {"package": "visbench", "version": version} if version else None)
    extra = {
        "names_weights": False,
        "protocol": {"task": item["task"], "params": item.get("task_params") or {}},
        "evaluator": evaluator,
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
           sample_counts: Mapping[str, int] | None, dry_run: bool, recorded: float | None,
           metadata: Mapping[str, Any], uuid: str | None) -> Evaluation:
    """A Visin results file: one checkpoint's condition → class → metric results."""
    if checkpoint is None:
        raise UsageError(f"{path.name} is a Visin results file, which does not say which weights "
                         "made it", hint="name them: --checkpoint FILE (its SHA-256 is kept)")
    if weights is not None:
        checkpoint = {**checkpoint, "weights": weights}
    kwargs = external_evidence(results, checkpoint=checkpoint, sample_counts=sample_counts,
                               source={"format": "visin", "file": path.name})
    return record(store, build(suite, **kwargs, **metadata), dry_run=dry_run, recorded=recorded,
                  uuid=uuid)
