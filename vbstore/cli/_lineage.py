"""Printing the lineage tree behind ``vbstore why``.

The tree itself is built by ``vbstore.engine.lineage``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from ..store import RunInfo


def run_line(run: RunInfo) -> str:
    """``2026-12-01 14:05 on HOST (DEVICE) in 3.21 s, features from the store``."""
    line = f"{dt.datetime.fromtimestamp(run.recorded).strftime('%Y-%m-%d %H:%M')} on {run.host}"
    if run.device:
        line += f" ({run.device})"
    if run.seconds is not None:
        line += f" in {run.seconds:.2f} s"
    if run.features_from_cache:
        line += ", features from the store"
    return line


def render_lineage(node: dict[str, Any], prefix: str = "", role: str | None = None,
                   last: bool = True, top: bool = True) -> None:
    """Print the tree with box-drawing branches."""
    label = f"{node['kind']} {node['id'][:12]}"
    if node.get("op"):
        origin = node.get("origin")
        label += f" ({node['op']}, {origin})" if origin else f" ({node['op']})"
    if node.get("summary"):
        label += f"  {node['summary']}"
    if node.get("run"):
        label += f"  [computed {run_line(RunInfo(**node['run']))}]"
    if not node["present"]:
        label += "  [not present]"
    if node.get("repeated"):
        label += "  (see above)"
    head = "" if top else prefix + ("└─ " if last else "├─ ")
    click.echo(head + (f"{role}: " if role else "") + label)
    children = node.get("inputs", [])
    child_prefix = "" if top else prefix + ("   " if last else "│  ")
    pad = child_prefix if top else child_prefix + ("│  " if children else "   ")
    for text in node.get("notes", []):  # what a user attached (--notes), newest first
        click.echo(f"{pad}notes: {text}")
    for i, child in enumerate(children):
        render_lineage(child, child_prefix, child["role"], i == len(children) - 1, top=False)
