"""Printing the lineage tree behind ``vbstore why``.

The tree itself is built by ``vbstore.engine.lineage``.
"""

from __future__ import annotations

from typing import Any

import click


def render_lineage(node: dict[str, Any], prefix: str = "", role: str | None = None,
                   last: bool = True, top: bool = True) -> None:
    """Print the tree with box-drawing branches."""
    label = f"{node['kind']} {node['id'][:12]}"
    if node.get("op"):
        origin = node.get("origin")
        label += f" ({node['op']}, {origin})" if origin else f" ({node['op']})"
    if node.get("summary"):
        label += f"  {node['summary']}"
    if not node["present"]:
        label += "  [not present]"
    if node.get("repeated"):
        label += "  (see above)"
    head = "" if top else prefix + ("└─ " if last else "├─ ")
    click.echo(head + (f"{role}: " if role else "") + label)
    children = node.get("inputs", [])
    child_prefix = "" if top else prefix + ("   " if last else "│  ")
    for i, child in enumerate(children):
        render_lineage(child, child_prefix, child["role"], i == len(children) - 1, top=False)
