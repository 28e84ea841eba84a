"""Structure figures for the code base, printed side by side for one or two checkouts.

    python benchmarks/shape_figures.py [CHECKOUT ...]

For each checkout (default: this one): the largest functions by lines and by parameter count,
and the modules ``vbstore --help`` imports with its wall time (a fresh process, best of 5).
Import circles are counted by ``circles.py`` (the team's tool); this script does not repeat it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path


def functions(root: Path) -> list[tuple[int, int, str]]:
    """``(lines, parameters, qualified name)`` for every function under ``root/vbstore``."""
    out = []
    for path in sorted((root / "vbstore").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                params -= bool(a.args and a.args[0].arg in ("self", "cls"))
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                out.append((lines, params, f"{module}.{node.name}"))
    return out


def help_imports(root: Path) -> tuple[int, int, float]:
    """Modules of vbstore imported by ``vbstore --help``, all vbstore modules, best wall time."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    probe = ("import sys, runpy; sys.argv=['vbstore','--help']\n"
             "try: runpy.run_module('vbstore', run_name='__main__')\n"
             "except SystemExit: pass\n"
             "print(sum(1 for m in sys.modules if m == 'vbstore' or m.startswith('vbstore.')),"
             " file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    imported = int(run.stderr.strip().splitlines()[-1])
    total = sum(1 for _ in (root / "vbstore").rglob("*.py"))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vbstore", "--help"], env=env, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return imported, total, best


def main() -> None:
    roots = [Path(p).resolve() for p in sys.argv[1:]] or [Path(__file__).resolve().parents[1]]
    for root in roots:
        funcs = functions(root)
        print(f"== {root}")
        print("  longest functions (lines, params):")
        for lines, params, name in sorted(funcs, reverse=True)[:8]:
            print(f"    {lines:4d} {params:3d}  {name}")
        print("  most parameters (params, lines):")
        for lines, params, name in sorted(funcs, key=lambda f: (f[1], f[0]), reverse=True)[:8]:
            print(f"    {params:4d} {lines:3d}  {name}")
        over = sum(1 for _, p, _ in funcs if p > 12)
        print(f"  functions over 12 parameters: {over}")
        imported, total, best = help_imports(root)
        print(f"  vbstore --help: {imported} of {total} modules imported, best of 5 {best:.2f} s")


if __name__ == "__main__":
    main()
