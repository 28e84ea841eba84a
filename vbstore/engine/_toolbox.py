"""The runners' toolbox: feeds, featuresets, heads and bootstrap draws (the compute path).

What a runner (``._runners``) computes with, below the runners: :class:`Feed` (a task's inputs
for one featureset, loaded on first use), :func:`featureset`, :func:`train_head` (fit with the
plan's runner), the pairs the view shapes score, and a head's bootstrap draws.
Nothing here knows a shape: a runner picks what it reads. It runs on a cache miss only;
torch is imported lazily by the pieces that make tensors.
"""

from __future__ import annotations

import time
from typing import Any

from ..backbones import BackboneCfg
from ..data import get_target_kind
from ..heads import save_head
from ..records import HeadCompat
from ..store import Made
from ..tasks import KeypointPairs, PooledTask, WarpPairs, ZeroShotTask, of_shape
from ..tasks.bootstrap import bootstrap_evaluate, bootstrap_per_sample
from ._cache import Derived, derive
from ._device import resolve_device
from ._features import derive_featureset, featureset_spec
from ._planned import Plan
from ._run import Run
from ._steps import head_spec

# Local imports: torch loads where tensors are made (a feed's grid, its targets); the dense
# split (numpy, torch) where a dense task computes.


class Feed:
    """A task's inputs for one featureset, loaded on first use: pooled vectors, dense maps
    pooled to a grid, or a dense split; the runner of the task's shape picks which."""

    def __init__(self, plan: Plan, run: Run, features_id: str, manifest) -> None:
        self.plan, self.run, self.id, self.manifest = plan, run, features_id, manifest
        self._x: Any = None
        self._on: dict[str, Any] = {}
        self._rows: Any = None
        self._grid: dict[int, Any] = {}
        self._split: Any = None

    def vectors(self, device: str | None = None):
        """(N, C) pooled features (on ``device`` when given: copied there once)."""
        if self._x is None:
            from ..features import Features  # torch: only when features are read

            self._x = Features(self.plan.store, self.id).pooled()
        if device is None:
            return self._x
        if device not in self._on:
            self._on[device] = self._x.to(device)
        return self._on[device]

    def rows(self):
        """(N, C) pooled features as a numpy array, read without torch (a task that scores the
        stored rows in numpy: ``ZeroShotTask.array``); the same bits as :meth:`vectors`."""
        if self._rows is None:
            from ..features import pooled_rows  # numpy and safetensors: only when rows are read

            self._rows = pooled_rows(self.plan.store, self.id)
        return self._rows

    def grid_vectors(self, grid: int):
        """(N, C * grid * grid): each dense map of the last layer average-pooled to a grid x grid
        map of cells, flattened channel-major."""
        if grid not in self._grid:
            import torch

            split, rows = self.split(), []
            for start in range(0, len(split), 256):
                feats = split.feats(list(range(start, min(start + 256, len(split)))))[-1]
                rows.append(torch.nn.functional.adaptive_avg_pool2d(feats, grid).flatten(1))
            self._grid[grid] = torch.cat(rows).cpu()
        return self._grid[grid]

    def split(self):
        """The dense split: feature maps and per-pixel targets, streamed in batches."""
        if self._split is None:
            from ._dense import PackSplit  # torch and numpy: only when a dense task computes

            plan = self.plan
            self._split = PackSplit(plan.store, self.id, self.manifest,
                                    plan.backbone.doc["preprocessing"], plan.task.target_kind,
                                    plan.task_params.get("target_scale"),
                                    resolve_device(self.run.device))
        return self._split

    def targets(self, classes=None, array: str = "torch"):
        """Per-sample targets as the task's target kind reads them from the manifest (None:
        they come another way, e.g. captions in a zero-shot context).

        ``classes`` (the training classes) re-indexes labels by class name, so an eval split read
        with another class list is still scored against the right head outputs. ``array``:
        ``"numpy"`` gives the kind's numpy array as read, with no torch.
        """
        read = get_target_kind(self.plan.task.target_kind).per_sample
        if read is None:
            return None
        if array == "numpy":
            return read(self.manifest, classes)
        import torch

        return torch.from_numpy(read(self.manifest, classes))


