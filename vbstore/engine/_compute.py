"""The computing half of ``get_result``: features, heads, metrics and the result record.

Everything here runs only on a cache miss; torch is imported lazily by the pieces it calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..store import derivation_spec
from ._cache import remote_fetch
from ._device import resolve_device


@dataclass
class Inputs:
    """Everything ``compute_result`` needs, resolved by ``get_result``."""

    store: Any
    task: Any
    task_params: dict[str, Any]
    ref: Any
    eval_m: Any
    train_m: Any
    extractor: Any
    seeds: list[int]
    head: str | None
    strict: bool
    device: str | None
    progress: bool
    started: float
    derivation: str
    executor: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    from_cache: dict[str, bool] = field(default_factory=dict)


def featureset(job: Inputs, manifest, role: str) -> str:
    """The featureset of ``manifest`` (``role``: eval or train), from the store or extracted now."""
    from ._features import derive_featureset

    start = time.perf_counter()
    oid, computed, _ = derive_featureset(job.store, job.ref, manifest, job.extractor,
                                         device=job.device, progress=job.progress,
                                         executor=job.executor)
    job.timings[f"{role}_features_s"] = round(time.perf_counter() - start, 4)
    job.from_cache[f"{role}_features"] = not computed
    return oid


def lazy_pooled(store, featureset_id: str):
    """A function returning the featureset's pooled features, loaded once on first call."""
    cache: dict[str, Any] = {}

    def load():
        if "x" not in cache:
            from ..features import Features

            cache["x"] = Features(store, featureset_id).pooled()
        return cache["x"]

    return load


def targets(task, manifest, classes=None):
    """The targets of a manifest in the form ``task.target_kind`` asks for.

    ``classes`` (the training classes) re-indexes labels by class name, so an eval split read
    with another class list is still scored against the right head outputs.
    """
    import torch

    if task.target_kind == "class_index":
        return torch.tensor(manifest.labels(classes=classes), dtype=torch.long)
    if task.target_kind == "multi_hot":
        return torch.as_tensor(manifest.multi_hot(classes=classes), dtype=torch.float32)
    return None


def _compat(job: Inputs, features_id: str, embed_dim: int) -> dict[str, Any]:
    weights = job.store.read_json(job.ref.doc["weights"])
    ext = job.extractor
    return {"backbone": job.ref.id, "weights": weights["tensor_hash"],
            "input_size": job.ref.doc["preprocessing"]["input_size"],
            "extractor_key": job.store.read_json(features_id)["extractor_key"],
            "pooling": ext.pooling, "layers": list(ext.layers), "feature_mode": ext.mode,
            "embed_dim": embed_dim, "task": job.task.name, "task_op_version": job.task.op_version}


def train_head(job: Inputs, train_features: str, feats, seed: int, fresh: bool = False
               ) -> tuple[str, bool]:
    """Fit (or fetch) the head for one seed; return its id and whether it was trained now."""
    from ..heads import save_head

    store, task = job.store, job.task
    spec = derivation_spec("head", task.op_version, {"features": train_features},
                           {"task": task.name, "task_params": job.task_params, "seed": seed})
    classes = job.train_m.doc.get("classes") or None

    def compute() -> str:
        state, train_metrics = task.fit(feats(), targets(task, job.train_m), job.task_params, seed,
                                        classes)
        compat = {**_compat(job, train_features, int(feats().shape[1])), "params": job.task_params,
                  "seed": seed, "class_names": classes or [], "train_manifest": job.train_m.id,
                  "train_metrics": train_metrics}
        return save_head(store, state, compat, edges={"features": train_features,
                                                      "train_manifest": job.train_m.id})

    if fresh:
        oid = compute()
        store.record(spec, oid)
        return oid, True
    return store.derive(spec, compute, fetch=remote_fetch(store))


