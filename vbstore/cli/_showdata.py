"""``vbstore show DATA --task T``: VisBench's ``show``, a dataset drawn as a task reads it, before
any training (images beside their targets; needs the plot extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


def data_view_options(func):
    """The flags of the data view (``show DATA --task T``)."""
    for option in reversed([
        click.option("--task", "-t", "task", default=None,
                     help="Draw REF as data: its images and targets as this task reads them "
                          "(VisBench's `show PROBE`), before any training."),
        click.option("--split", default=None, help="With --task: the split to draw."),
        click.option("--limit", type=click.IntRange(min=1), default=None,
                     help="With --task: the --limit the split is read with."),
        click.option("--frames", type=click.IntRange(min=1, max=32), default=4,
                     show_default=True, help="With --task: rows to draw."),
        click.option("--start", type=click.IntRange(min=0), default=0, show_default=True,
                     help="With --task: the first sample drawn."),
        click.option("--image-size", type=click.IntRange(min=16), default=224,
                     show_default=True,
                     help="With --task: resize and centre-crop images and targets to this."),
        click.option("--out", "-o", "out", type=click.Path(dir_okay=False), default=None,
                     help="With --task: the picture (.png or .svg; default "
                          "vbstore-show-TASK.png)."),
        click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
                     help="With --task: a task parameter the targets depend on "
                          "(target_scale, ignore_index)."),
    ]):
        func = option(func)
    return func


def looks_like_data(ref: str) -> bool:
    """Whether ``ref`` names data (a path, or a named source: packaged, generated or a data
    source kind's) rather than an object."""
    from ..data import data_prefixes  # the data layer's registry: only for a ref to judge

    return Path(ref).exists() or ref.split(":")[0] in data_prefixes()


def show_data_cmd(store, data: str, task: str, kw: dict[str, Any], data_options: dict[str, Any],
                  as_json: bool) -> None:
    from ..engine import show_data
    from ..plots import draw_data_grid
    from ._common import emit
    from ._dataopts import parse_params

    view = show_data(store, data, task, split=kw["split"], limit=kw["limit"],
                     data_options=data_options, frames=kw["frames"], start=kw["start"],
                     size=kw["image_size"], params=parse_params(kw["params"]))
    out = kw["out"] or f"vbstore-show-{task}.png"
    title = f"{task} · {data}" + (f" ({kw['split']})" if kw["split"] else "")
    names = view.class_names
    if task == "generic_segmentation":
        names = ["background", "foreground"]
    draw_data_grid(view.frames, out, title=title, class_names=names)
    info = {"path": out, "task": task, "manifest": view.manifest, "samples": view.samples,
            "frames": [f.name for f in view.frames]}
    emit(as_json, info, f"wrote {out} ({len(view.frames)} of {view.samples} samples of {data} "
                        f"as {task} reads them)")
