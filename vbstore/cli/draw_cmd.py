"""``vbstore draw RESULT``: what a dense probe learned, as a picture (image, target, prediction)."""

from __future__ import annotations

import click

from ._common import emit, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


@click.command()
@click.argument("result")
@click.option("--data", "-d", required=True,
              help="The data the result was scored on (its files are read again).")
@click.option("--split", default=None, help="The split of --data the result was scored on.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="The --limit the result was scored with, if any.")
@click.option("--target", default=None,
              help="The dense target folder the result was scored on (masks, depth...).")
@click.option("--samples", "-n", type=click.IntRange(min=1, max=32), default=4,
              show_default=True, help="Rows of the grid: the first N eval samples.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
              help="The picture to write: .png or .svg.")
@json_option
@with_store
def draw(store, result: str, data: str, split: str | None, limit: int | None,
         target: str | None, samples: int, output: str, as_json: bool) -> None:
    """Draw a dense RESULT: one row per eval sample — the image the backbone saw, the target,
    and the stored head's prediction (needs the plot extra).

    The data must give the very manifest the result was scored on (same --split, --limit,
    --target); anything else is refused.
    """
    from ..engine import dense_samples, open_dense_result
    from ..plots import draw_dense_grid
    from ..records import ManifestRecord

    view = open_dense_result(store, result, data, split=split, limit=limit,
                             data_options={"target": target} if target else None)
    rows = dense_samples(view, samples)
    metric = view.task.headline
    title = (f"{view.record.task} · {view.record.spec} · {metric} "
             f"{view.record.metrics[metric]:.3f}")
    # the class names of the eval data, for the legend of a class map
    eval_manifest = ManifestRecord.from_dict(store.read_json(view.record.inputs["eval_manifest"]))
    names = eval_manifest.classes or None
    if view.record.task == "generic_segmentation":
        names = ["background", "foreground"]
    draw_dense_grid(rows, output, title=title, class_names=names)
    emit(as_json, {"path": output, "result": view.id, "task": view.record.task,
                   "samples": [r.name for r in rows]},
         f"wrote {output} ({len(rows)} samples of {view.record.task} result {view.id[:12]})")
