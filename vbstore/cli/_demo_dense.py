"""``vbstore demo --task T``: a dense probe on generated scenes, read against its trivial
predictor on the same split."""

from __future__ import annotations

import time

import click

from ..errors import UsageError
from ._common import emit

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.

# the default backbone, and what a dense demo falls back to without its weights: test_pixels'
# fixed filters (pixels, gradients, context, position; nothing learned), which hold enough of
# the image for every probe to beat its trivial predictor, in seconds on a CPU
DEFAULT_BACKBONE = "torchvision:resnet18"
FALLBACK_BACKBONE = "test_pixels"
FALLBACK_PATCH = 4  # test_pixels' grid step: its input side must be a multiple of it


def task_names() -> list[str]:
    """What ``--task`` accepts: classification and every dense probe."""
    from ..engine import dense_tasks  # the scenes generator's numpy: only for the demo

    return ["classification", *dense_tasks()]


def dense_demo(store, task: str, backbone: str, weights: str, per_split: int, size: int,
                seed: int, input_size: int | None, as_json: bool) -> None:
    """Run dense ``task`` on scenes, ask again (cached), and print it beside its baseline.

    Raises:
        UsageError: ``task`` is neither classification nor a dense probe.
    """
    from ..backbones import WeightsUnavailable
    from ..engine import baseline_metrics, get_result, open_dense_result, scenes_setup

    if task not in task_names():
        raise UsageError(f"the demo runs classification or a dense probe, not {task!r}",
                         hint=f"choose one of: {', '.join(task_names())}")
    data, options, params = scenes_setup(task, per_split, size, seed)
    note = None

    def run():
        return get_result(backbone, task, data, data, store=store, split="val",
                          train_split="train", weights=weights, input_size=input_size,
                          params=params, data_options=options, progress=not as_json)

    try:
        first = run()
    except WeightsUnavailable as exc:
        if weights != "default":  # only the default is allowed to fall back, and it says so
            raise
        if backbone == DEFAULT_BACKBONE:  # its default weights are its fixed filters
            backbone = FALLBACK_BACKBONE
            input_size = input_size or max(FALLBACK_PATCH, size - size % FALLBACK_PATCH)
            note = (f"pretrained weights unavailable ({exc.args[0]}); using {FALLBACK_BACKBONE} "
                    f"({input_size} px) instead: fixed filters (pixels, gradients, local "
                    "context, position), nothing learned")
        else:
            weights = "random"
            note = f"pretrained weights unavailable ({exc.args[0]}); using random weights instead"
        if not as_json:
            click.echo(f"note: {note}", err=True)
        first = run()
    start = time.perf_counter()
    second = run()
    again = time.perf_counter() - start
    view = open_dense_result(store, first.id, data, split="val", data_options=options)
    spec, trivial = view.task, baseline_metrics(view)
    metric = spec.headline
    direction = next(m.direction for m in spec.metrics if m.name == metric)
    value, base = first.metrics[metric], trivial[metric]
    margin = value - base if direction == "higher" else base - value
    summary = {
        "result": first.id, "task": task, "backbone": backbone,
        "weights": first.record.weights_kind, "note": note, "data": data,
        "metric": metric, "direction": direction, "value": value,
        "trivial": spec.trivial, "trivial_value": base, "trivial_metrics": trivial,
        "beats_trivial": margin > 0, "margin": margin, "metrics": first.metrics,
        "train_loss": (first.record.train_metrics or {}).get("train_loss"),
        "first_seconds": first.seconds, "first_from_cache": first.from_cache,
        "cached_seconds": again, "cached": second.from_cache,
    }

    def text() -> None:
        state = "from the store" if first.from_cache else "computed"
        verdict = (f"better than a constant by {margin:.3f}" if margin > 0 else
                   "no better than a constant: these features do not encode it (linearly)")
        # the record's own word: test_pixels' default filters are fixed, its random bank is not
        kind = ("fixed-filter (nothing learned)" if summary["weights"] == "fixed"
                else summary["weights"])
        click.echo(f"{task} on scenes ({per_split} train / {per_split} val images of {size} px), "
                   f"{backbone} with {kind} weights")
        click.echo(f"  {metric} {value:.3f}  vs {base:.3f} for the trivial predictor "
                   f"({spec.trivial}) on the same split; {direction} is better: {verdict}")
        click.echo(f"  (train_loss {summary['train_loss']:.3f}; {state} in "
                   f"{first.seconds:.1f} s)")
        if backbone == FALLBACK_BACKBONE and summary["weights"] == "fixed":
            click.echo(f"  ({FALLBACK_BACKBONE} reads pixels, gradients and position through fixed"
                       " filters: a floor for what a probe can get from the image; run it where"
                       " the pretrained weights can be fetched or are cached to see what a trained"
                       " backbone encodes)")
        elif summary["weights"] == "random":
            click.echo("  (random weights: their features keep some pixel information but little"
                       " else; run it where the pretrained weights can be fetched or are cached"
                       " to see what a trained backbone encodes)")
        click.echo(f"  asked again: cached={second.from_cache}, {again * 1000:.0f} ms")
        click.echo(f"  trace it:    vbstore why {first.id[:12]}")
        click.echo(f"  see it:      vbstore draw {first.id[:12]} -d {data} --split val"
                   + (f" --target {options['target']}" if options else "") + " -o grid.png")

    emit(as_json, summary, text)
