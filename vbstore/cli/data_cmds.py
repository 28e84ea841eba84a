"""``vbstore get manifest``: read a dataset split into a manifest and print what it holds."""

from __future__ import annotations

from typing import Any

import click

from ._common import emit, json_option, with_store
from ._dataopts import data_layout_options

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


def _print(summary: dict[str, Any]) -> None:
    click.echo(summary["id"])
    split = summary["split"] or "-"
    limit = f", limit {summary['limit']}" if summary["limit"] else ""
    click.echo(f"  {summary['samples']} samples, layout {summary['layout']}, split {split}{limit}")
    click.echo(f"  root     {summary['root']}")
    click.echo(f"  targets  {summary['target_type']}")
    if summary["classes"]:
        counts = ", ".join(f"{name} {n}" for name, n in summary["per_class"].items())
        click.echo(f"  classes  {len(summary['classes'])}: {counts}")
    if summary["conditions"]:
        click.echo(f"  conditions  {', '.join(summary['conditions'])}")


@click.command("manifest")
@click.argument("data")
@click.option("--split", default=None, help="Split folder to read (train, val...).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Keep N samples per class (labelled data) or N in all, chosen by name hash.",
)
@data_layout_options
@json_option
@with_store
def manifest_cmd(
    store,
    data: str,
    split: str | None,
    limit: int | None,
    data_options: dict[str, Any],
    as_json: bool,
) -> None:
    """Read DATA (a folder, a .csv/.jsonl list, sklearn:digits, shapes) into a manifest.

    Prints the manifest id, sample counts per class, classes, layout and split. Unchanged files
    are not read again: a second run costs a stat per file.
    """
    from ..data import load_manifest

    view = load_manifest(store, data, split=split, limit=limit, **data_options)
    summary = view.summary()
    emit(as_json, summary, lambda: _print(summary))
