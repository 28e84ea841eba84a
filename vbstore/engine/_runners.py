"""One runner per probe shape: the steps a shape adds to a plan, and how execute scores it.

A task declares its shape (``vbstore.tasks``: ``pooled``, ``zero_shot``, ``text``, ``dense``,
``dense_zero_shot``, ``boxes``, ``pairs``, ``views``, ``keypoint_views``); the plan holds the
runner of that shape (``Plan.runner``, an object) and execute calls it. Nothing else in the
engine asks a task whether it is dense, zero-shot or scored on views: a new shape is a new
runner, registered once (:func:`register_runner`, here for the built-ins, from its plugin
file for a plugin's shape).

The plan-side methods (``check``, ``steps``) are torch-free. Each step a runner plans carries
what makes it (``Step.make``: :func:`make_featureset`, :func:`make_head`, :func:`make_views`
here); execute walks the plan's steps, making each in turn, then the runner's ``score`` reads
what they made (``Run.made``). The makers, ``score`` and ``fit`` run on a cache miss only and
import the compute path (features, heads, torch) when called.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from .. import canonical
from ..backbones import check_generate, clip_sources, parse_spec
from ..errors import UsageError, field_ref
from ..tasks import Task, get_shape
from ._captions import captions_steps, decodings, read_captions
from ._requests import param_files
from ._scored import Scored, StepContext
from ._steps import Step, head_step, views_steps

if TYPE_CHECKING:
    from ..tasks import Baseline
    from ._cache import Derived
    from ._planned import Plan
    from ._requests import ResultRequest
    from ._run import Run
    from ._toolbox import Feed

# Local imports: the compute path (._toolbox: feeds, heads, the bootstrap, torch; ._baseline,
# ._finetune_compute) loads inside the makers, score and fit, which run only on a cache miss; a
# plan and a cached answer never load it.


def make_featureset(plan: Plan, run: Run, step: Step) -> Feed:
    """A featureset step's output: the feed of its role's manifest (the request's eval or train
    split, or one an earlier step derived: views), from the store or extracted now."""
    from ._toolbox import Feed, featureset

    manifest = {"eval": plan.eval_m, "train": plan.train_m, "val": plan.val_m}.get(step.role)
    if manifest is None:
        manifest = run.made[("manifest", step.role)]
    return Feed(plan, run, featureset(plan, run, manifest, step.role), manifest)


def make_head(plan: Plan, run: Run, step: Step, *, seed: int) -> Derived:
    """A head step's output: the head of ``seed`` on the train featureset made before it (and
    the validation featureset, when the request names a validation split)."""
    from ._toolbox import train_head

    start = time.perf_counter()
    head = train_head(plan, run, run.made[("featureset", "train")], seed, run.fresh_heads,
                      run.made.get(("featureset", "val")))
    add_seconds(run, "heads_s", start)
    return head


def add_seconds(run: Run, name: str, start: float) -> None:
    """Add the seconds since ``start`` to the run's timing ``name`` (summed over its steps)."""
    run.timings[name] = round(run.timings.get(name, 0.0) + time.perf_counter() - start, 4)


def make_views(plan: Plan, run: Run, step: Step) -> Any:
    """A views step's output: the warped copies of the eval images, as a manifest (derived
    once and stored)."""
    from ..data import warped_views  # numpy: only when views are derived

    params = plan.task_params
    return warped_views(plan.store, plan.eval_m, params["warp_seed"], params["max_warp"])


