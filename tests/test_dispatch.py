"""Probe shapes and target kinds have one home: code outside vbstore/tasks never branches on a
task's shape flags, and no module but the data layer's registry lists the target kinds. The
layers above the engine read records through their types, not documents by key.

Run as a script for the figures: ``python tests/test_dispatch.py`` (issue #20's counts)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vbstore"
FLAGS = {"feature_mode", "target_kind", "trains_head", "zero_shot", "needs_text", "views",
         "dense"}  # Feed.dense was a flag test in disguise
KINDS = {"class_index", "multi_hot", "captions", "triplets", "pairs", "label_map", "depth_map",
         "normal_map", "scalar_map", "image", "boxes", "instances"}


def _reads_flag(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in FLAGS and isinstance(n.ctx, ast.Load):
            return True
        if (isinstance(n, ast.Call) and getattr(n.func, "id", "") == "isinstance"
                and len(n.args) == 2 and getattr(n.args[1], "id", "") == "DenseTask"):
            return True
    return False


def branches(tree: ast.AST) -> list[int]:
    """Lines of decisions that read a shape flag: if/elif/while/ternary/assert tests,
    comprehension conditions, and comparisons or boolean operators elsewhere."""
    out, inside = [], set()
    for node in ast.walk(tree):
        tests = []
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            tests = [node.test]
        elif isinstance(node, ast.comprehension):
            tests = list(node.ifs)
        for test in tests:
            inside.update(id(sub) for sub in ast.walk(test))
            if _reads_flag(test):
                out.append(test.lineno)
    for node in ast.walk(tree):
        boolean = isinstance(node, (ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))
        if boolean and id(node) not in inside and _reads_flag(node):
            out.append(node.lineno)
            inside.update(id(sub) for sub in ast.walk(node))
    return sorted(out)


def kind_lists(tree: ast.AST) -> list[int]:
    """Lines of collection literals that name three target kinds or more."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            elts = [*node.keys, *node.values]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elts = node.elts
        else:
            continue
        if len({e.value for e in elts if isinstance(e, ast.Constant) and e.value in KINDS}) >= 3:
            out.append(node.lineno)
    return out


# the layers above the engine, which read records through vbstore.records (issue #20)
READERS_ABOVE = ("vbstore/cli/", "vbstore/suites/", "vbstore/interop/", "vbstore/remotes/",
                 "vbstore/browse/", "vbstore/plots/")
_READ = {"read_json", "head_record"}


def _is_read(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (getattr(node.func, "attr", None) in _READ
                                           or getattr(node.func, "id", None) in _READ)


def document_reads(tree: ast.AST) -> list[int]:
    """Lines reading a record document as a dict: ``x.doc[...]``/``x.doc.get(...)``, and a
    constant key read (``["metrics"]``, ``.get("sources")``) off ``read_json``/``head_record``,
    directly or through a name bound to one in the same function."""
    out: list[int] = []
    seen: set[int] = set()
    for scope in ast.walk(tree):
        if not isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = {t.id for n in ast.walk(scope) if isinstance(n, ast.Assign) and _is_read(n.value)
                 for t in n.targets if isinstance(t, ast.Name)}
        for n in ast.walk(scope):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
                target, key = n.value, n.slice
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and n.func.attr == "get" and n.args):
                target, key = n.func.value, n.args[0]
            else:
                continue
            doc = isinstance(target, ast.Attribute) and target.attr == "doc"
            named = isinstance(key, ast.Constant) and isinstance(key.value, str) and (
                _is_read(target) or (isinstance(target, ast.Name) and target.id in names))
            if (doc or named) and id(n) not in seen:
                seen.add(id(n))
                out.append(n.lineno)
    return sorted(out)


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent).as_posix(), ast.parse(path.read_text())


def test_no_code_outside_tasks_branches_on_a_task_shape():
    found = {rel: lines for rel, tree in _modules()
             if not rel.startswith("vbstore/tasks/") and (lines := branches(tree))}
    assert found == {}, "dispatch on task.shape_spec / the plan's runner instead"


def test_target_kinds_are_listed_in_no_module_but_their_registry():
    found = {rel: lines for rel, tree in _modules() if (lines := kind_lists(tree))}
    assert found == {}, "declare a kind once, in vbstore/data (register_target_kind)"


def test_the_layers_above_the_engine_read_records_not_documents():
    found = {rel: lines for rel, tree in _modules()
             if rel.startswith(READERS_ABOVE) and (lines := document_reads(tree))}
    assert found == {}, "read the document through its record (vbstore.records)"


def test_the_counter_sees_a_document_read():
    code = ("def f(store, m):\n    doc = store.read_json(i)\n    a = doc['metrics']\n"
            "    b = store.read_json(j).get('sources')\n    c = m.doc['samples']\n"
            "    d = row['task']\n")
    assert document_reads(ast.parse(code)) == [3, 4, 5]


def test_the_counter_sees_a_branch():
    assert branches(ast.parse("if task.zero_shot:\n    pass\nx = a.dense and b")) == [1, 3]
    assert kind_lists(ast.parse("X = ('boxes', 'pairs', 'image')")) == [1]


if __name__ == "__main__":
    modules = list(_modules())
    outside = {rel: b for rel, tree in modules
               if not rel.startswith("vbstore/tasks/") and (b := branches(tree))}
    print("branches on task shape flags outside tasks/:", sum(map(len, outside.values())), outside)
    lists = {rel: k for rel, tree in modules if (k := kind_lists(tree))}
    print("literals listing target kinds:", sum(map(len, lists.values())), lists)
    reads = {rel: r for rel, tree in modules
             if not rel.startswith(("vbstore/engine/", "vbstore/records/"))
             and (r := document_reads(tree))}
    above = {rel: r for rel, r in reads.items() if rel.startswith(READERS_ABOVE)}
    print("document reads outside engine/ and records/:", sum(map(len, reads.values())), reads)
    print("  of which in cli/ suites/ interop/ remotes/ browse/ plots/:",
          sum(map(len, above.values())), above)
    compute = PACKAGE / "engine" / "_compute.py"
    print("engine/_compute.py lines:", len(compute.read_text().splitlines()), file=sys.stdout)
