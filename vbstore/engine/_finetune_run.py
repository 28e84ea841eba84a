"""Running a fine-tuned probe: each seed's head trained with the last blocks, and scored on the
eval features under its fine-tuned weights (the compute path, on a cache miss only).

Above the runners: the runner of the task's shape trains each head (``Runner.finetune``) and
scores it (``evaluate``), with the toolbox of ``._finetune_compute`` below both.
"""

from __future__ import annotations

import json
import time

import torch

from ..errors import UsageError, field_ref
from ..heads import head_record, load_head, save_head
from ..store import derivation_key
from ._cache import Derived, derive
from ._finetune_compute import FINETUNED_FORMAT, Model, Tuning, compat, features, tuning_of
from ._finetune_specs import finetune_head_spec, finetuned_weights
from ._planned import Plan
from ._run import Run
from ._runners import trained_runner
from ._scored import Scored
from ._toolbox import Feed


def head(plan: Plan, run: Run, model: Model, train: Feed, train_prefix: str, seed: int,
         fresh: bool) -> Derived:
    """One seed's head trained with the last blocks, and its fine-tuned weights."""
    store, task, params = plan.store, plan.task, plan.task_params
    spec = finetune_head_spec(task, params, plan.backbone.id, plan.train_m.id, plan.settings,
                              tuning_of(plan), seed)
    classes = plan.train_m.doc.get("classes") or None

    def compute() -> str:
        tuning = Tuning(plan, run, model, train_prefix)
        parent = [p.detach().clone() for p in tuning.params]
        # the runner of the task's shape trains (one home per shape: ._runners)
        state, train_metrics, width = trained_runner(task).finetune(plan, tuning, train, seed)
        changed = {name: after.detach().cpu().contiguous()
                   for name, before, after in zip(tuning.names, parent, tuning.params,
                                                  strict=True)
                   if not torch.equal(before, after.detach())}
        if not changed:
            raise UsageError(f"task {task.name!r}: training changed none of the last blocks' "
                             "weights, so its head recipe does not fine-tune them",
                             hint=f"drop {field_ref('finetune_blocks')}, or raise "
                                  f"{field_ref('backbone_lr')}")
        weights_id = plan.backbone.doc["weights"]
        inputs = {"weights": weights_id, "backbone": plan.backbone.id,
                  "train_manifest": plan.train_m.id, "prefix": train_prefix}
        weights = store.put_tensors(
            changed, "finetuned",
            {"format": FINETUNED_FORMAT, "blocks": str(tuning_of(plan)["blocks"]),
             "backbone_lr": json.dumps(tuning_of(plan)["backbone_lr"]), **inputs},
            edges=inputs)
        state = {k: v.cpu() for k, v in state.items()}
        record = {**compat(plan, weights, width), "params": params,
                  "seed": seed, "class_names": classes or [], "train_manifest": plan.train_m.id,
                  "train_metrics": train_metrics}
        return save_head(store, state, record, edges={"finetuned": weights,
                                                      "train_manifest": plan.train_m.id,
                                                      "prefix": train_prefix})

    if fresh:
        oid = compute()
        run.computed.append(store.record(spec, oid))
        return Derived(oid, "computed")
    derived = derive(store, spec, compute)
    if derived.computed:
        run.computed.append(derivation_key(spec))
    return derived


def model_of(plan: Plan, run: Run) -> Model:
    """The parent backbone of this run, built once when something must run through it: the
    prefix, head and feature steps share it (kept in ``run.made``, though no step makes it)."""
    model = run.made.get(("model", "finetune"))
    if model is None:
        model = run.made[("model", "finetune")] = Model(plan, run)
    return model


def trained_head(plan: Plan, run: Run, train_prefix: str, seed: int) -> Derived:
    """The head of ``seed`` trained with the last blocks on the stored ``train_prefix``."""
    train = Feed(plan, run, train_prefix, plan.train_m)
    return head(plan, run, model_of(plan, run), train, train_prefix, seed, run.fresh_heads)


def tuned_features(plan: Plan, run: Run, head_id: str, eval_prefix: str, role: str) -> Feed:
    """The eval feed under the fine-tuned weights of ``head_id``."""
    tuned = finetuned_weights(plan.store, head_id)
    return Feed(plan, run, features(plan, run, model_of(plan, run), tuned, eval_prefix,
                                    plan.eval_m, role), plan.eval_m)


def run_finetuned(plan: Plan, run: Run, fresh: bool) -> tuple[Feed, Scored]:
    """Every seed's head, trained with the last blocks, scored on the eval split's features
    under its fine-tuned weights (prefixes, heads and features made by the plan's steps); the
    first seed's feed is the result's eval feed."""
    store, inner = plan.store, trained_runner(plan.task)
    given = plan.head
    train_prefix = None if given else run.made[("prefix", "train")]
    eval_prefix = run.made[("prefix", "eval")]
    train = None if train_prefix is None else Feed(plan, run, train_prefix, plan.train_m)
    classes = (plan.train_m.classes if given is None
               else head_record(store, given).get("class_names") or None)
    scored = Scored([], train=train)  # train: its targets only (the baseline), no features
    heads: list[str] = []
    weights: list[str] = []
    feeds: list[Feed] = []
    start = time.perf_counter()
    seeds = plan.request.probe.seed_list
    made = [s for s in plan.steps if s.op in ("head", "featureset")]
    for head_step, features_step in zip(made[::2], made[1::2], strict=True):
        head_id = (given if given is not None
                   else run.made[(head_step.op, head_step.role)].id)
        assert head_id is not None
        tuned = finetuned_weights(store, head_id)
        feed = run.made[(features_step.op, features_step.role)]
        # scored as the frozen probe of the task's shape scores a head on its featureset
        targets = inner.targets(feed, classes)
        expected = compat(plan, tuned, inner.width(feed))
        state, record, ok = load_head(store, head_id, expected, strict=plan.request.probe.strict)
        scored.comparable = scored.comparable and ok
        metrics, draws = inner.evaluate(plan, run, state, feed, targets)
        scored.draws.extend([draws] if draws is not None else [])
        scored.eval_data.update(inner.eval_data(feed))
        scored.per_seed.append(metrics)
        scored.train_metrics.append(record.get("train_metrics", {}))
        scored.targets = scored.targets if scored.targets is not None else targets
        heads.append(head_id)
        weights.append(tuned)
        feeds.append(feed)
    run.timings["evaluate_s"] = round(time.perf_counter() - start, 4)
    if given is not None:  # one head, as a frozen run applies one to every seed
        scored.per_seed = scored.per_seed * len(seeds)
    else:
        scored.edges.update(train_manifest=plan.train_m.id, train_prefix=train_prefix)
    scored.edges.update(eval_prefix=eval_prefix, head=heads, finetuned=weights,
                        finetuned_features=[f.id for f in feeds[1:]])
    return feeds[0], scored