class Runner(ABC):
    """How the engine runs one probe shape. Subclasses set ``shape`` and implement ``score``.

    Attributes:
        shape: The shape this runner runs (a :class:`vbstore.tasks.Shape` name).
        text_tower: The backbone must bring its text tower (and image projection).
        frozen_features: The plan reads the frozen backbone's featuresets (off: the runner's
            own steps name what it reads, as fine-tuning does).
        embedding: The pooled features are the CLIP image embedding (``encode_image``): the
            backbone is built with its image projection.
        finetune_layers: A fine-tuned head of this shape may read several layers (those of
            the trainable blocks); otherwise the last layer only.
    """

    shape: ClassVar[str] = ""
    text_tower: ClassVar[bool] = False
    frozen_features: ClassVar[bool] = True
    embedding: ClassVar[bool] = False
    finetune_layers: ClassVar[bool] = False

    def check(self, task: Task, request: ResultRequest) -> None:
        """Refuse, before anything is read, a request this shape cannot run.

        Raises:
            UsageError: naming what to change.
        """
        return None  # a shape with nothing to refuse

    def check_tools(self, task: Task, task_params: dict[str, Any], request: ResultRequest
                    ) -> None:
        """Refuse a run whose programs or libraries are missing here (the task's scorers:
        :meth:`Task.check_tools`); the plan calls it before anything is stored or built, and
        lets a stored result through.

        Raises:
            MissingTool, MissingDependency: naming what to install.
        """
        task.check_tools(task_params)

    def steps(self, ctx: StepContext) -> list[Step]:
        """The steps this shape adds under the featuresets (heads, derived views)."""
        return []

    def prepare(self, plan: Plan) -> None:
        """Checks that need the plan's records, before any feature is extracted (a miss only).

        Raises:
            UsageError: the inputs cannot be scored together.
        """
        return None  # a shape with nothing to check

    @abstractmethod
    def score(self, plan: Plan, run: Run, evaluation: Feed, fresh_heads: bool = False
              ) -> Scored:
        """Every seed's metrics on the eval featureset (computing what is missing)."""

    def run(self, plan: Plan, run: Run, fresh_heads: bool = False) -> tuple[Feed | None, Scored]:
        """The eval feed and every seed's metrics: the frozen eval featureset (made by its step),
        then ``score`` (no feed: a shape that reads no features)."""
        evaluation = run.made[("featureset", "eval")]
        start = time.perf_counter()
        scored = self.score(plan, run, evaluation, fresh_heads)
        run.timings["evaluate_s"] = round(time.perf_counter() - start, 4)
        return evaluation, scored

    def baseline(self, plan: Plan, evaluation: Feed, scored: Scored) -> Baseline | str | None:
        """The task's trivial predictor on the eval split (``vbstore.engine._baseline``), a
        reason it could not be computed, or None where the shape has none."""
        from ._baseline import targets_baseline_of  # the compute path only

        return targets_baseline_of(plan, evaluation, scored.train, scored.targets)

    def fit(self, task: Task, train: Feed, params: dict[str, Any], seed: int,
            classes: list[str] | None, val: Feed | None = None
            ) -> tuple[dict[str, Any], dict[str, float]]:
        """A head's state and train metrics, fit on ``train`` (a shape that trains one; ``val``:
        a validation split's feed, for a task that ``takes_val_split``)."""
        raise UsageError(f"task {task.name!r} is zero-shot and has no head")

    def width(self, feed: Feed) -> int:
        """The feature width a head of this shape reads (only a shape that trains one is
        asked: a zero-shot shape refuses a head before this)."""
        raise UsageError(f"a {self.shape} probe reads no head", hint=f"drop {field_ref('head')}")


