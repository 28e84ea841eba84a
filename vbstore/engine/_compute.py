"""Executing a plan: features, heads, metrics and the result record.

Everything here runs only on a cache miss; torch is imported lazily by the pieces it calls. A
task reads its inputs through one of two feeds, chosen by its declared ``feature_mode``: pooled
``(N, C)`` vectors with per-sample targets, or a :class:`PackSplit` that streams dense maps and
per-pixel targets in batches.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Any

from .. import __version__
from ..backbones import BackboneCfg
from ..data import warped_views
from ..errors import UsageError
from ..heads import head_record, load_head, save_head
from ..records import ResultRecord
from ..store import derivation_key
from ..tasks import BOX_TARGETS, KeypointPairs, WarpPairs, aggregate_seeds
from ..tasks.bootstrap import bootstrap_evaluate, bootstrap_per_sample, sample_ci
from ._baseline import baseline_fields, compute_baseline
from ._cache import remote_fetch
from ._device import resolve_device
from ._features import derive_featureset, featureset_spec
from ._plan import Plan, head_spec
from ._requests import param_files

# Local imports: torch loads where tensors are made; a cached head (get_head) goes through this
# module without it.


@dataclass
class Run:
    """How a plan is executed: device, progress, executor, and what the run measured.

    Attributes:
        executor: Extracts features elsewhere (``vbstore.features.make_executor``: Ray); None
            extracts in this process.
        computed: derivation keys this run computed (not found stored or on a remote), in order.
        extracted: images this run sent through the backbone.
    """

    device: str | None = None
    progress: bool | Callable[..., Any] = True
    batch_size: int = 32
    executor: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    from_cache: dict[str, bool] = field(default_factory=dict)
    computed: list[str] = field(default_factory=list)
    extracted: int = 0
    # role -> id, images extracted now and rows reused, per feature set read
    features: dict[str, dict[str, Any]] = field(default_factory=dict)


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


class Feed:
    """A task's inputs for one featureset: pooled tensors or a dense split, loaded on first use."""

    def __init__(self, plan: Plan, run: Run, features_id: str, manifest) -> None:
        self.plan, self.run, self.id, self.manifest = plan, run, features_id, manifest
        self._x: Any = None
        self._split: Any = None

    @property
    def dense(self) -> bool:
        """Whether the task reads a dense split (a pair task on dense maps reads vectors)."""
        return self.plan.task.feature_mode == "dense" and self.plan.task.target_kind != "pairs"

    def pooled(self):
        if self._x is None:
            if self.plan.task.feature_mode == "dense":  # pooled dense: the grid, average-pooled
                self._x = self._grid_pooled(self.plan.task_params.get("grid", 1))
            else:
                from ..features import Features  # torch: only when features are read

                self._x = Features(self.plan.store, self.id).pooled()
        return self._x

    def _grid_pooled(self, grid: int):
        """(N, C * grid * grid): each dense map of the last layer average-pooled to a grid x grid
        map of cells, flattened channel-major."""
        import torch

        split, rows = self.split(), []
        for start in range(0, len(split), 256):
            feats = split.feats(list(range(start, min(start + 256, len(split)))))[-1]
            rows.append(torch.nn.functional.adaptive_avg_pool2d(feats, grid).flatten(1))
        return torch.cat(rows).cpu()

    def split(self):
        if self._split is None:
            from ._dense import PackSplit  # torch and numpy: only when a dense task computes

            plan = self.plan
            self._split = PackSplit(plan.store, self.id, self.manifest,
                                    plan.backbone.doc["preprocessing"], plan.task.target_kind,
                                    plan.task_params.get("target_scale"),
                                    resolve_device(self.run.device))
        return self._split

    def width(self) -> int:
        return self.split().channels[-1] if self.dense else int(self.pooled().shape[1])

    def targets(self, classes=None):
        """Per-sample targets in the form ``task.target_kind`` asks for.

        ``classes`` (the training classes) re-indexes labels by class name, so an eval split read
        with another class list is still scored against the right head outputs.
        """
        import torch

        kind = self.plan.task.target_kind
        if kind == "class_index":
            return torch.tensor(self.manifest.labels(classes=classes), dtype=torch.long)
        if kind == "multi_hot":
            return torch.as_tensor(self.manifest.multi_hot(classes=classes), dtype=torch.float32)
        if kind == "triplets":  # [ref, left, right, left_vote, right_vote] rows of the manifest
            return torch.tensor(self.manifest.doc.get("triplets") or [], dtype=torch.long)
        if kind == "pairs":  # [a, b, qw, qx, qy, qz, tx, ty, tz] rows of the manifest
            return torch.tensor(self.manifest.doc.get("pairs") or [],
                                dtype=torch.float64).reshape(-1, 9)
        return None


