"""vbstore is no import circle: its modules form layers, every import counted.

The graph counts every import of a vbstore module (at the top, inside a function, under
TYPE_CHECKING), as the team's ``circles.py`` does (Tarjan's strongly connected components); a
package ``__init__`` that only hands names on (a face) is left out, as the names behind it are
what is imported. Copied here so the suite needs nothing outside the repository.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import package_code

PACKAGE = package_code.PACKAGE


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(package_code.tree(path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def is_face(path: Path) -> bool:
    body = package_code.tree(path).body
    defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return all(isinstance(n, ast.FunctionDef) and n.name in ("__getattr__", "__dir__")
               for n in defs)


def graph_of(files: dict[str, Path]) -> dict[str, set[str]]:
    known = set(files)
    faces = {n for n, p in files.items() if p.name == "__init__.py" and is_face(p)}
    return {n: imports(p, n, known) - faces for n, p in files.items() if n not in faces}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def package_files() -> dict[str, Path]:
    return {module_name(p): p for p in package_code.modules()}


@cache
def _package_graph() -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple((n, frozenset(e)) for n, e in graph_of(package_files()).items())


def package_graph() -> dict[str, set[str]]:
    """The package's import graph, made once per process (each caller gets its own copy)."""
    return {n: set(e) for n, e in _package_graph()}


def test_the_package_has_no_import_circle():
    # the whole package, not only the engine: backbones, remotes, features, data and tasks held
    # the last seven (shared types and helpers now live in leaves below both sides)
    assert circles(package_graph()) == []


def test_the_engine_has_no_import_circle():
    engine = [c for c in circles(package_graph())
              if any(m.startswith("vbstore.engine.") for m in c)]
    assert engine == []


def test_heads_is_a_face_and_no_circle():
    assert is_face(PACKAGE / "heads" / "__init__.py")
    assert not [c for c in circles(package_graph())
                if any(m.startswith("vbstore.heads") for m in c)]


def test_a_package_that_is_no_face_closes_a_circle_through_its_init(tmp_path):
    # ``from . import _limits`` imports the package too: were remotes/__init__ to hold a
    # function again (it held add_remote), every module importing a sibling that way would tie
    # a circle through it
    files = package_files()
    graph = package_graph()
    face = files["vbstore.remotes"]
    assert is_face(face)
    known = set(files)
    graph["vbstore.remotes"] = imports(face, "vbstore.remotes", known)
    graph = {n: edges | ({"vbstore.remotes"} if "vbstore.remotes" in
                         imports(files[n], n, known) else set())
             for n, edges in graph.items()}
    assert any("vbstore.remotes" in c and "vbstore.remotes._closure" in c
               for c in circles(graph))


def test_a_local_or_type_checking_import_closes_a_circle(tmp_path):
    # the check itself: imports inside a function and under TYPE_CHECKING count
    source = tmp_path / "_scored.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from ._planned import Plan\n"
                      "def f():\n    from ._plan import plan\n")
    known = {"vbstore.engine._scored", "vbstore.engine._planned", "vbstore.engine._plan"}
    found = imports(source, "vbstore.engine._scored", known)
    assert found == {"vbstore.engine._planned", "vbstore.engine._plan"}
    graph = package_graph()
    graph["vbstore.engine._scored"] = graph["vbstore.engine._scored"] | found
    assert any("vbstore.engine._scored" in c and "vbstore.engine._plan" in c
               for c in circles(graph))


def test_the_store_has_no_import_circle():
    # its views and maintenance functions take a StoreBase (store/_base.py), never _store's Store
    store = [c for c in circles(package_graph())
             if any(m.startswith("vbstore.store.") for m in c)]
    assert store == []
