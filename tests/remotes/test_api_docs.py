"""The Python API examples of docs/remotes.md call the sharing functions with their arguments in
the order the functions take them: each call's remote argument is a remote the example added."""

import ast
import inspect
import re
from pathlib import Path

import vbstore
from vbstore.suites import pull_board, push_board

DOC = Path(__file__).parents[2] / "docs" / "remotes.md"
# the function, and the name of its parameter that is a configured remote
REMOTE_PARAMETER = {"push_head": (vbstore.push_head, "to"),
                    "push_board": (push_board, "remote"),
                    "pull_board": (pull_board, "remote")}


def test_remotes_doc_examples_pass_a_remote_where_the_function_takes_one():
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    checked = 0
    for block in blocks:
        tree = ast.parse(block)
        added = {node.args[1].value for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "add_remote"}
        for node in ast.walk(tree):
            name = getattr(node.func, "id", None) if isinstance(node, ast.Call) else None
            if name not in REMOTE_PARAMETER:
                continue
            func, parameter = REMOTE_PARAMETER[name]
            bound = inspect.signature(func).bind(*[ast.unparse(a) for a in node.args])
            assert ast.literal_eval(bound.arguments[parameter]) in added | {"team"}, (
                f"docs/remotes.md: {ast.unparse(node)} passes no remote as {parameter!r}")
            checked += 1
    assert checked >= 3
