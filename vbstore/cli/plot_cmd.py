"""``vbstore plot task|backbone``: stored results as bar charts with seed intervals."""

from __future__ import annotations

import click

from ._common import emit, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.

_OUTPUT = click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
                       help="The picture to write: .png or .svg.")
_DATA = click.option("--data", default=None, metavar="MANIFEST",
                     help="Only results on this eval manifest (id prefix).")


@click.group(name="plot")
def plot_group() -> None:
    """Draw stored results as bar charts (PNG or SVG; needs the plot extra)."""


def _report(bars, output: str, as_json: bool) -> None:
    rows = [{"label": b.label, "group": b.group, "metric": b.metric, "value": b.value,
             "ci_low": b.low, "ci_high": b.high, "seeds": b.seeds, "result": b.result}
            for b in bars]
    emit(as_json, {"path": output, "bars": rows}, f"wrote {output} ({len(rows)} bars)")


@plot_group.command("task")
@click.argument("task")
@click.option("--metric", default=None, help="The metric to show (default: the task's headline).")
@_DATA
@_OUTPUT
@json_option
@with_store
def plot_task_cmd(store, task: str, metric: str | None, data: str | None, output: str,
                  as_json: bool) -> None:
    """TASK's headline across backbones, one bar each, with seed 95% intervals."""
    from ..plots import draw_bars, task_bars

    bars = task_bars(store, task, metric=metric, data=data)
    draw_bars(bars, output, title=f"{task}: {bars[0].metric}")
    _report(bars, output, as_json)


@plot_group.command("backbone")
@click.argument("backbone")
@_DATA
@_OUTPUT
@json_option
@with_store
def plot_backbone_cmd(store, backbone: str, data: str | None, output: str,
                      as_json: bool) -> None:
    """One BACKBONE (spec or id prefix) across its tasks, grouped by level (high, mid, low)."""
    from ..plots import backbone_bars, draw_bars

    bars = backbone_bars(store, backbone, data=data)
    draw_bars(bars, output, title=backbone, ylabel="headline metric")
    _report(bars, output, as_json)
