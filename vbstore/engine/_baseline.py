"""A result's trivial baseline: computed on its eval split, judged against its headline.

Every trained or zero-shot result (not the pair-view correspondence tasks, which have no
constant predictor) carries ``baseline`` in its record (schemas/result.schema.json)::

    {"predictor": "the majority class of the train split", "metrics": {"top1": 0.25, ...},
     "headline": "top1", "value": 0.25, "margin": 0.71, "beaten": true}

``margin`` is the headline minus the baseline's (negative is better for a lower-is-better
metric); ``beaten`` says whether the probe did strictly better. When it did not, the record's
warnings say so and name the likely cause. The field is written by new computations only: a
record stored before it existed has no ``baseline`` and still reads.

Runs on the compute path only (a cached result reads the stored field).
"""

from __future__ import annotations

from typing import Any

from ..errors import VbstoreError
from ..tasks import Baseline, keep_declared, targets_baseline


def dense_baseline(plan, evaluation) -> Baseline | str | None:
    """A dense task's trivial predictor on the eval split (its ``baseline_split``), a reason it
    could not be computed, or None when the task declares none."""
    task = plan.task
    if not hasattr(task, "baseline_split"):
        return None
    try:
        metrics = task.baseline_split(evaluation.split(), plan.task_params)
    except VbstoreError as err:  # a baseline the split cannot define never fails the result
        return f"no baseline: {err}"
    return keep_declared(task, f"{task.trivial} of the eval split", metrics)


def targets_baseline_of(plan, evaluation, train, eval_targets) -> Baseline | str | None:
    """The task's trivial predictor from per-sample targets: on the eval split, with the train
    split's targets where a head was trained (``train`` None for a zero-shot task or an applied
    head; ``eval_targets`` the targets the head was scored on, or None)."""
    task = plan.task
    try:
        if eval_targets is None:
            eval_targets = evaluation.targets(plan.train_m.classes if train is not None else None,
                                              task.array)
        classes = plan.eval_m.classes or None
        captions = [s.get("captions", []) for s in plan.eval_m.samples]
        train_targets = train.targets(array=task.array) if train is not None else None
        return targets_baseline(task, eval_targets, train_targets,
                                len(classes) if classes else None, captions,
                                params=plan.task_params)
    except VbstoreError as err:  # a baseline the split cannot define never fails the result
        return f"no baseline: {err}"


def baseline_fields(plan, found: Baseline | str | None, metrics: dict[str, Any],
                    warnings: list[str] | None) -> dict[str, Any]:
    """``baseline`` and ``warnings`` for the record: the baseline judged against the headline,
    and, added to ``warnings``, one naming the likely cause when the probe does not beat it."""
    if found is None or isinstance(found, str):
        out: dict[str, Any] = {"warnings": warnings or None}
        if found is not None:
            out["baseline"] = {"skipped": found}
        return out
    task = plan.task
    headline = task.headline_for(plan.task_params)
    value, base = float(metrics[headline]), float(found.metrics[headline])
    lower = next(m.direction for m in task.metrics_for(plan.task_params)
                 if m.name == headline) == "lower"
    beaten = value < base if lower else value > base
    field = {"predictor": found.predictor, "metrics": found.metrics, "headline": headline,
             "value": base, "margin": value - base, "beaten": beaten}
    out = {"baseline": field, "warnings": warnings or None}
    if not beaten:
        out["warnings"] = [*(warnings or []), (
            f"the probe does not beat the trivial baseline: {headline} {value:.4f} against "
            f"{base:.4f} for {found.predictor}; likely cause: {likely_cause(plan)}")]
    return out


def likely_cause(plan) -> str:
    """What most often leaves a probe at its baseline, with this run's values."""
    params = plan.task_params
    causes = []
    weights = plan.store.read_json(plan.backbone.doc["weights"]).get("origin")
    if weights == "random":
        causes.append("random weights (compare a pretrained backbone)")
    if "epochs" in params:  # a trained head's schedule
        lr = f" or tune lr (now {params['lr']:g})" if "lr" in params else ""
        causes.append(f"an under-trained head: raise epochs (now {params['epochs']}){lr}")
    elif "k" in params:
        causes.append(f"k (now {params['k']}) against the train split's size")
    size = plan.backbone.doc["preprocessing"].get("input_size")
    causes.append(f"an input size ({size} px) too small for the backbone (--input-size)")
    if params.get("load_clfs"):  # scored against loaded classifiers, not prompts
        causes.append("loaded classifiers (load_clfs) made for other data or another model")
    elif plan.runner.text_tower:  # scored against prompts
        causes.append("prompts or class names that do not fit the data")
    return "; ".join(causes)
