"""docs/architecture.md is the map of the package: every package of vbstore/ has its room."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rooms() -> set[str]:
    """The names in the first column of the rooms table: `store/`, `errors.py`..."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("## The rooms", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w.]+/?)` \|", table, re.M))


def test_every_package_has_a_room():
    packages = {f"{p.parent.name}/" for p in (ROOT / "vbstore").glob("*/__init__.py")}
    missing = sorted(packages - rooms())
    assert not missing, f"docs/architecture.md's rooms table leaves out {missing}"


def test_every_room_exists():
    gone = sorted(name for name in rooms() if not (ROOT / "vbstore" / name.rstrip("/")).exists())
    assert not gone, f"docs/architecture.md names {gone}, which vbstore/ no longer has"
