"""``vbstore demo``: the whole engine on generated data, with no setup: shapes for the default
classification probe, scenes for a dense probe (``--task depth``...)."""

from __future__ import annotations

import time

import click

from ..records import ManifestRecord
from ._common import emit, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.

DEFAULT_BACKBONE = "torchvision:resnet18"


@click.command()
@click.option("--backbone", default=DEFAULT_BACKBONE, show_default=True,
              help="Backbone spec to probe.")
@click.option("--weights", default="default", show_default=True,
              help="default (pinned pretrained; random when it cannot be fetched), a checkpoint "
                   "path, or random.")
@click.option("--noise", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Pixel noise and clutter, 0 (clean) to 1 (only chance is left).")
@click.option("--per-class", type=click.IntRange(min=2), default=24, show_default=True,
              help="Images per shape class in each split.")
@click.option("--seed", type=int, default=0, show_default=True, help="Dataset seed.")
@click.option("--input-size", type=int, default=None,
              help="Override the backbone's input resolution.")
@click.option("--task", "task", default="classification", show_default=True,
              help="classification (on shapes) or a dense probe (on scenes): "
                   "semantic_segmentation, depth, surface_normal, orientation... "
                   "(vbstore list tasks).")
@click.option("--per-split", type=click.IntRange(min=2), default=32, show_default=True,
              help="Dense probes: scenes images in each split.")
@click.option("--size", type=click.IntRange(min=16), default=64, show_default=True,
              help="Dense probes: scenes image side in pixels.")
@json_option
@with_store
def demo(store, backbone: str, weights: str, noise: float, per_class: int, seed: int,
         input_size: int | None, task: str, per_split: int, size: int, as_json: bool) -> None:
    """Generate a dataset, probe a backbone on it, then ask again to show the cache.

    Default: classification on shapes, which differ only in geometry (colour, size, position
    and rotation are random), so top1 above chance means the features encode shape. With
    --task a dense probe runs on scenes (rendered rooms with exact per-pixel targets) and its
    number is put beside the task's trivial predictor on the same split (the majority class,
    the mean depth, the mean normal, the zero map...). Without network the pretrained weights
    cannot be fetched: the demo says so and uses random weights (the record says `random`), or,
    for a dense probe of the default backbone, test_pixels: fixed filters, nothing learned.
    """
    from ..backbones import WeightsUnavailable
    from ..engine import get_result

    if task != "classification":  # a dense probe on scenes
        from ._demo_dense import dense_demo

        dense_demo(store, task, backbone, weights, per_split, size, seed, input_size, as_json)
        return

    data = f"shapes:per_class={per_class},noise={noise:g},seed={seed}"
    note = None

    def run():
        return get_result(backbone, "classification", data, data, store=store, split="val",
                          train_split="train", weights=weights, input_size=input_size,
                          progress=not as_json)

    try:
        first = run()
    except WeightsUnavailable as exc:
        if weights != "default":  # only the default is allowed to fall back, and it says so
            raise
        note = f"pretrained weights unavailable ({exc.args[0]}); using random weights instead"
        if not as_json:
            click.echo(f"note: {note}", err=True)
        weights = "random"
        first = run()
    start = time.perf_counter()
    second = run()
    again = time.perf_counter() - start
    classes = ManifestRecord.from_dict(
        store.read_json(first.record.eval_data["manifest"])).class_names
    chance = 1 / len(classes)
    summary = {
        "result": first.id, "backbone": backbone, "weights": first.record.weights_kind,
        "note": note,
        "classes": classes, "chance": chance, "top1": first.metrics["top1"],
        "train_top1": (first.record.train_metrics or {}).get("train_top1"),
        "first_seconds": first.seconds, "first_from_cache": first.from_cache,
        "cached_seconds": again, "cached": second.from_cache,
    }

    def text() -> None:
        state = "from the store" if first.from_cache else "computed"
        click.echo(f"shapes ({len(classes)} classes, {per_class} per class per split, "
                   f"noise {noise:g}), "
                   f"{backbone} with {summary['weights']} weights")
        click.echo(f"  top1 {summary['top1']:.3f}  vs chance {chance:.3f}   "
                   f"(train_top1 {summary['train_top1']:.3f}; {state} in {first.seconds:.1f} s)")
        if summary["weights"] == "random":
            click.echo("  (random weights: their features carry little shape information, so a "
                       "near-chance top1 is expected; run it where the pretrained weights can be "
                       "fetched or are cached to see what a trained backbone encodes)")
        click.echo(f"  asked again: cached={second.from_cache}, {again * 1000:.0f} ms")
        click.echo(f"  trace it:    vbstore why {first.id[:12]}")

    emit(as_json, summary, text)