def featureset(plan: Plan, run: Run, manifest, role: str) -> str:
    """The featureset of ``manifest`` (``role``: eval or train), from the store or extracted now."""
    start = time.perf_counter()
    oid, computed, stats = derive_featureset(plan.store, plan.backbone, manifest, plan.settings,
                                             device=run.device, progress=run.progress,
                                             batch_size=run.batch_size, executor=run.executor)
    if computed:
        run.computed.append(derivation_key(featureset_spec(plan.backbone.id, manifest.id,
                                                           plan.settings)))
        run.extracted += int(stats.get("extracted", 0))
    run.timings[f"{role}_features_s"] = round(time.perf_counter() - start, 4)
    # a new featureset assembled from stored rows (another target over the same images) ran no
    # forward pass either: features_from_cache says whether the backbone ran
    run.from_cache[f"{role}_features"] = not computed or stats.get("extracted", 1) == 0
    extracted_now = int(stats.get("extracted", 0)) if computed else 0
    reused = int(stats.get("reused", 0)) if computed else len(manifest)
    run.features[role] = {"id": oid, "extracted": extracted_now, "reused": reused,
                          "stored": not computed}
    return oid


def compat(plan: Plan, features_id: str, embed_dim: int) -> dict[str, Any]:
    """What a head fit on (or applied to) these features must agree on."""
    weights = plan.store.read_json(plan.backbone.doc["weights"])
    ext = plan.settings
    return {"backbone": plan.backbone.id, "weights": weights["tensor_hash"],
            "input_size": plan.backbone.doc["preprocessing"]["input_size"],
            "extractor_key": plan.store.read_json(features_id)["extractor_key"],
            "pooling": ext.pooling, "layers": list(ext.layers), "feature_mode": ext.mode,
            "embed_dim": embed_dim, "task": plan.task.name, "task_op_version": plan.task.op_version}


def train_head(plan: Plan, run: Run, train: Feed, seed: int, fresh: bool = False,
               answered: dict[str, str] | None = None
               ) -> tuple[str, bool]:
    """Fit (or fetch) the head for one seed; return its id and whether it was trained now."""
    store, task = plan.store, plan.task
    spec = head_spec(task, plan.task_params, train.id, seed)
    classes = plan.train_m.doc.get("classes") or None

    def compute() -> str:
        if train.dense:
            state, train_metrics = task.fit_split(train.split(), plan.task_params, seed, classes)
        else:
            state, train_metrics = task.fit(train.pooled(), train.targets(), plan.task_params, seed,
                                            classes)
        record = {**compat(plan, train.id, train.width()), "params": plan.task_params, "seed": seed,
                  "class_names": classes or [], "train_manifest": plan.train_m.id,
                  "train_metrics": train_metrics}
        return save_head(store, state, record, edges={"features": train.id,
                                                      "train_manifest": plan.train_m.id})

    if fresh:
        oid = compute()
        run.computed.append(store.record(spec, oid))
        return oid, True
    oid, trained = store.derive(spec, compute, fetch=remote_fetch(store, answered))
    if trained:
        run.computed.append(derivation_key(spec))
    return oid, trained


