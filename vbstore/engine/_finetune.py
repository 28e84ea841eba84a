"""Fine-tuning the last N blocks: its derivations, plan steps and runner (docs/finetune.md).

A fine-tuned result is three derivations deep, each stored and reused on its own:

```
(backbone, manifest, blocks)                        ─► prefix      the frozen blocks' output
(backbone, train manifest, task, params, seed,
 blocks, backbone_lr, extractor)                    ─► head        ─► finetuned weights
(finetuned weights, eval manifest, extractor)       ─► featureset  (under the fine-tuned blocks)
```

The prefix is computed once per image and blocks count, so a second run with another
``backbone_lr`` or seed runs only the last N blocks. The fine-tuned weights hold only the
tensors training changed, with edges to the parent weights and the training data; their id
names the featuresets made under them, so those are never a frozen backbone's.

Torch-free: the planner and a dry run use this module; the specs are ``._finetune_specs``, the
compute path ``._finetune_compute`` (the fine-tuning toolbox: prefixes, trainable blocks, the
fits a shape's runner calls) under ``._finetune_run`` (heads, their eval features, scoring).
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import HeadMismatch, UsageError, field_ref
from ..records import StoreReader, finetuned_differences
from ..store import derivation_key
from ..tasks import Task
from ._features import featureset_spec, packs_present
from ._finetune_specs import finetune_head_spec, finetuned_weights, prefix_spec
from ._runners import Runner, add_seconds, runner_for, trained_runner
from ._scored import Scored, StepContext
from ._steps import Step

if TYPE_CHECKING:
    from ._cache import Derived
    from ._planned import Plan
    from ._requests import HeadRequest, ResultRequest
    from ._run import Run
    from ._toolbox import Feed

# Local imports: the compute path (._finetune_run: torch; heads) loads in the makers and run,
# on a miss, and where a stored head is read.


def make_prefix(plan: Plan, run: Run, step: Step) -> str:
    """A prefix step's output: the id of its split's frozen-block activations, stored or
    computed now."""
    from ._finetune_compute import prefix
    from ._finetune_run import model_of

    manifest = plan.train_m if step.role == "train" else plan.eval_m
    return prefix(plan, run, model_of(plan, run), manifest, step.role)


def make_tuned_head(plan: Plan, run: Run, step: Step, *, seed: int) -> Derived:
    """A head step's output: the head of ``seed`` trained with the last blocks on the train
    prefix made before it, and its fine-tuned weights."""
    from ._finetune_run import trained_head

    start = time.perf_counter()
    head = trained_head(plan, run, run.made[("prefix", "train")], seed)
    add_seconds(run, "heads_s", start)
    return head


def make_tuned_features(plan: Plan, run: Run, step: Step, *, head: str, seed: int,
                        first: bool) -> Feed:
    """A featureset step's output: the feed of the eval split's features under the fine-tuned
    weights of the head made (or given) above it (``head``: that step's role)."""
    from ._finetune_run import tuned_features

    made = run.made.get(("head", head))
    head_id = plan.head if made is None else made.id
    assert head_id is not None  # a head step came first, trained or given
    # the first seed's features are the result's eval features (run.features["eval ..."])
    return tuned_features(plan, run, head_id, run.made[("prefix", "eval")],
                          "eval" if first else f"eval_seed_{seed}")


def check_finetune(task: Task, request: ResultRequest | HeadRequest) -> None:
    """Refuse, before anything is read or stored, a fine-tuning request that cannot run.

    Raises:
        UsageError: naming what to change.
    """
    if not task.finetunes:  # declared by the task layer (its shape and head recipe)
        raise UsageError(
            f"task {task.name!r} cannot fine-tune: {field_ref('finetune_blocks')} trains the "
            "blocks with a "
            "head whose recipe trains them too (classification, multilabel, the trained dense "
            "and box probes)",
            hint=f"drop {field_ref('finetune_blocks')}, or probe with a task that fine-tunes")
    backbone = request.backbone
    if backbone.precision != "fp32":
        raise UsageError("fine-tuning trains in fp32",
                         hint=f"drop {field_ref('precision', 'bf16')}")
    if backbone.layers != (-1,) and not trained_runner(task).finetune_layers:
        raise UsageError(f"a fine-tuned {task.name} head reads the last layer only, the "
                         f"output of the last block (not {list(backbone.layers)})",
                         hint=f"drop {field_ref('layers')}")
    if backbone.pooling == "none":
        raise UsageError("fine-tuning trains on pooled features",
                         hint=f"drop {field_ref('pooling', 'none')}")


def check_backbone_blocks(ref: Any, blocks: int, layers: tuple[int, ...]) -> None:
    """Refuse a backbone that cannot be cut before its last ``blocks`` with every one of
    ``layers`` an output of the trainable blocks (builds the model).

    Raises:
        UsageError: it says nothing of its blocks, or has fewer; a layer lies in the frozen
            blocks.
    """
    from ..backbones import check_blocks  # torch: only a fine-tuning request not yet answered

    check_blocks(ref.load(), blocks, layers)


def given_finetune(store, head_id: str) -> dict[str, Any] | None:
    """``{"blocks", "backbone_lr"}`` of a given head trained with fine-tuned blocks, else None.

    Raises:
        UsageError: its fine-tuned weights are not in this store (pushed without them).
        HeadMismatch: its fine-tuned weights name another parent backbone or weights than its
            record (the record was edited to move it onto another backbone).
    """
    from ..heads import head_record  # only a given head is read: off a cached answer's path

    if not store.has(head_id) or store.info(head_id).kind != "head":
        return None  # not a head: applying it is refused where heads are loaded
    tuned = head_record(store, head_id).get("finetune")
    if not isinstance(tuned, dict):
        return None
    if not store.has(str(tuned.get("weights"))):
        raise UsageError(f"head {head_id[:12]} was trained with fine-tuned weights "
                         f"{str(tuned.get('weights'))[:12]}, which are not in this store",
                         hint="push it with `push results --with heads` or `push head` (both "
                              "carry its fine-tuned weights) and pull it again")
    parents = finetuned_differences(head_record(store, head_id), StoreReader(store))
    if parents:  # a record edited to move the head onto another backbone than its blocks had
        raise HeadMismatch(parents)
    return {"blocks": tuned["blocks"], "backbone_lr": tuned["backbone_lr"]}


def _lookup(store, spec: dict[str, Any], ctx: StepContext, valid=None) -> str | None:
    key = derivation_key(spec)
    if ctx.unneeded:
        return store.lookup(key, check=False)
    return store.lookup(key, valid=valid)


def finetune_steps(ctx: StepContext) -> list[Step]:
    """Prefix (train, eval), then per seed the head with its fine-tuned weights and the eval
    featureset under them: each stored, to compute, or not needed."""
    status = "unneeded" if ctx.unneeded else "compute"
    blocks = ctx.finetune["blocks"] if ctx.finetune else 0
    tuned = f"last {blocks} block{'s' if blocks > 1 else ''} fine-tuned"
    steps = []
    for role, manifest in (("train", ctx.train_m), ("eval", ctx.eval_m)):
        if manifest is None:
            continue
        oid = (None if ctx.ref is None else
               _lookup(ctx.store, prefix_spec(ctx.ref.id, manifest.id, blocks), ctx))
        # a given head reads no train prefix: shown, never made
        make = make_prefix if role == "eval" or ctx.head is None else None
        steps.append(Step("prefix", role, "stored" if oid and not ctx.unneeded else status, oid,
                          {} if oid else {"forward_passes": len(manifest)}, make=make))
    for seed in ctx.seeds if ctx.head is None else ctx.seeds[:1]:
        if ctx.head is not None:
            head: str | None = ctx.head
            head_role = f"given, {tuned}"
            steps.append(Step("head", head_role, "stored", head))
        else:
            work = {"samples": len(ctx.train_m), "epochs": ctx.task_params.get("epochs", 1)}
            head = None if ctx.ref is None or ctx.finetune is None else _lookup(
                ctx.store, finetune_head_spec(ctx.task, ctx.task_params, ctx.ref.id,
                                              ctx.train_m.id, ctx.extractor, ctx.finetune, seed),
                ctx)
            head_role = f"seed {seed}, {tuned}"
            steps.append(Step("head", head_role,
                              "stored" if head and not ctx.unneeded else status, head,
                              {} if head else work, make=partial(make_tuned_head, seed=seed)))
        if ctx.eval_m is None:
            continue
        features = None
        if head is not None and not ctx.unneeded and ctx.store.has(head):
            spec = featureset_spec(finetuned_weights(ctx.store, head), ctx.eval_m.id,
                                   ctx.extractor)
            features = _lookup(ctx.store, spec, ctx, lambda o: packs_present(ctx.store, o))
        first = not any(s.op == "featureset" for s in steps)
        steps.append(Step("featureset", f"eval, seed {seed} fine-tuned",
                          "stored" if features and not ctx.unneeded else status, features,
                          {} if features else {"samples": len(ctx.eval_m)},
                          make=partial(make_tuned_features, head=head_role, seed=seed,
                                       first=first)))
    return steps


class FinetuneRunner(Runner):
    """A probe whose head trains with the backbone's last blocks (``--finetune-blocks``): it
    reads stored prefix activations, never the frozen backbone's featuresets, and trains and
    scores through the runner of the task's shape (``Runner.finetune``, ``evaluate``)."""

    shape = "finetune"
    frozen_features = False

    def check(self, task: Task, request: ResultRequest) -> None:
        runner_for(task).check(task, request)
        check_finetune(task, request)

    def prepare(self, plan: Plan) -> None:
        runner_for(plan.task).prepare(plan)  # the shape's own checks (box class lists)

    def baseline(self, plan: Plan, evaluation: Feed, scored: Scored) -> Any:
        # the trivial predictor of the task's shape, on the same eval split
        return runner_for(plan.task).baseline(plan, evaluation, scored)

    def steps(self, ctx: StepContext) -> list[Step]:
        return finetune_steps(ctx)

    def run(self, plan: Plan, run: Run, fresh_heads: bool = False) -> tuple[Feed, Scored]:
        from ._finetune_run import run_finetuned

        return run_finetuned(plan, run, fresh_heads)

    def score(self, plan: Plan, run: Run, evaluation: Feed, fresh_heads: bool = False
              ) -> Scored:
        return self.run(plan, run, fresh_heads)[1]


# the runner a fine-tuning plan holds (no shape's: nothing registers it anywhere)
FINETUNE_RUNNER = FinetuneRunner()