class _Trained(Runner):
    """A shape that trains one head per seed on the train featureset, or applies a given head."""

    def steps(self, ctx: StepContext) -> list[Step]:
        if ctx.head is not None:
            return [Step("head", "given", "stored", ctx.head)]
        return [head_step(ctx.store, ctx.task, ctx.task_params, ctx.features["train"],
                          ctx.train_m, seed, ctx.unneeded, ctx.dry_run,
                          partial(make_head, seed=seed), ctx.features.get("val"))
                for seed in ctx.seeds]

    def targets(self, evaluation: Feed, classes: list[str] | None) -> Any:
        """The eval targets the task scores against (None: they come with the split)."""
        return None

    def eval_data(self, evaluation: Feed) -> dict[str, Any]:
        """Facts about the eval split the record keeps, once its heads are scored."""
        return {}

    def finetune(self, plan: Plan, tuning: Any, train: Feed, seed: int
                 ) -> tuple[dict[str, Any], dict[str, float], int]:
        """A head trained with the backbone's last blocks (``tuning``: the stored train prefix
        and a trainable copy of the blocks, ``._finetune_compute.Tuning``): its state, train
        metrics and the feature width it reads (a shape whose tasks fine-tune).

        Raises:
            UsageError: this shape does not fine-tune (refused at plan time before this).
        """
        raise UsageError(f"a {self.shape} probe cannot fine-tune",
                         hint=f"drop {field_ref('finetune_blocks')}")

    @abstractmethod
    def evaluate(self, plan: Plan, run: Run, state: Any, evaluation: Feed, targets: Any
                 ) -> tuple[dict[str, float], dict[str, Any] | None]:
        """One head's metrics, and its bootstrap draws (None: none drawn)."""

    def score(self, plan: Plan, run: Run, evaluation: Feed, fresh_heads: bool = False
              ) -> Scored:
        from ..heads import head_record, load_head
        from ._toolbox import compat

        store, seeds = plan.store, plan.request.probe.seed_list
        scored = Scored([])
        if plan.head is not None:
            heads = [plan.head]
            classes = head_record(store, plan.head).get("class_names") or None
        else:  # the train featureset and each seed's head: made by the plan's steps
            train = run.made[("featureset", "train")]
            scored.train = train
            scored.edges.update(train_manifest=plan.train_m.id, train_features=train.id)
            if plan.val_m is not None:
                scored.edges.update(val_manifest=plan.val_m.id,
                                    val_features=run.made[("featureset", "val")].id)
            heads = [run.made[("head", f"seed {seed}")].id for seed in seeds]
            classes = plan.train_m.classes
        # frozen features: a head trained with fine-tuned blocks does not fit them
        expected = {**compat(plan, evaluation.id, self.width(evaluation)), "finetune": None}
        targets = self.targets(evaluation, classes)
        scored.targets = targets
        for head in heads:
            state, record, ok = load_head(store, head, expected, strict=plan.request.probe.strict,
                                          array=plan.task.array)
            scored.comparable = scored.comparable and ok
            metrics, draws = self.evaluate(plan, run, state, evaluation, targets)
            scored.per_seed.append(metrics)
            scored.draws.extend([draws] if draws is not None else [])
            scored.train_metrics.append(record.get("train_metrics", {}))
        if plan.head is not None:
            scored.per_seed = scored.per_seed * len(seeds)
        scored.edges["head"] = heads
        scored.eval_data.update(self.eval_data(evaluation))
        return scored


class PooledRunner(_Trained):
    """``pooled``: a head on (N, C) vectors, a target per image; bootstrap from per-sample
    values.

    A task that computes in numpy (``PooledTask.array``) is handed the stored rows as numpy
    arrays, read without torch, and its targets and heads as numpy; on a run that names an
    accelerator (``--device cuda``) its features go there as torch tensors instead, so that a
    large head trains on it."""

    shape = "pooled"

    def vectors(self, plan: Plan, feed: Feed) -> Any:
        if plan.task.array != "numpy":
            return feed.vectors()
        device = feed.run.device
        if device is None or device.startswith("cpu"):
            return feed.rows()  # numpy, read without torch
        from ._device import resolve_device  # torch: the head trains on the accelerator named

        return feed.vectors(resolve_device(device))

    def fit(self, task, train, params, seed, classes, val=None):
        # a validation split's labels are indexed as the train split's classes
        array = task.array
        held = (None if val is None
                else (self.vectors(val.plan, val), val.targets(classes or None, array)))
        return task.fit(self.vectors(train.plan, train), train.targets(array=array), params,
                        seed, classes, **({"val": held} if held is not None else {}))

    def width(self, feed: Feed) -> int:
        return int(self.vectors(feed.plan, feed).shape[1])

    def targets(self, evaluation: Feed, classes: list[str] | None) -> Any:
        return evaluation.targets(classes, evaluation.plan.task.array)

    def finetune(self, plan, tuning, train, seed):
        from ._finetune_compute import fit_pooled  # the compute path only

        return fit_pooled(plan, tuning, train, seed)

    def evaluate(self, plan, run, state, evaluation, targets):
        from ._toolbox import head_draws

        feats = self.vectors(plan, evaluation)
        metrics = plan.task.evaluate(state, feats, targets, plan.task_params)
        if plan.task.ci_skip_reason:
            return metrics, None
        return metrics, head_draws(plan, run, state, feats, targets)


