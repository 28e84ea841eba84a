"""``vbstore demo``: the whole engine on data any machine has, with no setup: a pretrained
backbone's probe beside the same probe on random weights and beside a predictor that reads no
image."""

from __future__ import annotations

from dataclasses import replace

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
    from ..engine import ShapesDemo
    from ..errors import UsageError
    from ._demo_run import run_demo

    given = noise is not None or images is not None
    if demo_data == "faces" and given:
        raise UsageError("--noise and --images set the shapes demo, not faces",
                         hint="drop them, or use --data shapes")
    shapes = None
    if demo_data == "shapes" or given:
        shapes = ShapesDemo()  # VisBench's defaults, then what was given
        if noise is not None:
            shapes = replace(shapes, noise=noise)
        if images is not None:
            shapes = replace(shapes, images=images)
    chosen = task or ("classification" if shapes is not None else "retrieval")
    run_demo(store, chosen, backbone, weights, per_split, size, seed, input_size, as_json, emit,
             shapes)