def compute_result(plan: Plan, run: Run, fresh_heads: bool = False) -> str:
    """Compute every missing input, evaluate, and store the result record; return its id."""
    store, task = plan.store, plan.task
    if task.target_kind in BOX_TARGETS:
        _check_box_classes(plan)
    evaluation = Feed(plan, run, featureset(plan, run, plan.eval_m, "eval"), plan.eval_m)
    edges: dict[str, Any] = {"backbone": plan.backbone.id, "eval_manifest": plan.eval_m.id,
                             "eval_features": evaluation.id}
    per_seed, train_metrics, comparable = [], [], True
    draws: list[dict[str, Any]] = []  # bootstrap draws over eval samples, one set per head
    skip = sample_ci_skip(task)
    train, targets = None, None
    start = time.perf_counter()
    if task.views == "homography":
        views = _views(plan, run, evaluation)
        edges.update(views_manifest=views.manifest.id, views_features=views.id)
        per_seed = [task.evaluate_views(_warp_pairs(plan, evaluation, views), plan.task_params)
                    ] * len(plan.request.probe.seed_list)
    elif task.views == "keypoints":
        per_seed = [task.evaluate_views(_keypoint_pairs(plan, evaluation), plan.task_params)
                    ] * len(plan.request.probe.seed_list)
    elif task.zero_shot:
        files = param_files(store, task, plan.task_params)
        edges.update({key: plan.task_params[key] for key in files})  # gc keeps them with the result
        per_seed = [_zero_shot(plan, evaluation, files)] * len(plan.request.probe.seed_list)
        if not skip:
            draws.append(_zero_shot_draws(plan, evaluation, run))
    else:
        if plan.head is not None:
            heads = [plan.head]
            classes = head_record(store, plan.head).get("class_names") or None
        else:
            train = Feed(plan, run, featureset(plan, run, plan.train_m, "train"), plan.train_m)
            edges.update(train_manifest=plan.train_m.id, train_features=train.id)
            heads = [train_head(plan, run, train, seed, fresh_heads)[0]
                     for seed in plan.request.probe.seed_list]
            classes = plan.train_m.classes
        expected = compat(plan, evaluation.id, evaluation.width())
        targets = None if evaluation.dense else evaluation.targets(classes)
        for head in heads:
            state, record, ok = load_head(store, head, expected, strict=plan.request.probe.strict)
            comparable = comparable and ok
            if evaluation.dense:
                per_seed.append(task.evaluate_split(state, evaluation.split(), plan.task_params))
            else:
                assert targets is not None  # a trained pooled task has per-sample targets
                per_seed.append(task.evaluate(state, evaluation.pooled(), targets,
                                              plan.task_params))
                if not skip:
                    draws.append(_head_draws(plan, state, evaluation, targets, run))
            train_metrics.append(record.get("train_metrics", {}))
        if plan.head is not None:
            per_seed = per_seed * len(plan.request.probe.seed_list)
        edges["head"] = heads
    run.timings["evaluate_s"] = round(time.perf_counter() - start, 4)
    start = time.perf_counter()
    found = compute_baseline(plan, evaluation, train, targets)
    run.timings["baseline_s"] = round(time.perf_counter() - start, 4)
    result = _record(plan, run, per_seed, train_metrics, comparable, edges)
    warnings = [*plan.notes, *(result.warnings or [])] or None
    result = replace(result, **baseline_fields(plan, found, result.metrics, warnings))
    if evaluation.dense and task.target_kind in BOX_TARGETS:  # boxes the crop cut off
        data = dict(result.data or {})
        data = {**data, "eval": {**data["eval"],
                                        "boxes_dropped": evaluation.split().boxes_dropped}}
        result = replace(result, data=data)
    result = replace(result, **_sample_ci_fields(draws, skip))
    return store.put_json(result.to_dict(), "result", edges=edges)