def check_clip(task: Task, request: ResultRequest) -> None:
    """Refuse a backbone without a CLIP image embedding and text tower.

    Raises:
        UsageError: naming a CLIP backbone to use instead.
    """
    spec = request.backbone.spec
    if isinstance(spec, str) and parse_spec(spec).source not in clip_sources():
        raise UsageError(
            f"task {task.name!r} needs a CLIP backbone (an image embedding and a text "
            f"tower), not {spec!r}",
            hint="use an open_clip:MODEL@TAG backbone, or a model type's "
                 f"({', '.join(clip_sources())}): -b MODEL@TAG --model-type NAME",
        )


class EmbeddingRunner(PooledRunner):
    """``embedding``: a head on a CLIP model's image embeddings (CLIP_benchmark's linear
    probe)."""

    shape = "embedding"
    embedding = True

    def check(self, task: Task, request: ResultRequest) -> None:
        check_clip(task, request)


class PairsRunner(PooledRunner):
    """``pairs``: a head on each image's dense map average-pooled to a grid of cells; the
    targets' rows index those vectors."""

    shape = "pairs"

    def vectors(self, plan: Plan, feed: Feed) -> Any:
        return feed.grid_vectors(plan.task_params.get("grid", 1))


class DenseRunner(_Trained):
    """``dense``: a head on dense maps, per-pixel targets streamed in batches (no bootstrap)."""

    shape = "dense"
    finetune_layers = True  # a dpt head fuses layers of the trainable blocks

    def fit(self, task, train, params, seed, classes):
        return task.fit_split(train.split(), params, seed, classes)

    def width(self, feed: Feed) -> int:
        return int(feed.split().channels[-1])

    def evaluate(self, plan, run, state, evaluation, targets):
        return plan.task.evaluate_split(state, evaluation.split(), plan.task_params), None

    def finetune(self, plan, tuning, train, seed):
        from ._finetune_compute import fit_dense  # the compute path only

        return fit_dense(plan, tuning, train, seed)

    def baseline(self, plan, evaluation, scored):
        from ._baseline import dense_baseline  # the compute path only

        return dense_baseline(plan, evaluation)


class BoxesRunner(DenseRunner):
    """``boxes``: a dense head predicting boxes; train and eval must share one class list, and
    the record counts the boxes the crop cut off."""

    shape = "boxes"

    def prepare(self, plan: Plan) -> None:
        # box class indices mean the class list they were read with
        from ..heads import head_record

        if plan.head is not None:
            classes = head_record(plan.store, plan.head).get("class_names") or []
        else:
            classes = plan.train_m.classes
        if classes and plan.eval_m.classes != list(classes):
            raise UsageError(
                f"the eval boxes are labelled {plan.eval_m.classes[:5]}, the head's classes are "
                f"{list(classes)[:5]}: box class indices would not agree",
                hint=f"train and evaluate with one class list ({field_ref('classes', 'FILE')})")

    def eval_data(self, evaluation: Feed) -> dict[str, Any]:
        return {"boxes_dropped": evaluation.split().boxes_dropped}


class ZeroShotRunner(Runner):
    """``zero_shot``: the eval vectors scored with no training; bootstrap by re-evaluating."""

    shape = "zero_shot"

    def context(self, plan: Plan, files: dict[str, list[Any]]) -> dict[str, Any]:
        source = plan.eval_m.doc.get("source") or {}
        return {"class_names": plan.eval_m.classes,
                # a cb: source's own names, where the manifest's had to tell two apart
                "prompt_names": source.get("classnames"),
                "captions": [s.get("captions", []) for s in plan.eval_m.samples],
                "files": files,
                # the templates a cb: source recorded (--templates dataset)
                "dataset_templates": source.get("templates"),
                # or its class-specific prompts (CLIP_benchmark's CuPL), one list per class
                "dataset_prompts": source.get("class_prompts")}

    def score(self, plan, run, evaluation, fresh_heads=False):
        from ._toolbox import zero_shot_draws

        task, params = plan.task, plan.task_params
        files = param_files(plan.store, task, params)
        context = self.context(plan, files)
        if task.array == "numpy":  # the stored rows alone: no torch
            feats, targets = evaluation.rows(), evaluation.targets(array="numpy")
        else:
            feats, targets = evaluation.vectors(), evaluation.targets()
        metrics = task.evaluate_zero_shot(feats, targets, params, context)
        scored = Scored([metrics] * len(plan.request.probe.seed_list),
                        edges={key: params[key] for key in files})  # gc keeps them
        scored.targets = targets  # the trivial baseline's, read once
        used = getattr(context.get("text_encoder"), "used", None)
        if used:  # the stored text-tower outputs it read: a list, so not a record input
            scored.edges["text_embeddings"] = sorted(set(used))
        if not task.ci_skip_reason:
            scored.draws.append(zero_shot_draws(plan, run, evaluation))
        return scored


