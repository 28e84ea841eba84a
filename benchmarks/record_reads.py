"""Count the constant-key reads of stored documents above the engine (issue #33: records, not
dicts, above the engine).

A read is ``x["task"]`` or ``x.get("task")`` where ``x`` is a stored document or a part of one:
what ``read_json``, ``read_bytes``, ``check_record``, ``head_record``, ``read_safetensors_header``,
``parse_safetensors_header`` and a record's ``to_dict`` return, an object's ``.doc``, a head's
``__metadata__`` and the JSON text in it (``HeadMetadata.compat_json`` parsed), and whatever a
name, a parameter or a function's return carries of them. Names, parameters and returns are
followed through the whole package (a call passing a document makes that parameter one; a
function returning one makes its calls one), matched by the function's name where one function
in the package has that name.

Reads off a record's own dict-valued fields (``evaluation.checkpoint["id"]``) are not counted:
the schema declares those fields as free-form maps and the record types keep them so.

    python benchmarks/record_reads.py            # the total and the count per module
    python benchmarks/record_reads.py --lines    # every read, file:line and the key
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vbstore"
# the modules above the engine (the brief of issue #33, and tests/test_dispatch.py's readers)
ABOVE = ("vbstore/suites/", "vbstore/heads/", "vbstore/remotes/", "vbstore/interop/",
         "vbstore/cli/", "vbstore/browse/", "vbstore/plots/", "vbstore/_api.py")
SOURCES = {"read_json", "head_record", "read_safetensors_header", "parse_safetensors_header",
           "to_dict", "check_record",
           "read_bytes"}
# functions whose names are too common to follow by name
UNFOLLOWED = {"get", "items", "values", "keys", "append", "update", "dict", "list", "sorted",
              "len", "str", "int", "float", "isinstance", "print", "echo", "emit", "dumps",
              "format", "join", "set", "tuple", "any", "all", "max", "min", "sum", "zip",
              "enumerate", "range", "round", "getattr", "setattr", "next", "iter", "map",
              "filter", "bool", "type", "repr", "from_dict", "extend", "pop", "setdefault"}


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")


def _key(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(the read thing, the key) of a constant-key read."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.value, node.slice.value
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant)
          and isinstance(node.args[0].value, str)):
        return node.func.value, node.args[0].value
    return None


class Analysis:
    def __init__(self, modules: dict[str, ast.Module]):
        self.modules = modules
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for tree in modules.values():
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.setdefault(node.name, []).append(node)
                elif isinstance(node, ast.ClassDef):  # a call of a class is one of __init__
                    self.functions.setdefault(node.name, []).extend(
                        f for f in node.body
                        if isinstance(f, ast.FunctionDef) and f.name == "__init__")
        self.params: set[tuple[str, str]] = set()  # (function, parameter) carrying a document
        self.returning: set[str] = set()  # functions returning a document
        self.names: dict[int, set[str]] = {}  # scope id -> names carrying a document
        # each module's scopes with the nodes of their own that a read or a flow can be
        self.scopes = {rel: [(scope, [n for n in _own_nodes(scope) if isinstance(n, _FLOWS)])
                             for scope in ast.walk(tree) if isinstance(scope, _SCOPES)]
                       for rel, tree in modules.items()}

    def followed(self, name: str) -> bool:
        """Whether calls to ``name`` are followed: one function of that name in the package."""
        return name not in UNFOLLOWED and len(self.functions.get(name, ())) == 1

    def tainted(self, node: ast.AST, names: set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Attribute):
            return node.attr in ("doc", "compat_json")
        got = _key(node)
        if got is not None:
            return self.tainted(got[0], names)
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name in SOURCES or (name in self.returning and self.followed(name)):
                return True
            if name == "loads" and node.args and self.tainted(node.args[0], names):
                return True  # JSON text held in a document (a head's compat record)
            if name in ("dict", "normalize", "deepcopy") and node.args:
                return self.tainted(node.args[0], names)
            return False
        if isinstance(node, (ast.Subscript,)):
            return self.tainted(node.value, names)
        if isinstance(node, ast.BoolOp):
            return any(self.tainted(v, names) for v in node.values)
        if isinstance(node, ast.IfExp):
            return self.tainted(node.body, names) or self.tainted(node.orelse, names)
        if isinstance(node, ast.NamedExpr):
            return self.tainted(node.value, names)
        if isinstance(node, (ast.Tuple, ast.List)):  # unpacked by a for or an assignment
            return any(self.tainted(e, names) for e in node.elts)
        return False

    def _scope_names(self, scope: ast.AST, own: list[ast.AST]) -> set[str]:
        names = set()
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]
            names = {a.arg for a in args if (scope.name, a.arg) in self.params}
        changed = True
        while changed:
            changed = False
            for n in own:
                targets: list[ast.expr] = []
                if isinstance(n, ast.Assign) and self.tainted(n.value, names):
                    targets = n.targets
                elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None \
                        and self.tainted(n.value, names):
                    targets = [n.target]
                elif isinstance(n, ast.NamedExpr) and self.tainted(n.value, names):
                    targets = [n.target]
                elif (isinstance(n, ast.Call) and _name(n.func) in ("append", "extend")
                      and isinstance(n.func, ast.Attribute) and n.args
                      and self.tainted(n.args[0], names)):
                    targets = [n.func.value]  # a list of documents
                elif isinstance(n, (ast.For, ast.comprehension)):
                    it = n.iter
                    if isinstance(it, ast.Call) and _name(it.func) in ("items", "values") \
                            and isinstance(it.func, ast.Attribute):
                        it = it.func.value
                    if self.tainted(it, names):
                        targets = [n.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name) and sub.id not in names:
                            names.add(sub.id)
                            changed = True
        return names

    def run(self) -> None:
        changed = True
        while changed:
            changed = False
            for scopes in self.scopes.values():
                for scope, own in scopes:
                    names = self._scope_names(scope, own)
                    self.names[id(scope)] = names
                    for n in own:
                        if isinstance(n, ast.Return) and n.value is not None and isinstance(
                                scope, ast.FunctionDef) and self.tainted(n.value, names) \
                                and scope.name not in self.returning:
                            self.returning.add(scope.name)
                            changed = True
                        if isinstance(n, ast.Call):
                            changed |= self._pass(n, names)

    def _pass(self, call: ast.Call, names: set[str]) -> bool:
        name = _name(call.func)
        if not self.followed(name):
            return False
        changed = False
        for fn in self.functions[name]:
            params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
            if params and params[0] in ("self", "cls"):
                params = params[1:]
            given = list(zip(params, call.args, strict=False))
            given += [(k.arg, k.value) for k in call.keywords if k.arg]
            for param, value in given:
                if (fn.name, param) not in self.params and self.tainted(value, names):
                    self.params.add((fn.name, param))
                    changed = True
        return changed

    def reads(self, rel: str) -> list[tuple[int, str]]:
        out, seen = [], set()
        for scope, own in self.scopes[rel]:
            names = self.names.get(id(scope), set())
            for n in own:
                got = _key(n)
                if got and id(n) not in seen and self.tainted(got[0], names):
                    seen.add(id(n))
                    out.append((n.lineno, got[1]))
        return sorted(out)


_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)
_FLOWS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.Call, ast.For,
          ast.comprehension, ast.Return, ast.Subscript)


def _own_nodes(scope: ast.AST):
    """The nodes of ``scope`` outside the functions nested in it (lambdas and comprehensions
    are the scope's own)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
        elif isinstance(node, ast.ClassDef):
            stack.extend(c for c in node.body
                         if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)))


def count(package: Path = PACKAGE) -> dict[str, list[tuple[int, str]]]:
    modules = {p.relative_to(package.parent).as_posix(): ast.parse(p.read_text())
               for p in sorted(package.rglob("*.py"))}
    analysis = Analysis(modules)
    analysis.run()
    return {rel: r for rel in modules if rel.startswith(ABOVE) and (r := analysis.reads(rel))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", action="store_true", help="list every read")
    parser.add_argument("package", nargs="?", type=Path, default=PACKAGE)
    args = parser.parse_args()
    found = count(args.package)
    total = sum(map(len, found.values()))
    print(f"constant-key reads of stored documents above the engine: {total} "
          f"in {len(found)} modules")
    for rel, reads in sorted(found.items(), key=lambda kv: -len(kv[1])):
        keys = Counter(k for _, k in reads)
        print(f"  {len(reads):4d}  {rel}" + ("" if args.lines else
                                             f"  ({', '.join(sorted(keys))})"))
        if args.lines:
            for line, key in reads:
                print(f"        {rel}:{line}  {key!r}")


if __name__ == "__main__":
    main()
