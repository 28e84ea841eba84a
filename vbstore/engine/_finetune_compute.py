"""Fine-tuning's toolbox: prefixes, the trainable blocks, the fits a shape's runner calls
(:func:`fit_pooled`, :func:`fit_dense`) and eval features under fine-tuned weights.

Runs only on a cache miss (``._finetune`` plans it, ``._finetune_run`` runs it). Each piece is
a derivation of its own (``._finetune``'s docstring), so whatever is stored is read, never
recomputed: a second run with another ``backbone_lr`` reads both prefixes and runs only the
last blocks. Below the runners: nothing here picks a shape.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any, cast

import torch

from ..backbones import (
    check_blocks,
    check_split,
    run_prefix,
    run_suffix,
    run_suffix_layers,
    suffix_features,
    suffix_taps,
)
from ..features import (
    ExtractPlan,
    PackWriter,
    PrefixRows,
    decode_image,
    extractor_key,
    store_featureset,
)
from ..features import write_prefix as write_prefix_blob
from ..records.gate import ARRIVALS, resolve
from ..store import derivation_key
from ..tasks import Loss, PooledTask, Recipe, SplitTask, Trainable, finetune, of_shape
from ._cache import Derived, derive
from ._dense import PackSplit
from ._device import resolve_device
from ._features import featureset_spec, packs_present
from ._finetune_specs import TRAIN_PARAMS, prefix_spec
from ._planned import Plan
from ._run import Run
from ._toolbox import Feed

FINETUNED_FORMAT = "vbstore.finetuned.v1"
log = logging.getLogger("vbstore.engine")


def tuning_of(plan: Plan) -> dict[str, Any]:
    """``{"blocks", "backbone_lr"}`` of a fine-tuning plan."""
    assert plan.finetune is not None, "a fine-tuning runner runs fine-tuning plans only"
    return plan.finetune


def _pooling(plan: Plan) -> str:
    return str(plan.settings.pooling)  # resolved by the planner (extractor_for)


class Model:
    """The parent backbone, built (and cut) only when something must run through it."""

    def __init__(self, plan: Plan, run: Run) -> None:
        self.plan, self.run = plan, run
        self._built: Any = None
        self.checked = False
        self.taps: list[int] = []  # the requested layers among the trainable blocks

    def get(self) -> tuple[Any, Any, int]:
        """``(backbone, split, cut)``, on the run's device."""
        if self._built is None:
            backbone = self.plan.backbone.load()
            backbone.to(resolve_device(self.run.device))
            layers = self.plan.settings.layers
            split, cut = check_blocks(backbone, tuning_of(self.plan)["blocks"], layers)
            self._built = backbone, split, cut
            self.taps = suffix_taps(backbone, split, cut, layers)
        return self._built

    def forward(self, x: torch.Tensor, blocks) -> torch.Tensor:
        """Pooled last-layer features of prefix activations through ``blocks``."""
        backbone, split, _ = self.get()
        return run_suffix(backbone, split, blocks, x, _pooling(self.plan))

    def dense(self, x: torch.Tensor, blocks) -> list[torch.Tensor]:
        """The dense maps of the requested layers (all outputs of ``blocks``), in request
        order, from prefix activations through ``blocks``."""
        backbone, split, _ = self.get()
        return [out.dense for out in run_suffix_layers(backbone, split, blocks, x, self.taps)]

    def layers(self, x: torch.Tensor, blocks) -> list[dict[str, Any]]:
        """The requested layers through ``blocks`` as ``extract`` gives them: dense, pooled."""
        backbone, split, _ = self.get()
        return suffix_features(backbone, split, blocks, x, self.taps, _pooling(self.plan))

    def trainable(self, weights: str | None = None) -> tuple[list[str], list[torch.nn.Module]]:
        """A copy of the last blocks (the built ones stay the parent's), with the fine-tuned
        ``weights`` loaded when given, and the parent's name of each of their parameters."""
        backbone, split, cut = self.get()
        names = {id(p): n for n, p in backbone.module.named_parameters()}
        blocks = list(split.blocks[cut:])
        named = [names[id(p)] for block in blocks for p in block.parameters()]
        copies = copy.deepcopy(blocks)
        if weights is not None:
            from safetensors.torch import load  # heavy: only when fine-tuned blocks load

            state = load(self.plan.store.read_bytes(weights, verify=True))
            params = [p for block in copies for p in block.parameters()]
            with torch.no_grad():
                for name, param in zip(named, params, strict=True):
                    if name in state:
                        param.copy_(state[name].to(param.device, param.dtype))
        return named, copies