def compute_result(job: Inputs, fresh_heads: bool = False) -> str:
    """Compute every missing input, evaluate, and store the result record; return its id."""
    from ..features import Features
    from ..heads import head_record, load_head

    store, task = job.store, job.task
    eval_features = featureset(job, job.eval_m, "eval")
    eval_x = Features(store, eval_features).pooled()
    if job.head is not None:  # a given head fixes the class order it was trained with
        classes = head_record(store, job.head).get("class_names") or None
    else:
        classes = job.train_m.classes if job.train_m is not None else None
    eval_y = targets(task, job.eval_m, classes)
    edges: dict[str, Any] = {"backbone": job.ref.id, "eval_manifest": job.eval_m.id,
                             "eval_features": eval_features}
    per_seed, train_metrics, comparable = [], [], True
    start = time.perf_counter()
    if task.zero_shot:
        context = {"class_names": job.eval_m.doc.get("classes", []),
                   "captions": [s.get("captions", []) for s in job.eval_m.doc["samples"]]}
        if task.needs_text:
            context["text_encoder"] = job.ref.load().encode_text
        metrics = task.evaluate_zero_shot(eval_x, eval_y, job.task_params, context)
        per_seed = [metrics for _ in job.seeds]
    else:
        heads = []
        if job.head is not None:
            heads = [job.head]
        else:
            train_features = featureset(job, job.train_m, "train")
            edges.update(train_manifest=job.train_m.id, train_features=train_features)
            feats = lazy_pooled(store, train_features)
            heads = [train_head(job, train_features, feats, seed, fresh_heads)[0] for seed in job.seeds]
        expected = _compat(job, eval_features, int(eval_x.shape[1]))
        for head in heads:
            state, record, ok = load_head(store, head, expected, strict=job.strict)
            comparable = comparable and ok
            per_seed.append(task.evaluate(state, eval_x, eval_y, job.task_params))
            train_metrics.append(record.get("train_metrics", {}))
        if job.head is not None:
            per_seed = per_seed * len(job.seeds)
        edges["head"] = heads
    job.timings["evaluate_s"] = round(time.perf_counter() - start, 4)
    record = _record(job, per_seed, train_metrics, comparable, edges)
    return store.put_json(record, "result", edges=edges)


def _record(job: Inputs, per_seed, train_metrics, comparable, edges) -> dict[str, Any]:
    from ..tasks import aggregate_seeds
    from ._results import versions

    store = job.store
    weights = store.read_json(job.ref.doc["weights"])
    inputs = {k: v for k, v in edges.items() if isinstance(v, str)}
    if "head" in edges:
        inputs.update({f"head.{i}": h for i, h in enumerate(edges["head"])} if len(edges["head"]) > 1
                      else {"head": edges["head"][0]})
    inputs["weights"] = job.ref.doc["weights"]
    record: dict[str, Any] = {
        "task": job.task.name, "op_version": job.task.op_version, "level": job.task.level,
        "params": job.task_params, "seed": job.seeds[0], "seeds": job.seeds,
        "metrics": dict(per_seed[0]), "inputs": inputs,
        "backbone": {"spec": job.ref.request.get("spec") or job.ref.doc["architecture"],
                     "source": job.ref.doc["source"], "architecture": job.ref.doc["architecture"]},
        "weights_kind": weights["origin"],
        "extractor": job.extractor.to_dict(),
        "data": {"eval": {"manifest": job.eval_m.id, "split": job.eval_m.doc.get("split"),
                          "samples": len(job.eval_m.doc["samples"])}},
        "versions": versions(),
        "device": _device_name(job),
        "features_from_cache": all(job.from_cache.values()),
        "comparable": comparable,
    }
    if job.train_m is not None:
        record["data"]["train"] = {"manifest": job.train_m.id, "split": job.train_m.doc.get("split"),
                                   "samples": len(job.train_m.doc["samples"])}
    if job.train_m is not None and job.train_m.id == job.eval_m.id:
        record["warnings"] = ["trained and evaluated on the same samples: the metrics are train metrics"]
    if train_metrics and train_metrics[0]:
        record["train_metrics"] = train_metrics[0]
    if len(job.seeds) > 1:
        record["per_seed"] = per_seed
        record["aggregate"] = aggregate_seeds(per_seed)
        record["metrics"] = {k: v["mean"] for k, v in record["aggregate"].items()}
    record["timings"] = {**job.timings, "total_s": round(time.perf_counter() - job.started, 4)}
    return record


def _device_name(job: Inputs) -> str:
    import torch

    device = resolve_device(job.device)
    if device.startswith("cuda"):
        return f"cuda:{torch.cuda.get_device_name()}"
    import platform

    return f"cpu:{platform.machine()}"
