"""``vbstore demo``: the whole engine on data any machine has, with no setup: a pretrained
backbone's probe beside the same probe on random weights and beside a predictor that reads no
image."""

from __future__ import annotations

from typing import Any

import click

from ._common import emit, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.

DEFAULT_BACKBONE = "efficientnet_lite0"


@click.command()
@click.option("--backbone", default=DEFAULT_BACKBONE, show_default=True,
              help="Backbone spec to probe (efficientnet_lite0: ImageNet weights from the "
                   "installed 'weights' extra, no network).")
@click.option("--weights", default="default", show_default=True,
              help="default (pinned pretrained; random when they cannot be had), a checkpoint "
                   "path, or random.")
@click.option("--task", "task", default=None,
              help="retrieval (default), classification or knn (on faces vs non-faces; "
                   "classification is the default on shapes), a dense probe (on scenes: "
                   "semantic_segmentation, depth, surface_normal, detection...) or a pair probe "
                   "(relative_pose, correspondence, similarity); vbstore list tasks.")
@click.option("--data", "demo_data", type=click.Choice(["faces", "shapes"]), default=None,
              help="The pooled probes' data: faces vs non-faces (default), or VisBench's demo "
                   "shapes (4 shapes, 224 px; --noise, --images).")
@click.option("--noise", type=click.FloatRange(0, 255), default=None,
              help="Shapes: pixel noise in grey levels, VisBench's --noise (28 to 90; default "
                   "45). Implies --data shapes.")
@click.option("--images", type=click.IntRange(min=2), default=None,
              help="Shapes: images per class per split (default 20, VisBench's). Implies "
                   "--data shapes.")
@click.option("--per-split", type=click.IntRange(min=2), default=32, show_default=True,
              help="Dense and pair probes: scenes images (or triplets / 2) in each split.")
@click.option("--size", type=click.IntRange(min=16), default=64, show_default=True,
              help="Dense and pair probes: generated image side in pixels.")
@click.option("--seed", type=int, default=0, show_default=True, help="Dataset seed.")
@click.option("--input-size", type=int, default=None,
              help="Override the backbone's input resolution.")
@json_option
@with_store
def demo(store, backbone: str, weights: str, task: str | None, demo_data: str | None,
         noise: float | None, images: int | None, per_split: int, size: int, seed: int,
         input_size: int | None, as_json: bool) -> None:
    """Probe a backbone on data any machine has, beside random weights and a trivial predictor.

    Default: retrieval on scikit-image's faces vs non-faces (each image ranks the others by
    cosine similarity; mAP counts how early its own class comes), with efficientnet_lite0's
    ImageNet weights, the same architecture with seeded random weights, and a random ranking.
    The figures say how much of the probe's score the pretrained weights carry. --task runs a
    dense probe on generated scenes (rendered rooms with exact per-pixel targets) or a pair
    probe in the same way; the trivial predictor is then the task's own (the majority class, the
    mean depth, the mean pose...). Then it asks again, to show the answer comes from the store.
    --data shapes (or --noise, --images) runs VisBench's demo data instead: four shapes that
    differ in outline only, buried in pixel noise (chance 0.25).
    """
    from ..engine import demo_shapes, run_demo

    shapes = demo_shapes(demo_data, noise, images)
    chosen = task or ("classification" if shapes is not None else "retrieval")
    ran = run_demo(store, chosen, backbone, weights, per_split=per_split, size=size, seed=seed,
                   input_size=input_size, shapes=shapes)
    if ran.note and not as_json:
        click.echo(f"note: {ran.note}", err=True)
    emit(as_json, ran.summary(), lambda: _print(ran))


def _print(ran) -> None:
    """The demo's figures side by side, what the weights add, and where to look next."""
    setup, first, summary = ran.setup, ran.first, ran.summary()
    state = "from the store" if first.from_cache else "computed"
    click.echo(f"{setup.task} on {setup.about}; {setup.metric}, {setup.direction} is better")
    rows = [(f"{ran.backbone} ({summary['weights']} weights)", summary["value"])]
    if ran.compared:
        rows.append((f"{ran.backbone} (random weights, seed 0)", summary["random_value"]))
    if ran.trivial:
        rows.append((f"trivial: {ran.trivial[0]}", ran.trivial[1]))
    width = max(len(label) for label, _ in rows)
    for label, figure in rows:
        click.echo(f"  {label:<{width}}  {figure:.3f}")
    _verdict(summary, ran.compared)
    click.echo(f"  ({summary['weights']} result {state} in {first.seconds:.1f} s; the demo took "
               f"{ran.wall_seconds:.1f} s of wall time; asked again: cached={ran.again.from_cache}"
               f", {ran.again_seconds * 1000:.0f} ms)")
    click.echo(f"  trace it:    vbstore why {first.id[:12]}")
    if setup.options:
        click.echo(f"  see it:      vbstore draw {first.id[:12]} -d {setup.data} --split "
                   f"{setup.split} --target {setup.options['target']} -o grid.png")


def _verdict(summary: dict[str, Any], compared: bool) -> None:
    """One line on what the figures say about the weights."""
    over_random, over_trivial = summary["over_random"], summary["over_trivial"]
    if summary["weights"] == "random":
        click.echo("  (random weights only: run it with pretrained weights, e.g. the default "
                   "efficientnet_lite0 with 'vbstore[weights]' installed, to see what they add)")
    elif compared and over_random > 0:
        click.echo(f"  the {summary['weights']} weights add {over_random:.3f} over random ones"
                   + (f" and {over_trivial:.3f} over the trivial predictor"
                      if over_trivial is not None else ""))
    elif compared:
        click.echo("  the pretrained weights add nothing over random ones on this probe")