def _views(plan: Plan, run: Run, evaluation: Feed) -> Feed:
    """The derived views of the eval images (stored once) and their features."""
    params = plan.task_params
    views = warped_views(plan.store, evaluation.manifest, params["warp_seed"], params["max_warp"])
    return Feed(plan, run, featureset(plan, run, views, "views"), views)


def _warp_pairs(plan: Plan, evaluation: Feed, views: Feed) -> WarpPairs:
    from ..data import image_sizes, view_homographies  # numpy: only when views are scored

    pre = plan.backbone.doc["preprocessing"]
    cfg = BackboneCfg(**{**pre, "mean": tuple(pre["mean"]), "std": tuple(pre["std"])})
    params = plan.task_params
    return WarpPairs(evaluation.split(), views.split(),
                     view_homographies(evaluation.manifest, params["warp_seed"],
                                       params["max_warp"]),
                     image_sizes(evaluation.manifest), cfg.geometry, cfg.input_size)


def _keypoint_pairs(plan: Plan, evaluation: Feed) -> KeypointPairs:
    from ..data import image_sizes  # numpy: only when pairs are scored

    pre = plan.backbone.doc["preprocessing"]
    cfg = BackboneCfg(**{**pre, "mean": tuple(pre["mean"]), "std": tuple(pre["std"])})
    return KeypointPairs(evaluation.split(), evaluation.manifest.doc.get("keypoint_pairs") or [],
                         image_sizes(evaluation.manifest), cfg.geometry, cfg.input_size)


def _check_box_classes(plan: Plan) -> None:
    """Box class indices mean the class list they were read with: train and eval must share it
    (checked before any work)."""
    if plan.head is not None:
        classes = head_record(plan.store, plan.head).get("class_names") or []
    else:
        classes = plan.train_m.classes
    if classes and plan.eval_m.classes != list(classes):
        raise UsageError(
            f"the eval boxes are labelled {plan.eval_m.classes[:5]}, the head's classes are "
            f"{list(classes)[:5]}: box class indices would not agree",
            hint="train and evaluate with one class list (--classes FILE)")


def sample_ci_skip(task) -> str:
    """Why the bootstrap over eval samples does not apply to ``task``; empty when it does."""
    if task.views is not None:
        return task.sample_ci_skip
    if task.feature_mode == "dense" and task.target_kind != "pairs":
        return ("dense task: each draw would stream every eval map through the head again "
                "(cost); only the spread over seeds is reported")
    if task.needs_text:
        return "each draw would run the text tower again (cost)"
    return task.sample_ci_skip


def _head_draws(plan: Plan, state, evaluation: Feed, targets, run: Run) -> dict[str, Any]:
    """Bootstrap draws of one fitted head: from per-sample values when the task has them."""
    task, params, feats = plan.task, plan.task_params, evaluation.pooled()
    start = time.perf_counter()
    values = task.per_sample(state, feats, targets, params)
    if values is not None:
        out = bootstrap_per_sample(values)
    else:
        out = _redraw(lambda f, t: task.evaluate(state, f, t, params), feats, targets,
                      task.target_kind)
    run.timings["sample_ci_s"] = round(run.timings.get("sample_ci_s", 0.0)
                                       + time.perf_counter() - start, 4)
    return out


def _zero_shot_draws(plan: Plan, evaluation: Feed, run: Run) -> dict[str, Any]:
    """Bootstrap draws of a zero-shot task that needs no text tower (see :func:`sample_ci_skip`)."""
    task, params = plan.task, plan.task_params
    start = time.perf_counter()
    context = {"class_names": plan.eval_m.doc.get("classes", [])}
    out = _redraw(lambda f, t: task.evaluate_zero_shot(f, t, params, context),
                  evaluation.pooled(), evaluation.targets(), task.target_kind)
    run.timings["sample_ci_s"] = round(time.perf_counter() - start, 4)
    return out


