"""Many results at once: every backbone x task of a sweep, and the rows of stored results."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._fields import options_of, split_keywords
from ..backbones import check_seed, with_model_type
from ..data import decode_once
from ..errors import UsageError, VbstoreError, field_ref
from ..interop import clip_benchmark_models, clip_benchmark_spec
from ..records import ResultRecord
from ..store import Store
from ..tasks import get_task, ordered_metrics
from ._language import applies
from ._lineage import data_name, finetune_label
from ._options import RunOptions, SweepOptions
from ._plan import plan
from ._raysweep import Unit, result_fields, sweep_on_ray
from ._results import execute, result_request


@dataclass(frozen=True)
class SweepEntry:
    """One backbone line of a sweep file: ``SPEC [weights=W] [seed=N] [input_size=N]``."""

    backbone: str
    weights: str = "default"
    seed: int | None = None
    input_size: int | None = None

    def __post_init__(self) -> None:
        check_seed(self.weights, self.seed)  # a seed=N beside pretrained weights would be lost

    @property
    def label(self) -> str:
        options = [
            f"{k}={v}"
            for k, v in (
                ("weights", self.weights),
                ("seed", self.seed),
                ("input_size", self.input_size),
            )
            if v is not None and (k != "weights" or v != "default")
        ]
        return " ".join([self.backbone, *options])


def read_backbones_file(path: str | Path, model_type: str | None = None) -> list[SweepEntry]:
    """The entries of a backbones file: ``SPEC [weights=W] [seed=N] [input_size=N]`` lines, or
    CLIP_benchmark's ``MODEL,PRETRAINED`` (an open_clip model, or one of ``model_type``, as
    its ``--model_type`` reads them); blank lines and ``#`` comments skipped.

    A name that is no file but one of CLIP_benchmark's model collections (``openai``,
    ``openclip_base``, ``openclip_multilingual``, ``openclip_all``) is that collection's
    open_clip models, as its ``--pretrained_model`` reads one.

    Raises:
        UsageError: a line that cannot be read (file:line named), no backbone at all, or
            neither a file nor a collection.
    """
    if not Path(path).exists():
        specs = clip_benchmark_models(str(path))
        if model_type is not None:
            specs = [with_model_type(s.removeprefix("open_clip:"), model_type) for s in specs]
        return [SweepEntry(spec) for spec in specs]
    entries = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *options = line.split()
        if "," in spec and ":" not in spec:  # CLIP_benchmark's models.txt
            try:
                spec = clip_benchmark_spec(spec)
                if model_type is not None:
                    spec = with_model_type(spec.removeprefix("open_clip:"), model_type)
            except UsageError as exc:
                raise UsageError(f"{path}:{number}: {exc.args[0]}", hint=exc.hint) from None
        fields: dict[str, Any] = {}
        for option in options:
            key, sep, value = option.partition("=")
            if not sep or key not in ("weights", "seed", "input_size"):
                raise UsageError(
                    f"{path}:{number}: cannot read {option!r}",
                    hint="use weights=W, seed=N or input_size=N after the spec",
                )
            try:
                fields[key] = value if key == "weights" else int(value)
            except ValueError:
                raise UsageError(
                    f"{path}:{number}: {key} must be an integer, not {value!r}"
                ) from None
        try:
            entries.append(SweepEntry(spec, **fields))
        except UsageError:
            raise UsageError(
                f"{path}:{number}: seed={fields['seed']} only applies with weights=random",
                hint="drop seed=N, or add weights=random",
            ) from None
    if not entries:
        raise UsageError(f"{path} lists no backbones", hint="one backbone spec per line")
    return entries


def sweep(entries: Sequence[SweepEntry], tasks: Sequence[str], data: Any, train_data: Any = None,
          **options: Any) -> Iterator[dict[str, Any]]:
    """Run every backbone x task; yield one row per combination, an ``error`` row on failure.

    Rerunning resumes: finished results are cache hits. Each parameter goes to the tasks that
    declare it, and ``pooling`` to the tasks that read pooled vectors (as on ``get result``:
    one equal to the backbone's own is the same result as none). ``batch_size`` is the
    extraction batch and changes no id. Each row says how far the sweep is (``done`` of
    ``total``), which derivations it computed (``computed``: their keys) and how many images
    it sent through a backbone (``extracted``).

    Without ``executor`` the combinations run one after another here, in order. With a
    :class:`vbstore.features.RayExecutor` each one missing from the store is a Ray task (one
    GPU, or CPUs, each) on the Ray workers of the store's machine; rows then come as units
    finish, and two drivers sweeping one grid compute each derivation once (the store's leases).

    ``language`` (``--language``), like a parameter, goes where it reaches: to ``cb:`` data and
    to the tasks with a ``language`` parameter. ``options`` are the fields of
    :class:`SweepOptions` and of :class:`RunOptions` but ``device`` and ``recompute``.

    Raises:
        TypeError: a keyword that is no field of either.
        UnknownTask: before any work, for a task name nobody registered.
        UsageError: a parameter (or ``language``) no task of the sweep takes.
    """
    asked, how = split_keywords(options, SweepOptions, RunOptions)
    o: SweepOptions = options_of(SweepOptions, asked, "sweep")
    run: RunOptions = options_of(RunOptions, how, "sweep", without=("device", "recompute"))
    task_objs = [get_task(name) for name in tasks]  # unknown tasks fail before any work
    given = dict(o.params or {})
    unused = sorted(k for k in given if not any(k in t.params for t in task_objs))
    if o.language is not None and not any(applies(t, data, train_data) for t in task_objs):
        unused.append(field_ref("language"))
    if unused:
        raise UsageError(
            f"no task of this sweep takes {', '.join(unused)}",
            hint="see the parameters with: vbstore list tasks",
        )
    store = run.store if run.store is not None else Store()
    units = []
    for entry in entries:
        for task in task_objs:
            takes = task.shape_spec.train_input  # None for a task that takes no training data
            row: dict[str, Any] = {
                "backbone": entry.backbone,
                "label": entry.label,
                "task": task.name,
                "data": str(data),  # which data, when a sweep runs several (--datasets)
            }
            try:
                request = result_request(
                    entry.backbone,
                    task.name,
                    data,
                    takes(train_data),
                    split=o.split,
                    train_split=takes(o.train_split),
                    limit=o.limit,
                    train_limit=takes(o.train_limit),
                    seed=o.seed,
                    weights=entry.weights,
                    backbone_seed=entry.seed,
                    input_size=entry.input_size,
                    data_options=o.data_options,
                    params={k: v for k, v in given.items() if k in task.params},
                    language=o.language if applies(task, data, takes(train_data)) else None,
                    pooling=task.shape_spec.pooled_input(o.pooling),
                )
            except VbstoreError as exc:
                units.append(Unit(row, None, str(exc)))
                continue
            units.append(Unit(row, request))
    if run.executor is not None:
        yield from sweep_on_ray(run.executor, store, units, run.batch_size)
        return
    for done, unit in enumerate(units, 1):
        row = {**unit.row, "done": done, "total": len(units)}
        if unit.request is None:
            row["error"] = unit.error
            yield row
            continue
        try:
            with decode_once():  # one unit is one request
                result = execute(plan(unit.request, store), progress=run.progress,
                                 batch_size=run.batch_size)
            row.update(result_fields(unit.request.probe.task, result))
        except VbstoreError as exc:
            row["error"] = str(exc)
        yield row


BASE_COLUMNS = [
    "id",
    "task",
    "backbone",
    "weights",
    "input_size",
    "pooling",
    "finetune",
    "data",
    "split",
    "samples",
    "manifest",
    "seeds",
    "params",
    "baseline",
]
# when, how long and where each result was last computed: the run log (store.runs.last), or the
# record itself for a result stored before it; after the metric columns in csv and jsonl
RUN_COLUMNS = ["computed_at", "seconds", "device", "notes"]


def run_fields(store, oid: str, record: ResultRecord) -> dict[str, Any]:
    """``RUN_COLUMNS`` of a stored result (None where nothing says); ``notes``: the notes
    attached to it (``store.notes``, newest first, joined by ``; ``), or those a document
    stored before notes left it carries."""
    notes = "; ".join(store.notes.of(oid)) or record.notes
    run = store.runs.last(oid)
    if run is not None:
        return {"computed_at": utc(run.recorded), "seconds": run.seconds, "device": run.device,
                "notes": notes}
    return {"computed_at": None, "seconds": (record.timings or {}).get("total_s"),
            "device": record.device, "notes": notes}


def utc(when: float) -> str:
    """``2026-12-01T14:05:09Z``: a run's time as exports write it."""
    return datetime.fromtimestamp(when, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _spread(record: ResultRecord) -> dict[str, float]:
    """Per metric, the std over seeds (``_std``) and the 95% interval (``_ci_low``,
    ``_ci_high``): over eval samples when the result has one (the interval for comparing
    backbones), else over seeds."""
    out: dict[str, float] = {}
    aggregate, sample = record.aggregate or {}, record.sample_ci or {}
    for name in record.metrics:
        if name in aggregate:
            out[f"{name}_std"] = aggregate[name]["std"]
        interval = sample.get(name) or aggregate.get(name)
        if interval:
            out[f"{name}_ci_low"], out[f"{name}_ci_high"] = (interval["ci_low"],
                                                             interval["ci_high"])
    return out


def result_rows(
    store, task: str | None = None, backbone: str | None = None, weights: str | None = None
) -> list[dict[str, Any]]:
    """One flat row per stored result, filtered: ``BASE_COLUMNS``, then its metrics."""
    rows = []
    for info in store.ls("result"):
        if not store.has(info.id):
            continue
        record = ResultRecord.from_dict(store.read_json(info.id))
        if task and record.task != task:
            continue
        if (
            backbone
            and backbone not in record.spec
            and not record.inputs.get("backbone", "").startswith(backbone)
        ):
            continue
        if weights and record.weights_kind != weights:
            continue
        evaluation = record.eval_data
        row = {
            "id": info.id[:12],
            "task": record.task,
            "backbone": record.spec,
            "weights": record.weights_kind,
            "data": data_name(store, evaluation.get("manifest")),
            "manifest": evaluation.get("manifest", "")[:12],
            "split": evaluation.get("split"),
            "samples": evaluation.get("samples"),
            "seeds": len(record.seeds or [record.seed]),
            "input_size": (record.extractor or {}).get("input_size"),
            "pooling": (record.extractor or {}).get("pooling"),
            "finetune": finetune_label(record),  # frozen, or blocks=N backbone_lr=LR
            "params": " ".join(f"{k}={v}" for k, v in sorted(record.params.items())),
        }
        baseline = record.baseline or {}
        row["baseline"] = baseline.get("value")  # the headline's trivial predictor
        metrics = ordered_metrics(record.task, record.metrics, record.params)
        row.update({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
        row.update(run_fields(store, info.id, record))
        row.update(_spread(record))
        rows.append(row)
    return rows
