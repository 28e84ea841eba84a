"""``vbstore list backbones|tasks``: what can be asked for."""

from __future__ import annotations

import click

from ._common import emit, json_option


@click.group(name="list")
def list_group() -> None:
    """List the registered backbones or tasks."""


@list_group.command("backbones")
@click.argument("pattern", default="*")
@json_option
def list_backbones_cmd(pattern: str, as_json: bool) -> None:
    """Backbones whose name or spec matches PATTERN (fnmatch, e.g. 'dinov2*')."""
    from ..backbones import backbone_rows

    rows = backbone_rows(pattern)

    def text() -> None:
        click.echo(f"{'spec':<34} {'source':<12} {'installed':<10} {'pooling':<8} dim")
        for row in rows:
            installed = "yes" if row["installed"] else f"no [{row['extra']}]"
            click.echo(f"{row['spec']:<34} {row['source']:<12} {installed:<10} "
                       f"{row['default_pooling'] or '-':<8} {row['embed_dim'] or '-'}")

    emit(as_json, rows, text)


@list_group.command("tasks")
@click.argument("pattern", default="*")
@json_option
def list_tasks_cmd(pattern: str, as_json: bool) -> None:
    """Tasks matching PATTERN, with their level, metrics and parameters."""
    from ..tasks import get_task, list_tasks

    rows = [get_task(name).describe() for name in list_tasks(pattern)]

    def text() -> None:
        for row in rows:
            kind = "zero-shot" if row.get("zero_shot") else "trains a head"
            metrics = ", ".join(m["name"] if isinstance(m, dict) else str(m) for m in row["metrics"])
            click.echo(f"{row['name']:<26} {row['level']:<5} v{row['op_version']}  {kind}  [{metrics}]")
            for key, param in row.get("params", {}).items():
                click.echo(f"    -p {key}={param['default']!s:<10} {param['help']}")

    emit(as_json, rows, text)