class TextRunner(ZeroShotRunner):
    """``text``: zero-shot against the backbone's CLIP text tower."""

    shape = "text"
    text_tower = True
    embedding = True

    def check(self, task: Task, request: ResultRequest) -> None:
        check_clip(task, request)

    def steps(self, ctx: StepContext) -> list[Step]:
        # loaded classifiers (CLIP_benchmark's --load_clfs) refused before anything is
        # extracted, a dry run too, when they do not fit the backbone and the data
        loaded = ctx.task_params.get("load_clfs")
        if loaded and not ctx.unneeded:
            from ..store import parse_safetensors_header
            from ..tasks import check_shape, shape_of

            d, c = shape_of(parse_safetensors_header(ctx.store.read_bytes(loaded)))
            dim = (ctx.ref.doc.get("geometry") or {}).get("embed_dim") if ctx.ref else None
            check_shape(d, c, dim if isinstance(dim, int) else None, len(ctx.eval_m.classes))
        return super().steps(ctx)

    def context(self, plan: Plan, files: dict[str, list[Any]]) -> dict[str, Any]:
        from ._textcache import StoredTextEncoder  # the compute path only

        # each batch of texts embedded once per backbone, read back by later tasks and data
        return {**super().context(plan, files),
                "text_encoder": StoredTextEncoder(plan.store, plan.backbone)}


class DenseZeroShotRunner(Runner):
    """``dense_zero_shot``: the eval split's dense maps scored with no head."""

    shape = "dense_zero_shot"

    def baseline(self, plan, evaluation, scored):
        from ._baseline import dense_baseline  # the compute path only

        return dense_baseline(plan, evaluation)

    def score(self, plan, run, evaluation, fresh_heads=False):
        metrics = plan.task.evaluate_split(None, evaluation.split(), plan.task_params)
        return Scored([metrics] * len(plan.request.probe.seed_list))


class ViewsRunner(Runner):
    """``views``: each eval image's dense map against a warped copy's (the copies are derived
    once and stored, with their features)."""

    shape = "views"

    def baseline(self, plan, evaluation, scored):
        return None  # no constant predictor of a match

    def steps(self, ctx: StepContext) -> list[Step]:
        return views_steps(ctx.store, ctx.ref, ctx.eval_m, ctx.extractor, ctx.task_params,
                           ctx.unneeded, ctx.dry_run, make_views, make_featureset)

    def score(self, plan, run, evaluation, fresh_heads=False):
        from ._toolbox import warp_pairs

        views = run.made[("featureset", "views")]  # derived and extracted by the plan's steps
        metrics = plan.task.evaluate_views(warp_pairs(plan, evaluation, views), plan.task_params)
        return Scored([metrics] * len(plan.request.probe.seed_list),
                      edges={"views_manifest": views.manifest.id, "views_features": views.id})


class KeypointViewsRunner(Runner):
    """``keypoint_views``: dense maps scored on the manifest's annotated keypoint pairs."""

    shape = "keypoint_views"

    def baseline(self, plan, evaluation, scored):
        return None  # no constant predictor of a match

    def score(self, plan, run, evaluation, fresh_heads=False):
        from ._toolbox import keypoint_pairs

        metrics = plan.task.evaluate_views(keypoint_pairs(plan, evaluation), plan.task_params)
        return Scored([metrics] * len(plan.request.probe.seed_list))