def prefix(plan: Plan, run: Run, model: Model, manifest, role: str) -> str:
    """The stored frozen-prefix activations of ``manifest``, computed now when missing."""
    store, blocks = plan.store, tuning_of(plan)["blocks"]
    start = time.perf_counter()

    def compute() -> str:
        backbone, split, cut = model.get()
        if not model.checked:  # one zero image: refuse a family the split does not describe
            check_split(backbone, split, cut, _pooling(plan), plan.settings.layers)
            model.checked = True

        def frozen(images: torch.Tensor) -> torch.Tensor:
            run.extracted += len(images)  # images through the frozen blocks
            return run_prefix(backbone, split, cut, images)

        return write_prefix_blob(store, manifest, plan.backbone.id, blocks, frozen,
                                 backbone.preprocess, batch_size=run.batch_size)

    spec = prefix_spec(plan.backbone.id, manifest.id, blocks)
    key = derivation_key(spec)
    derived = derive(store, spec, compute, valid=store.has)
    came = None if derived.computed else _unchecked(store, key, derived)
    if came is not None:
        # from outside (a cache answer, or a pull from a cache remote) and never checked here:
        # the gate's use-time check of the kind, once
        if resolve(ARRIVALS["prefix"].used)(plan, model, manifest, derived.id):
            store.record(spec, derived.id, origin=f"{came}, {CHECKED}", key=key)
        else:
            # rows that name the right images but hold other activations (rolled, shuffled,
            # another model's): refused, computed here and recorded over it
            log.warning("%s: prefix %s holds other activations than the frozen blocks give "
                        "its images; computing it", came, derived.id[:12])
            derived = Derived(compute(), "computed")
            store.record(spec, derived.id, key=key)
    if derived.computed:
        run.computed.append(key)
    run.from_cache[f"{role}_prefix"] = not derived.computed
    run.features[f"{role} prefix"] = {"id": derived.id, "stored": not derived.computed,
                                      "extracted": len(manifest) if derived.computed else 0,
                                      "reused": 0}
    run.timings[f"{role}_prefix_s"] = round(time.perf_counter() - start, 4)
    return derived.id


SPOT_ROWS = 3  # rows of a fetched prefix run again through the frozen blocks
CHECKED = "activations checked"  # the end of a recorded origin once the spot check passed


def _unchecked(store, key: str, derived: Derived) -> str | None:
    """Where a stored prefix came from when that is outside this store (a remote's binary
    cache answered, or a pull recorded it) and its activations were never checked here; None
    when it was computed here or checked already."""
    origin = store.origin(key) or ""
    if derived.source == "remote":
        return origin or f"remote {derived.remote}"
    if origin.startswith(("remote ", "pulled from ")) and not origin.endswith(CHECKED):
        return origin
    return None



