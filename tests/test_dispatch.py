"""Probe shapes and target kinds have one home: code outside vbstore/tasks never branches on a
task's shape flags, and no module but the data layer's registry lists the target kinds.

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
    compute = PACKAGE / "engine" / "_compute.py"
    print("engine/_compute.py lines:", len(compute.read_text().splitlines()), file=sys.stdout)