def _redraw(evaluate, feats, targets, target_kind: str) -> dict[str, Any]:
    """Draws that evaluate again on resampled rows: triplet rows index the features, so only
    the triplets are drawn; otherwise features and targets are drawn together."""
    if target_kind in ("triplets", "pairs"):
        return bootstrap_evaluate(lambda rows: evaluate(feats, targets[rows]), len(targets))
    return bootstrap_evaluate(lambda rows: evaluate(feats[rows], targets[rows]), len(feats))


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


def _zero_shot(plan: Plan, evaluation: Feed, files: dict[str, list[str]]) -> dict[str, float]:
    task = plan.task
    if evaluation.dense:
        return task.evaluate_split(None, evaluation.split(), plan.task_params)
    context = {"class_names": plan.eval_m.doc.get("classes", []),
               "captions": [s.get("captions", []) for s in plan.eval_m.doc["samples"]],
               "files": files}
    if task.needs_text:
        context["text_encoder"] = plan.backbone.load().encode_text
    return task.evaluate_zero_shot(evaluation.pooled(), evaluation.targets(), plan.task_params,
                                   context)


def _record(plan: Plan, run: Run, per_seed, train_metrics, comparable, edges) -> ResultRecord:
    store, seeds = plan.store, plan.request.probe.seed_list
    weights = store.read_json(plan.backbone.doc["weights"])
    inputs = {k: v for k, v in edges.items() if isinstance(v, str)}
    if "head" in edges:
        inputs.update({f"head.{i}": h for i, h in enumerate(edges["head"])}
                      if len(edges["head"]) > 1 else {"head": edges["head"][0]})
    inputs["weights"] = plan.backbone.doc["weights"]
    data = {"eval": {"manifest": plan.eval_m.id, "split": plan.eval_m.doc.get("split"),
                     "samples": len(plan.eval_m.doc["samples"])}}
    if plan.train_m is not None:
        data["train"] = {"manifest": plan.train_m.id, "split": plan.train_m.doc.get("split"),
                         "samples": len(plan.train_m.doc["samples"])}
    metrics, aggregate = dict(per_seed[0]), None
    if len(seeds) > 1:
        aggregate = aggregate_seeds(per_seed)
        metrics = {k: v["mean"] for k, v in aggregate.items()}
    same = plan.train_m is not None and plan.train_m.id == plan.eval_m.id
    warnings = (["trained and evaluated on the same samples: the metrics are train metrics"]
                if same else [])
    if len(seeds) > 1 and not plan.task.stochastic:
        warnings.append(f"{plan.task.name} ignores the seed: the {len(seeds)} seeds ran the same "
                        "computation, so their spread is 0 by construction")
    trained = [m for m in train_metrics if m]
    train_aggregate = aggregate_seeds(trained) if len(trained) > 1 else None
    return ResultRecord(
        task=plan.task.name, op_version=plan.task.op_version, level=plan.task.level,
        params=plan.task_params, seed=seeds[0], seeds=seeds, metrics=metrics, inputs=inputs,
        backbone={"spec": plan.backbone.request.get("spec") or plan.backbone.doc["architecture"],
                  "source": plan.backbone.doc["source"],
                  "architecture": plan.backbone.doc["architecture"]},
        weights_kind=weights["origin"], extractor=plan.settings.to_dict(), data=data,
        versions=versions(), device=_device_name(run),
        features_from_cache=all(run.from_cache.values()),
        comparable=comparable,
        warnings=warnings or None,
        train_metrics=train_metrics[0] if train_metrics and train_metrics[0] else None,
        per_seed=per_seed if len(seeds) > 1 else None, aggregate=aggregate,
        train_aggregate=train_aggregate,
        protocol=getattr(plan.task, "protocol", None),
        timings={**run.timings, "total_s": round(time.perf_counter() - plan.started, 4)},
    )


def _device_name(run: Run) -> str:
    import torch

    device = resolve_device(run.device)
    if device.startswith("cuda"):
        return f"cuda:{torch.cuda.get_device_name()}"
    return f"cpu:{platform.machine()}"