def rows_agree(plan: Plan, model: Model, manifest, prefix_id: str) -> bool:
    """Whether a fetched prefix's rows are what the frozen blocks give their images, on a few
    rows spread over it (first, middle, last): its header's image ids are checked against the
    manifest by the gate, this checks the activations themselves. Tolerant of another device's
    float rounding, not of another image's activations."""
    backbone, split, cut = model.get()
    rows = PrefixRows(plan.store, prefix_id)
    positions = sorted({0, len(rows) // 2, len(rows) - 1})[:SPOT_ROWS] if len(rows) else []
    if not positions:
        return True
    images = torch.stack([decode_image(manifest.image_path(i), manifest.samples[i]["image"],
                                       backbone.preprocess) for i in positions])
    device = resolve_device(model.run.device)
    fresh = run_prefix(backbone, split, cut, images.to(device)).float().cpu()
    stored = rows.rows(positions)
    scale = fresh.flatten(1).norm(dim=1).clamp_min(1e-6)
    error = (fresh - stored).flatten(1).norm(dim=1) / scale
    return bool((error < 1e-2).all())


def compat(plan: Plan, weights: str, width: int) -> dict[str, Any]:
    """What a fine-tuned head must agree on: the parent backbone and weights, and the
    fine-tuned weights its features come from."""
    ext = plan.settings
    parent = plan.store.read_json(plan.backbone.doc["weights"])
    return {"backbone": plan.backbone.id, "weights": parent["tensor_hash"],
            "input_size": plan.backbone.doc["preprocessing"]["input_size"],
            "extractor_key": extractor_key(weights, ext), "pooling": ext.pooling,
            "layers": list(ext.layers), "feature_mode": ext.mode, "embed_dim": width,
            "task": plan.task.name, "task_op_version": plan.task.op_version,
            "finetune": {"weights": weights, **tuning_of(plan)}}


class Tuning:
    """One head's training with the last blocks: the stored train prefix, a trainable copy of
    the blocks (the parent's stay untouched) and their learning rate. The runner of the task's
    shape trains with it (``Runner.finetune``: :func:`fit_pooled`, :func:`fit_dense`)."""

    def __init__(self, plan: Plan, run: Run, model: Model, prefix_id: str) -> None:
        self.plan, self.model = plan, model
        self.names, self.blocks = model.trainable()
        self.rows = PrefixRows(plan.store, prefix_id)
        self.backbone_lr = float(tuning_of(plan)["backbone_lr"])
        self.device = resolve_device(run.device)

    @property
    def params(self) -> list[torch.nn.Parameter]:
        return [p for block in self.blocks for p in block.parameters()]


class PrefixSplit(PackSplit):
    """A dense split whose feature maps are stored prefix rows run through trainable blocks,
    batch by batch (gradients reach the blocks while training); targets are read and aligned
    exactly as a featureset's split reads them (:class:`PackSplit`)."""

    def __init__(self, tuning: Tuning, manifest, preprocessing: dict[str, Any],
                 target_kind: str, target_scale: float | None) -> None:
        self._init_targets(tuning.plan.store, manifest, preprocessing, target_kind,
                           target_scale, str(tuning.device))
        self.layers = tuple(tuning.plan.settings.layers)
        self._tuning = tuning
        self.trainable = Trainable(tuning.params, tuning.backbone_lr)
        for block in tuning.blocks:
            block.eval()  # BatchNorm statistics and dropout as in a frozen forward
        with torch.no_grad():
            first = self._feats([0]) if len(tuning.rows) else [torch.zeros(1, 0, 0, 0)]
        self.channels = tuple(int(f.shape[1]) for f in first)
        self.grid_hw = (int(first[0].shape[2]), int(first[0].shape[3]))  # as PackSplit reads it

    def __len__(self) -> int:
        return len(self._tuning.rows)

    def _feats(self, positions: list[int]) -> list[torch.Tensor]:
        x = self._tuning.rows.rows(positions, self.device)
        return [f.float() for f in self._tuning.model.dense(x, self._tuning.blocks)]


def fit_pooled(plan: Plan, tuning: Tuning, train: Feed, seed: int
               ) -> tuple[dict[str, torch.Tensor], dict[str, float], int]:
    """A pooled task's linear head trained with the blocks (``tasks.finetune``): its state,
    train metrics and feature width."""
    task, params = of_shape(plan.task, PooledTask), plan.task_params
    classes = plan.train_m.doc.get("classes") or None
    y = train.targets()
    n_out = len(classes) if task.finetune_loss == "cross_entropy" and classes else (
        int(y.max()) + 1 if y.ndim == 1 else int(y.shape[1]))
    recipe = Recipe(**{k: params[k] for k in TRAIN_PARAMS}, backbone_lr=tuning.backbone_lr,
                    seed=seed, standardize=bool(params.get("standardize", True)))
    state, loss, feats = finetune(
        tuning.rows, y, tuning.blocks, tuning.model.forward, recipe, n_out=n_out,
        loss=cast(Loss, task.finetune_loss), task=task.name, device=tuning.device)
    state = {k: v.cpu() for k, v in state.items()}
    scored = task.evaluate(state, feats.cpu(), y, params)
    train_metrics = {f"train_{task.headline}": scored[task.headline], "train_loss": loss}
    return state, train_metrics, int(state["weight"].shape[1])


def fit_dense(plan: Plan, tuning: Tuning, train: Feed, seed: int
              ) -> tuple[dict[str, torch.Tensor], dict[str, float], int]:
    """A dense or box task's head trained with the blocks: the task's own dense recipe on a
    :class:`PrefixSplit` (the blocks join its optimiser); its state, train metrics and width."""
    split = PrefixSplit(tuning, train.manifest, plan.backbone.doc["preprocessing"],
                        plan.task.target_kind, plan.task_params.get("target_scale"))
    state, train_metrics = of_shape(plan.task, SplitTask).fit_split(
        split, plan.task_params, seed, plan.train_m.classes or None)
    return dict(state), train_metrics, int(split.channels[-1])


def features(plan: Plan, run: Run, model: Model, weights: str, eval_prefix: str, manifest,
             role: str) -> str:
    """The featureset of ``manifest`` under the fine-tuned ``weights``: the stored prefix
    through the fine-tuned blocks, packed as any featureset is."""
    store, ext = plan.store, plan.settings
    spec = featureset_spec(weights, manifest.id, ext)

    def compute() -> str:
        _, blocks = model.trainable(weights)
        rows = PrefixRows(store, eval_prefix)
        device = resolve_device(run.device)
        # what the features' mode keeps (pooled vectors, dense maps), as extraction writes it
        writer = PackWriter(store, extractor_key(weights, ext), ext.layers, ext.mode,
                            getattr(torch, ext.dense_dtype))
        with torch.no_grad():
            for index, x in rows.batches(run.batch_size, device):
                outs = model.layers(x, blocks)
                writer.add([rows.images[i] for i in index],
                           {"layers": dict(zip(ext.layers, outs, strict=True))})
        writer.flush()
        found = ExtractPlan(rows.images, dict(writer.rows), [], 0)
        return store_featureset(store, manifest, weights, ext, found,
                                edges={"finetuned": weights, "prefix": eval_prefix})

    derived = derive(store, spec, compute, valid=lambda o: packs_present(store, o))
    if derived.computed:
        run.computed.append(derivation_key(spec))
    run.from_cache[f"{role}_features"] = not derived.computed
    # computed: every image through the fine-tuned blocks only, from its stored prefix
    run.features[f"{role} fine-tuned"] = {"id": derived.id, "stored": not derived.computed,
                                          "extracted": len(manifest) if derived.computed else 0,
                                          "reused": 0}
    return derived.id


