"""vbstore's own modules, read and parsed once per test process.

The tests that check the code's shape (tests/test_dispatch.py, tests/test_imports.py,
tests/test_api_words.py, tests/engine/test_no_circles.py) each walked the whole package, parsing
its ~300 modules again (about a second each time, several times per file); they now share one
parse. The trees are shared: read them, never change them (``ast.walk``, ``ast.unparse``). A
file outside the package (a test's own probe module) is read and parsed afresh every time.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vbstore"


def modules() -> list[Path]:
    """The package's ``.py`` files, sorted."""
    return list(_modules())


def source(path: Path) -> str:
    """The text of ``path``."""
    path = Path(path).resolve()
    return _source(path) if PACKAGE in path.parents else path.read_text(encoding="utf-8")


def tree(path: Path) -> ast.Module:
    """``path`` parsed (shared for a module of the package: read only)."""
    path = Path(path).resolve()
    if PACKAGE in path.parents:
        return _tree(path)
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@cache
def _modules() -> list[Path]:
    return sorted(p.resolve() for p in PACKAGE.rglob("*.py"))


@cache
def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(_source(path), str(path))