def featureset(plan: Plan, run: Run, manifest, role: str) -> str:
    """The featureset of ``manifest`` (``role``: eval, train or views), from the store or
    extracted now, derived under the plan's step for that role."""
    start = time.perf_counter()
    ref, settings = plan.backbone, plan.settings
    spec, key = plan.spec_of("featureset", role,
                             lambda: featureset_spec(ref.id, manifest.id, settings),
                             backbone=ref.id, manifest=manifest.id)
    derived = derive_featureset(plan.store, ref, manifest, settings, spec=spec, key=key,
                                device=run.device, progress=run.progress,
                                batch_size=run.batch_size, executor=run.executor)
    stats = derived.made or {}
    if derived.computed:
        run.computed.append(key)
        run.extracted += int(stats.get("extracted", 0))
    run.timings[f"{role}_features_s"] = round(time.perf_counter() - start, 4)
    # a new featureset assembled from stored rows (another target over the same images) ran no
    # forward pass either: features_from_cache says whether the backbone ran
    run.from_cache[f"{role}_features"] = not derived.computed or stats.get("extracted", 1) == 0
    extracted_now = int(stats.get("extracted", 0)) if derived.computed else 0
    reused = int(stats.get("reused", 0)) if derived.computed else len(manifest)
    run.features[role] = {"id": derived.id, "extracted": extracted_now, "reused": reused,
                          "stored": not derived.computed}
    return derived.id


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
               val: Feed | None = None) -> Derived:
    """Fit (or fetch) the head for one seed (``val``: the validation split's feed, searched
    on): its id, where it came from, and (trained now) its :class:`HeadCompat`."""
    store, task, runner = plan.store, plan.task, plan.runner
    val_inputs = {"val_features": val.id} if val is not None else {}
    spec, key = plan.spec_of("head", f"seed {seed}",
                             lambda: head_spec(task, plan.task_params, train.id, seed,
                                               val.id if val is not None else None),
                             features=train.id, **val_inputs)
    classes = plan.train_m.classes or None

    def compute() -> Made[HeadCompat]:
        state, train_metrics = runner.fit(task, train, plan.task_params, seed, classes,
                                          **({"val": val} if val is not None else {}))
        record = {**compat(plan, train.id, runner.width(train)),
                  "params": task.head_params(plan.task_params),
                  "seed": seed, "class_names": classes or [], "train_manifest": plan.train_m.id,
                  "train_metrics": train_metrics}
        edges = {"features": train.id, "train_manifest": plan.train_m.id}
        if val is not None:  # the validation split it was searched on
            edges.update(val_features=val.id, val_manifest=val.manifest.id)
        oid = save_head(store, state, record, edges=edges)
        return Made(oid, HeadCompat.from_dict(record))

    if fresh:
        made = compute()
        run.computed.append(store.record(spec, made.id, key=key))
        return Derived(made.id, "computed", made=made.value)
    derived = derive(store, spec, compute, key=key)
    if derived.computed:
        run.computed.append(key)
    return derived


def warp_pairs(plan: Plan, evaluation: Feed, views: Feed) -> WarpPairs:
    from ..data import image_sizes, view_homographies  # numpy: only when views are scored

    pre = plan.backbone.doc["preprocessing"]
    cfg = BackboneCfg(**{**pre, "mean": tuple(pre["mean"]), "std": tuple(pre["std"])})
    params = plan.task_params
    return WarpPairs(evaluation.split(), views.split(),
                     view_homographies(evaluation.manifest, params["warp_seed"],
                                       params["max_warp"]),
                     image_sizes(evaluation.manifest), cfg.geometry, cfg.input_size)


def keypoint_pairs(plan: Plan, evaluation: Feed) -> KeypointPairs:
    from ..data import image_sizes  # numpy: only when pairs are scored

    pre = plan.backbone.doc["preprocessing"]
    cfg = BackboneCfg(**{**pre, "mean": tuple(pre["mean"]), "std": tuple(pre["std"])})
    return KeypointPairs(evaluation.split(), evaluation.manifest.keypoint_pairs,
                         image_sizes(evaluation.manifest), cfg.geometry, cfg.input_size)


def head_draws(plan: Plan, run: Run, state, feats, targets) -> dict[str, Any]:
    """Bootstrap draws of one fitted head: from per-sample values when the task has them."""
    task, params = of_shape(plan.task, PooledTask), plan.task_params
    start = time.perf_counter()
    values = task.per_sample(state, feats, targets, params)
    if values is not None:
        out = bootstrap_per_sample(values)
    else:
        out = _redraw(lambda f, t: task.evaluate(state, f, t, params), feats, targets,
                      task.target_kind, task.array)
    run.timings["sample_ci_s"] = round(run.timings.get("sample_ci_s", 0.0)
                                       + time.perf_counter() - start, 4)
    return out


def zero_shot_draws(plan: Plan, run: Run, evaluation: Feed) -> dict[str, Any]:
    """Bootstrap draws of a zero-shot task that needs no text tower."""
    task, params = of_shape(plan.task, ZeroShotTask), plan.task_params
    start = time.perf_counter()
    context = {"class_names": plan.eval_m.classes}
    out = _redraw(lambda f, t: task.evaluate_zero_shot(f, t, params, context),
                  evaluation.vectors(), evaluation.targets(), task.target_kind)
    run.timings["sample_ci_s"] = round(time.perf_counter() - start, 4)
    return out


def _redraw(evaluate, feats, targets, target_kind: str, array: str = "torch") -> dict[str, Any]:
    """Draws that evaluate again on resampled rows: where target rows index the features
    (triplets, pairs) only the targets are drawn; otherwise features and targets together
    (``array``: what the task computes with, so what the rows index)."""
    if get_target_kind(target_kind).rows_index_features:
        return bootstrap_evaluate(lambda rows: evaluate(feats, targets[rows]), len(targets),
                                  array=array)
    return bootstrap_evaluate(lambda rows: evaluate(feats[rows], targets[rows]), len(feats),
                              array=array)