class GenerateRunner(Runner):
    """``generate``: the model writes each eval image's caption (``vbstore.engine._captions``:
    stored once per backbone, data and decoding), scored against the references; no features
    are extracted."""

    shape = "generate"
    frozen_features = False

    def check(self, task: Task, request: ResultRequest) -> None:
        check_clip(task, request)
        # the model writes in its own precision from its own output: no feature setting applies
        backbone = request.backbone
        named = [flag for flag, given in ((field_ref("pooling"), backbone.pooling is not None),
                                          (field_ref("layers"), tuple(backbone.layers) != (-1,)),
                                          (f"{field_ref('precision', 'bf16')}",
                                           backbone.precision != "fp32"))
                 if given]
        if named:
            raise UsageError(f"task {task.name!r} reads no features (the model writes "
                             f"captions); {', '.join(named)} does not apply to it",
                             hint=f"drop {', '.join(named)}")

    def check_tools(self, task: Task, task_params: dict[str, Any], request: ResultRequest
                    ) -> None:
        super().check_tools(task, task_params, request)
        check_generate(request.backbone.spec)  # transformers, for a CoCa's beam search

    def steps(self, ctx: StepContext) -> list[Step]:
        return captions_steps(ctx.store, ctx.ref, ctx.task, ctx.task_params, ctx.eval_m,
                              ctx.seeds, ctx.unneeded)

    def run(self, plan: Plan, run: Run, fresh_heads: bool = False) -> tuple[Feed | None, Scored]:
        start = time.perf_counter()
        scored = self.score(plan, run, None, fresh_heads)
        run.timings["evaluate_s"] = round(time.perf_counter() - start, 4)
        return None, scored

    def score(self, plan: Plan, run: Run, evaluation: Feed | None, fresh_heads: bool = False
              ) -> Scored:
        from ..tasks import GenerateTask, of_shape

        task, params = of_shape(plan.task, GenerateTask), plan.task_params
        references = [list(s.get("captions") or []) for s in plan.eval_m.samples]
        # the captions of each distinct decoding, written (or read back) by the plan's steps
        written = {canonical.dumps(s.spec["params"]["decoding"]): run.made[(s.op, s.role)]
                   for s in plan.steps if s.op == "captions" and s.spec is not None}
        scored, done = Scored([]), {}
        for decoding in decodings(task, params, plan.request.probe.seed_list):
            key = canonical.dumps(decoding)
            if key not in done:  # a deterministic decoding: one set of captions for every seed
                oid = written[key]
                done[key] = task.evaluate_captions(read_captions(plan.store, oid), references,
                                                   params)
                scored.edges.setdefault("captions", []).append(oid)
            scored.per_seed.append(done[key])
        return scored


_RUNNERS: dict[str, Runner] = {}
# the runner of each shape, by shape name (read-only: a runner joins through register_runner;
# fine-tuning's runner is no shape's: ._finetune)
RUNNERS: Mapping[str, Runner] = MappingProxyType(_RUNNERS)


def register_runner(runner: Runner) -> Runner:
    """Register the runner of a probe shape (a plugin's, after ``vbstore.tasks.register_shape``).

    Raises:
        UsageError: no shape of that name is registered, or it has a runner already.
    """
    get_shape(runner.shape)  # raises for a shape no task could declare
    if runner.shape in _RUNNERS:
        raise UsageError(f"shape {runner.shape!r} has a runner already",
                         hint="register a new shape for yours")
    _RUNNERS[runner.shape] = runner
    return runner


for _runner in (PooledRunner(), EmbeddingRunner(), PairsRunner(), DenseRunner(), BoxesRunner(),
                ZeroShotRunner(), TextRunner(), DenseZeroShotRunner(), ViewsRunner(),
                KeypointViewsRunner(), GenerateRunner()):
    register_runner(_runner)


def trained_runner(task: Task) -> _Trained:
    """The runner of ``task``'s shape, one that trains heads (what fine-tuning trains with).

    Raises:
        UsageError: the shape trains no head.
    """
    runner = runner_for(task)
    if not isinstance(runner, _Trained):
        raise UsageError(f"task {task.name!r} trains no head, so it cannot fine-tune",
                         hint=f"drop {field_ref('finetune_blocks')}")
    return runner


def runner_for(task: Task) -> Runner:
    """The runner of ``task``'s shape.

    Raises:
        UsageError: a shape no runner runs (a task declaring a shape this engine lacks).
    """
    name = task.shape_spec.name
    runner = RUNNERS.get(name)
    if runner is None:
        raise UsageError(f"no runner for shape {name!r} of task {task.name!r}",
                         hint=f"runners: {', '.join(RUNNERS)}")
    return runner
