"""Probe shapes and target kinds have one home: code outside vbstore/tasks never branches on a
task's shape flags, and no module but the data layer's registry lists the target kinds. The
layers above the engine read records through their types, not documents by key.

Run as a script for the figures: ``python tests/test_dispatch.py`` (issue #20's counts)."""

from __future__ import annotations

import ast
import sys

import package_code

PACKAGE = package_code.PACKAGE
FLAGS = {"feature_mode", "target_kind", "trains_head", "zero_shot", "needs_text", "views",
         "dense"}  # Feed.dense was a flag test in disguise
KINDS = {"class_index", "multi_hot", "captions", "triplets", "pairs", "label_map", "depth_map",
         "normal_map", "scalar_map", "image", "boxes", "instances"}
# the other registered kinds: data sources (data/_source_kinds.py), remote schemes
# (remotes/_schemes.py)
SOURCE_KINDS = {"hf", "torchvision", "wds", "cb"}
SCHEMES = {"dir", "s3", "hf"}
# the modules that declare a kind's behaviour may name it: the registries and the decoders the
# built-in per-pixel kinds point to
DECLARING = ("vbstore/data/_kinds.py", "vbstore/data/_kinds_builtin.py",
             "vbstore/data/_targets.py", "vbstore/data/_source_kinds.py",
             "vbstore/data/_sources_builtin.py", "vbstore/remotes/_schemes.py",
             "vbstore/remotes/_schemes_builtin.py")


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


def _names_a_kind(node: ast.AST) -> bool:
    """An expression that holds a kind or scheme by its name: ``kind``, ``task.target_kind``,
    ``config.scheme``, ``source.get("kind")``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "get" and node.args:
        key = node.args[0]
        return isinstance(key, ast.Constant) and key.value in ("kind", "scheme")
    name = node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else "")
    return name.lower().endswith(("kind", "scheme"))


def _kind_constants(node: ast.AST) -> set[str]:
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def kind_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing a kind or scheme against a kind's name (``kind == "class_index"``,
    ``kind in ("hf", "wds")``, ``config.scheme == "s3"``): dispatch by name, where the kind's
    registration should carry the behaviour."""
    names = KINDS | SOURCE_KINDS | SCHEMES
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if any(_names_a_kind(o) for o in operands) and any(
                _kind_constants(o) & names for o in operands):
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
    """(path under the repository, tree) of each module: parsed once per process, shared."""
    for path in package_code.modules():
        yield path.relative_to(PACKAGE.parent).as_posix(), package_code.tree(path)


def test_no_code_outside_tasks_branches_on_a_task_shape():
    found = {rel: lines for rel, tree in _modules()
             if not rel.startswith("vbstore/tasks/") and (lines := branches(tree))}
    assert found == {}, "dispatch on task.shape_spec / the plan's runner instead"


def test_target_kinds_are_listed_in_no_module_but_their_registry():
    found = {rel: lines for rel, tree in _modules() if (lines := kind_lists(tree))}
    assert found == {}, "declare a kind once, in vbstore/data (register_target_kind)"


# comparisons that remain, at most this many per module, each for its reason (a ratchet: a new
# one fails, and a fixed one lowers the count)
STILL_COMPARED = {
    "vbstore/data/_lists.py": (1, "a sample list's column (captions), not a target kind"),
    "vbstore/features/_ray.py": (1, "where the Ray workers write (a dir), not a remote scheme"),
    "vbstore/plots/_datagrid.py": (1, "a drawing style (TargetKind.drawn), not a kind"),
    "vbstore/suites/_external.py": (1, "an evidence kind of an external result (hf=VALUE)"),
    "vbstore/engine/_show.py": (2, "the manifest's rows field (triplets or pairs) being drawn"),
    "vbstore/interop/clip_benchmark.py": (2, "CLIP_benchmark's names for torchvision and wds "
                                             "data: the other tool's table"),
    "vbstore/cli/head_cmds.py": (1, "a Hub model card on push head (moves out of the CLI with "
                                    "push/pull head orchestration)"),
}


def test_no_module_compares_a_kind_with_a_kind_name():
    found = {rel: lines for rel, tree in _modules()
             if not rel.startswith(DECLARING) and (lines := kind_comparisons(tree))}
    over = {rel: lines for rel, lines in found.items()
            if len(lines) > STILL_COMPARED.get(rel, (0, ""))[0]}
    assert over == {}, "let the kind's registration carry it (TargetKind, SourceKind, ...)"


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
    code = ("if kind == 'class_index':\n    pass\nx = task.target_kind in ('boxes', 'x')\n"
            "y = config.scheme == 's3'\nz = source.get('kind') == 'wds'\n"
            "w = name == 'pairs'\n")
    assert kind_comparisons(ast.parse(code)) == [1, 3, 4, 5]


if __name__ == "__main__":
    modules = list(_modules())
    outside = {rel: b for rel, tree in modules
               if not rel.startswith("vbstore/tasks/") and (b := branches(tree))}
    print("branches on task shape flags outside tasks/:", sum(map(len, outside.values())), outside)
    lists = {rel: k for rel, tree in modules if (k := kind_lists(tree))}
    print("literals listing target kinds:", sum(map(len, lists.values())), lists)
    compared = {rel: k for rel, tree in modules if (k := kind_comparisons(tree))}
    print("comparisons of a kind with a kind's name:", sum(map(len, compared.values())),
          compared)
    reads = {rel: r for rel, tree in modules
             if not rel.startswith(("vbstore/engine/", "vbstore/records/"))
             and (r := document_reads(tree))}
    above = {rel: r for rel, r in reads.items() if rel.startswith(READERS_ABOVE)}
    print("document reads outside engine/ and records/:", sum(map(len, reads.values())), reads)
    print("  of which in cli/ suites/ interop/ remotes/ browse/ plots/:",
          sum(map(len, above.values())), above)
    compute = PACKAGE / "engine" / "_compute.py"
    print("engine/_compute.py lines:", len(compute.read_text().splitlines()), file=sys.stdout)
