"""``get_result``: the lazy walk result → head → featureset → manifest/backbone.

A result's derivation key is made from cheap ids only (backbone, manifests, head) plus every
setting (extractor, task params, seeds), so a cached result is found without touching features,
and therefore without importing torch. Only on a miss are features, heads and metrics computed,
each through its own derivation, so a second task on the same features runs no forward pass.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..errors import NotReproduced, UsageError
from ..store import derivation_key, derivation_spec
from ._backbone import resolve_backbone
from ._cache import remote_fetch
from ._compute import Inputs, compute_result, featureset, lazy_pooled, train_head

RECORD_VERSION = 2  # 2: records carry warnings (same train and eval data)


@dataclass
class Result:
    """A result record and how it was obtained."""

    id: str
    record: dict[str, Any]
    from_cache: bool
    seconds: float
    reproduced: dict[str, Any] | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        return self.record["metrics"]

    def as_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "from_cache": self.from_cache, "seconds": round(self.seconds, 4),
               "record": self.record}
        if self.reproduced is not None:
            out["reproduced"] = self.reproduced
        return out


@dataclass
class HeadResult:
    """A stored head, its compatibility record, and how it was obtained."""

    id: str
    record: dict[str, Any]
    from_cache: bool
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "from_cache": self.from_cache, "seconds": round(self.seconds, 4),
                "record": self.record}


def versions() -> dict[str, str | None]:
    """Versions recorded in every result (read from package metadata: nothing is imported)."""
    from importlib import metadata

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {"vbstore": __version__, "python": platform.python_version(), "torch": version("torch"),
            "timm": version("timm"), "open_clip": version("open_clip_torch"),
            "torchvision": version("torchvision")}


def _check_data_args(task, train_data, head) -> None:
    if task.zero_shot and train_data is not None:
        raise UsageError(f"task {task.name!r} is zero-shot and takes no training data",
                         hint="drop --train-data")
    if task.zero_shot and head is not None:
        raise UsageError(f"task {task.name!r} is zero-shot and uses no head", hint="drop --head")
    if task.trains_head and train_data is None and head is None:
        raise UsageError(f"task {task.name!r} trains a head on training data",
                         hint="pass --train-data DATA (and --train-split if it has splits)")


def _prepare(store, task_obj, params, backbone, weights, backbone_seed, input_size, layers, precision):
    """Resolve the task params, the backbone and the extractor settings (no torch)."""
    from ..features import ExtractorParams

    task_params = task_obj.resolve_params(params)
    if task_obj.needs_text and isinstance(backbone, str):
        from ..backbones import parse_spec

        if parse_spec(backbone).source != "open_clip":
            raise UsageError(f"task {task_obj.name!r} compares images with text and needs a CLIP "
                             f"backbone, not {backbone!r}",
                             hint="use an open_clip:MODEL@TAG backbone (vbstore list backbones 'open_clip*')")
    ref = resolve_backbone(store, backbone, weights=weights, seed=backbone_seed,
                           input_size=input_size, use_projection=task_obj.needs_text)
    pooling = ref.default_pooling if task_obj.pooling == "default" else task_obj.pooling
    extractor = ExtractorParams(layers=tuple(layers or (-1,)), pooling=pooling,
                                mode=task_obj.feature_mode, precision=precision, input_size=input_size)
    return task_params, ref, extractor


def _manifest(store, data, split, limit, data_options, flag: str = "--split"):
    from ..data import load_manifest

    try:
        return load_manifest(store, data, split=split, limit=limit, **(data_options or {}))
    except UsageError as exc:
        if flag != "--split" and "--split" in exc.hint:  # name the flag this data came with
            exc.hint = exc.hint.replace("--split", flag)
        raise


def get_head(
    backbone: Any, task: str, train_data: Any, *, store=None, train_split: str | None = None,
    train_limit: int | None = None, seed: int = 0, weights: str = "default",
    backbone_seed: int | None = None, input_size: int | None = None, layers: list[int] | None = None,
    precision: str = "fp32", device: str | None = None, progress: bool = True,
    data_options: dict[str, Any] | None = None, **params: Any,
) -> HeadResult:
    """The probe head of ``task`` trained on ``train_data`` features: from the store, a remote,
    or trained now.

    Raises:
        UsageError: the task is zero-shot (it has no head).
    """
    from ..heads import head_record
    from ..store import Store

    started = time.perf_counter()
    store = store if store is not None else Store()
    from ..tasks import get_task

    task_obj = get_task(task)
    if not task_obj.trains_head:
        raise UsageError(f"task {task_obj.name!r} is zero-shot and has no head",
                         hint="use `vbstore get result` for it")
    task_params, ref, extractor = _prepare(
        store, task_obj, params, backbone, weights, backbone_seed, input_size, layers, precision)
    train_m = _manifest(store, train_data, train_split, train_limit, data_options, "--train-split")
    job = Inputs(store=store, task=task_obj, task_params=task_params, ref=ref, eval_m=train_m,
                 train_m=train_m, extractor=extractor, seeds=[seed], head=None, strict=True,
                 device=device, progress=progress, started=started, derivation="")
    train_features = featureset(job, train_m, "train")
    oid, trained = train_head(job, train_features, lazy_pooled(store, train_features), seed)
    return HeadResult(oid, head_record(store, oid), not trained, time.perf_counter() - started)


def get_result(
    backbone: Any, task: str, data: Any, train_data: Any = None, *, store=None,
    split: str | None = None, train_split: str | None = None, limit: int | None = None,
    train_limit: int | None = None, seed: int = 0, seeds: int = 1, recompute: bool = False,
    head: str | None = None, strict: bool = True, weights: str = "default",
    backbone_seed: int | None = None, input_size: int | None = None,
    layers: list[int] | None = None, precision: str = "fp32", device: str | None = None,
    progress: bool = True, data_options: dict[str, Any] | None = None, **params: Any,
) -> Result:
    """A probe's metrics for ``backbone`` on ``data``, computing only what the store lacks.

    ```python
    r = vbstore.get_result("torchvision:resnet18", "knn", "data/", split="val",
                           train_data="data/", train_split="train", k=10)
    r.metrics["top1"]; r.from_cache
    ```

    Raises:
        UsageError: training data given to a zero-shot task, or missing for a trained one; an
            unknown or invalid task parameter.
        UnknownTask, UnknownBackbone, WeightsUnavailable, BadInput, HeadMismatch: from below.
    """
    from ..features import OP_VERSION as FEATURES_VERSION
    from ..store import Store

    started = time.perf_counter()
    store = store if store is not None else Store()
    from ..tasks import get_task

    task_obj = get_task(task)
    _check_data_args(task_obj, train_data, head)
    if seeds < 1:
        raise UsageError("--seeds must be at least 1", hint="use --seeds 1 for a single run")
    task_params, ref, extractor = _prepare(
        store, task_obj, params, backbone, weights, backbone_seed, input_size, layers, precision)
    eval_m = _manifest(store, data, split, limit, data_options)
    train_m = (_manifest(store, train_data, train_split, train_limit, data_options, "--train-split")
               if train_data else None)
    head_id = store.resolve(head) if head is not None else None
    inputs = {"backbone": ref.id, "eval_manifest": eval_m.id}
    if train_m is not None:
        inputs["train_manifest"] = train_m.id
    if head_id is not None:
        inputs["head"] = head_id
    seed_list = [seed + i for i in range(seeds)]
    spec = derivation_spec("result", task_obj.op_version, inputs, {
        "task": task_obj.name, "task_params": task_params, "seeds": seed_list,
        "extractor": extractor.to_dict(), "features_op_version": FEATURES_VERSION,
        "record_version": RECORD_VERSION, **({"strict": strict} if head_id else {}),
    })
    job = Inputs(store=store, task=task_obj, task_params=task_params, ref=ref, eval_m=eval_m,
                 train_m=train_m, extractor=extractor, seeds=seed_list, head=head_id, strict=strict,
                 device=device, progress=progress, started=started,
                 derivation=derivation_key(spec))
    if recompute:
        return _recompute(store, spec, job, started)
    oid, computed = store.derive(spec, lambda: compute_result(job), fetch=remote_fetch(store))
    return Result(oid, store.read_json(oid), not computed, time.perf_counter() - started)


def _recompute(store, spec, job, started) -> Result:
    """Compute the result afresh (heads retrained, features reused) and compare with the stored one.

    Raises:
        NotReproduced: the numbers differ; the new result is recorded and carried by the error.
    """
    key = derivation_key(spec)
    previous = store.lookup(key)
    with store.lease(key, inputs=list(spec["inputs"].values())):
        oid = compute_result(job, fresh_heads=True)
        store.record(spec, oid)
    record = store.read_json(oid)
    comparison = None
    if previous is not None:
        old = store.read_json(previous)["metrics"]
        diffs = {k: abs(float(record["metrics"][k]) - float(old[k]))
                 for k in record["metrics"] if k in old and isinstance(old[k], (int, float))}
        worst = max(diffs.values(), default=0.0)
        comparison = {"previous": previous, "max_abs_diff": worst, "reproduced": worst <= 1e-6}
    result = Result(oid, record, False, time.perf_counter() - started, comparison)
    if comparison is not None and not comparison["reproduced"]:
        raise NotReproduced(result, previous, diffs)
    return result
