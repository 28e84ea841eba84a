"""The import rule of docs/architecture.md: imports at module top; a function-local one says why."""

from __future__ import annotations

import ast
from pathlib import Path

import package_code
import pytest

PACKAGE = package_code.PACKAGE
NOTE = "# Local imports:"  # a module-wide reason, under the module's imports



def _type_checking(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def unexplained_local_imports(path: Path, root: Path = PACKAGE) -> list[str]:
    """``file:line`` of each function-local import with no comment on its line, above it (or
    above the run of imports it belongs to), and no module note."""
    lines = package_code.source(path).splitlines()
    if any(line.startswith(NOTE) for line in lines):
        return []
    tree = package_code.tree(path)
    skip = _type_checking(tree)
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in skip:
                continue
            if "#" in lines[node.lineno - 1]:
                continue
            above = node.lineno - 2
            while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
                above -= 1  # the run of imports this one belongs to
            if above >= 0 and lines[above].strip().startswith("#"):
                continue
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


@pytest.mark.parametrize(
    "path",
    package_code.modules(),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_function_local_imports_say_why(path):
    assert unexplained_local_imports(path) == []


def test_the_check_finds_an_unexplained_import(tmp_path):
    module = tmp_path / "probe.py"
    bare = "def f():\n    import json\n\n    return json\n"
    module.write_text(bare)
    assert unexplained_local_imports(module, tmp_path) == ["probe.py:2"]
    module.write_text("def f():\n    # json: kept off the cached path\n    import json\n"
                      "    import re\n    return json, re\n")
    assert unexplained_local_imports(module, tmp_path) == []
    module.write_text(f"{NOTE} heavy libraries load where they are used.\n\n{bare}")
    assert unexplained_local_imports(module, tmp_path) == []

