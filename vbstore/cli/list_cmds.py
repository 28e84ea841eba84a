"""``vbstore list backbones|tasks|heads``: what can be asked for, and the heads stored."""

from __future__ import annotations

import click

from ._common import emit, human_size, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


@click.group(name="list")
def list_group() -> None:
    """List the registered backbones or tasks, or the stored heads."""


@list_group.command("backbones")
@click.argument("pattern", default="*")
@click.option("--models/--no-models", default=None,
              help="Also list the pretrained models timm, torchvision and open_clip offer "
              "(default: when a PATTERN is given).")
@json_option
def list_backbones_cmd(pattern: str, models: bool | None, as_json: bool) -> None:
    """Backbones and models whose name or spec matches PATTERN (fnmatch, e.g. 'resnet*').

    Lists registered sources and plugins, bare names (resnet18, dinov2_vits14, clip_vitb16...)
    with the pinned spec each stands for, and, for a PATTERN, every pretrained model the
    installed libraries offer as a spec to pass to -b; 'no [clip]' marks a missing extra, and
    'offline' the backbones that build with no network (efficientnet_lite0/1/2 with the weights
    extra, the test backbones); the others download their weights once, then read the cache.
    """
    from ..backbones import catalog_rows

    rows = catalog_rows(pattern, models=pattern != "*" if models is None else models)

    def text() -> None:
        width = max([34, *(len(row["spec"]) + 1 for row in rows)])
        click.echo(f"{'spec':<{width}} {'source':<12} {'installed':<10} {'offline':<8} "
                   f"{'pooling':<8} dim")
        for row in rows:
            installed = "yes" if row["installed"] else f"no [{row['extra']}]"
            offline = "yes" if row["offline"] else "-"
            line = (f"{row['spec']:<{width}} {row['source']:<12} {installed:<10} {offline:<8} "
                    f"{row['default_pooling'] or '-':<8} {row['embed_dim'] or '-'}")
            stands = row.get("stands_for")
            click.echo(f"{line}  = {stands}" if stands else line)
        if not rows:
            click.echo(f"nothing matches {pattern!r}")
        elif pattern == "*" and not models:
            click.echo("give a PATTERN (e.g. 'vit_base*') to list the models timm, torchvision "
                       "and open_clip offer")

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
            metrics = ", ".join(m["name"] if isinstance(m, dict) else str(m)
                                for m in row["metrics"])
            click.echo(f"{row['name']:<26} {row['level']:<5} v{row['op_version']}  {kind}  "
                       f"[{metrics}]")
            for key, param in row.get("params", {}).items():
                setting = f"{key}={param['default']!s}"
                click.echo(f"    -p {setting:<24} {param['help']}")

    emit(as_json, rows, text)


@list_group.command("heads")
@click.argument("pattern", default="*")
@json_option
@with_store
def list_heads_cmd(store, pattern: str, as_json: bool) -> None:
    """Stored probe heads whose task matches PATTERN (fnmatch), newest first.

    Each with the backbone, weights and training data it was fit on, and how it reads features
    (pooling, layers); apply one with `get result --head ID`, share it with `push head`.
    """
    from ..engine import head_rows

    rows = head_rows(store, pattern)

    def text() -> None:
        if not rows:
            click.echo("no stored heads" + (f" of a task matching {pattern!r}"
                                            if pattern != "*" else ""))
            return
        width = max(len(row["backbone"]) for row in rows) + 1
        click.echo(f"{'id':<12}  {'task':<22} {'backbone':<{width}} {'weights':<10} "
                   f"{'pooling':<8} {'size':>9}  data")
        for row in rows:
            names = ",".join(row["refs"])
            state = "  (evicted)" if row["evicted"] else ""
            click.echo(f"{row['id'][:12]}  {row['task'] or '?':<22} {row['backbone']:<{width}} "
                       f"{row['weights'] or '-':<10} {row.get('pooling') or '-':<8} "
                       f"{human_size(row['size']):>9}  {row['data']}{state}"
                       + (f"  [{names}]" if names else ""))

    emit(as_json, rows, text)
