"""Executing a plan: its steps are walked, the runner it holds scores them, then the result
record is made and stored.

Everything here runs only on a cache miss; torch is imported lazily by the pieces it calls.
``compute_result`` runs the runner's checks, walks the plan's steps in order (``Plan.walk``:
featuresets or prefixes, heads, derived views, captions; each made by its ``Step.make``, from
the store or computed), and the plan's runner (``._runners``) scores the result from what they
made: through a ``._toolbox.Feed``, pooled ``(N, C)`` vectors with per-sample targets, dense
maps pooled to a grid, or a ``PackSplit`` that streams dense maps and per-pixel targets in
batches.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import replace
from importlib import metadata
from typing import Any

from .. import __version__
from ..records import RESULT_SCHEMA_VERSION, ResultRecord
from ..store import Made
from ..tasks import aggregate_seeds
from ..tasks.bootstrap import sample_ci
from ._baseline import baseline_fields
from ._device import resolve_device
from ._plan import named_pooling
from ._planned import Plan
from ._requests import ResultRequest
from ._run import Run

# Local imports: torch loads where tensors are made; a cached head (get_head) goes through this
# module without it.


def versions() -> dict[str, str | None]:
    """Versions recorded in every result (read from package metadata: nothing is imported)."""
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {"vbstore": __version__, "python": platform.python_version(), "torch": version("torch"),
            "timm": version("timm"), "open_clip": version("open_clip_torch"),
            "torchvision": version("torchvision")}


def compute_result(plan: Plan, run: Run, fresh_heads: bool = False) -> Made[ResultRecord]:
    """Walk the plan's steps (each input made, from the store or computed), score them with
    the runner the plan holds, and store the result record; return its id and the record (what
    is returned, never read back)."""
    runner = plan.runner
    runner.prepare(plan)  # refused before any step is made (box class lists)
    run.fresh_heads = fresh_heads
    plan.walk(run)
    evaluation, scored = runner.run(plan, run, fresh_heads)
    edges: dict[str, Any] = {"backbone": plan.backbone.id, "eval_manifest": plan.eval_m.id,
                             **({"eval_features": evaluation.id} if evaluation else {}),
                             **scored.edges}
    start = time.perf_counter()
    # no feed, no baseline: a shape that reads no features has no trivial predictor of them
    found = runner.baseline(plan, evaluation, scored) if evaluation is not None else None
    run.timings["baseline_s"] = round(time.perf_counter() - start, 4)
    result = _record(plan, scored.per_seed, scored.train_metrics, scored.comparable, edges)
    warnings = [*plan.notes, *(result.warnings or [])] or None
    result = replace(result, **baseline_fields(plan, found, result.metrics, warnings))
    if scored.eval_data:
        data = dict(result.data or {})
        result = replace(result, data={**data, "eval": {**data["eval"], **scored.eval_data}})
    result = replace(result, **_sample_ci_fields(scored.draws, plan.task.ci_skip_reason))
    store = plan.store
    oid = store.put_json(result.to_dict(), "result", edges=edges)
    # when, where and how long: the registry's run log, not the hashed document, so the same
    # computation is the same result id in any store
    store.runs.record(oid, device=_device_name(run), timings=run.timings,
                      seconds=round(time.perf_counter() - plan.started, 4),
                      features_from_cache=all(run.from_cache.values()))
    return Made(oid, result)


def _sample_ci_fields(draws: list[dict[str, Any]], skip: str) -> dict[str, Any]:
    """``sample_ci`` of the draws averaged over heads (the metrics are means over seeds too), or
    ``sample_ci_skipped`` with the reason."""
    if skip:
        return {"sample_ci_skipped": skip}
    import numpy as np  # with torch, already loaded on this compute path

    names = sorted(draws[0]) if draws else []
    mean = {k: np.mean([d[k] for d in draws], axis=0) for k in names}
    ci = sample_ci(mean)
    return {"sample_ci": ci} if ci else {"sample_ci_skipped": "the metrics are undefined on "
                                                             "every bootstrap draw"}


def _record(plan: Plan, per_seed, train_metrics, comparable, edges) -> ResultRecord:
    store, seeds = plan.store, plan.request.probe.seed_list
    weights = store.read_json(plan.backbone.doc["weights"])
    inputs = {k: v for k, v in edges.items() if isinstance(v, str)}
    # one per seed (fine-tuned weights: a seed's head's; captions: a sampling decoding's)
    for role in ("head", "finetuned", "captions"):
        if edges.get(role):
            inputs.update({f"{role}.{i}": h for i, h in enumerate(edges[role])}
                          if len(edges[role]) > 1 else {role: edges[role][0]})
    inputs["weights"] = plan.backbone.doc["weights"]
    data = {"eval": {"manifest": plan.eval_m.id, "split": plan.eval_m.split,
                     "samples": len(plan.eval_m)}}
    if plan.train_m is not None:
        data["train"] = {"manifest": plan.train_m.id, "split": plan.train_m.split,
                         "samples": len(plan.train_m)}
    metrics, aggregate = dict(per_seed[0]), None
    if len(seeds) > 1:
        aggregate = aggregate_seeds(per_seed)
        metrics = {k: v["mean"] for k, v in aggregate.items()}
    same = plan.train_m is not None and plan.train_m.id == plan.eval_m.id
    warnings = (["trained and evaluated on the same samples: the metrics are train metrics"]
                if same else [])
    if len(seeds) > 1 and not plan.task.uses_seed(plan.task_params):
        warnings.append(f"{plan.task.name} ignores the seed: the {len(seeds)} seeds ran the same "
                        "computation, so their spread is 0 by construction")
    request = plan.request
    assert isinstance(request, ResultRequest)  # a result's plan, never a head's
    dataset, dataset_params = request.data.described()
    trained = [m for m in train_metrics if m]
    train_aggregate = aggregate_seeds(trained) if len(trained) > 1 else None
    return ResultRecord(
        task=plan.task.name, op_version=plan.task.op_version, level=plan.task.level,
        params=plan.task.keyed_params(plan.task_params), seed=seeds[0], seeds=seeds,
        metrics=metrics, inputs=inputs,
        backbone={"spec": plan.backbone.request.get("spec") or plan.backbone.doc["architecture"],
                  "source": plan.backbone.doc["source"],
                  "architecture": plan.backbone.doc["architecture"]},
        weights_kind=weights["origin"], data=data,
        # a shape that reads no features (generate) records no extractor
        extractor=plan.extractor.to_dict() if plan.extractor is not None else None,
        versions=versions(), comparable=comparable,
        warnings=warnings or None,
        train_metrics=train_metrics[0] if train_metrics and train_metrics[0] else None,
        per_seed=per_seed if len(seeds) > 1 else None, aggregate=aggregate,
        train_aggregate=train_aggregate,
        protocol=getattr(plan.task, "protocol", None),
        extra={"kind": "result"},  # as the store writes it: the record returned is the one stored
        schema_version=RESULT_SCHEMA_VERSION, dataset=dataset, dataset_params=dataset_params,
        pooling_requested=named_pooling(plan.task, request, plan.backbone) or "default",
        finetune=plan.finetune,
    )


def _device_name(run: Run) -> str:
    if "torch" not in sys.modules:  # scored in numpy from stored rows: nothing left the CPU
        return f"cpu:{platform.machine()}"
    import torch

    device = resolve_device(run.device)
    if device.startswith("cuda"):
        return f"cuda:{torch.cuda.get_device_name()}"
    return f"cpu:{platform.machine()}"
