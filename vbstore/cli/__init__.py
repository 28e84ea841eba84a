"""The ``vbstore`` command. It only parses and prints; the work happens in the library.

``main`` first asks the answer cache (:mod:`._answers`): a ``get result`` this store answered
before, under the same arguments, code and unchanged data, is printed again without importing
click or the engine. Everything else goes to the click group in :mod:`._root`.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing itself costs a cached answer ~10 ms to import
if TYPE_CHECKING:
    import click

    from . import _answers


def main(argv: list[str] | None = None) -> None:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``)."""
    args = sys.argv[1:] if argv is None else list(argv)
    # A command's objects mostly live until it exits: collecting cycles every 100k allocations
    # rather than every 700 spares a cached `get` on 10k images ~8 ms of collector passes over
    # them (mypy's command does the same). The library itself keeps Python's defaults.
    gc.set_threshold(100_000, 10, 10)
    pending: _answers.Pending | bool = False
    try:
        if "result" in args and "get" in args:
            from . import _answers  # sqlite3, json and blake3 only: the store's answer cache

            pending = _answers.answer(args)
            if pending is True:
                return
        from ._common import one_line_warnings  # click too: only once there was no answer
        from ._root import cli  # click: only once the answer cache had no answer

        one_line_warnings()  # the process's own: a caller of `cli` keeps its warning handling
        # `get result` records its answer under this key (click's context object)
        cli(args=args, prog_name="vbstore", obj={"answer": pending or None})
    except KeyboardInterrupt:
        # Ctrl-C before click's group handles it (the answer cache, the imports): the same one
        # line and exit code as inside a command
        _interrupted("--json" in args)
    finally:
        # The interpreter's last collection at exit walks every object the command made (~5 ms
        # of a cached `get`) to free what the exiting process is about to give back anyway;
        # frozen objects are left out of it (atexit handlers and finalizers still run).
        gc.freeze()


def _interrupted(as_json: bool) -> None:
    """Print what ``VbstoreGroup`` prints on Ctrl-C (without click: it may not be loaded) and
    exit 130."""
    if os.environ.get("VBSTORE_DEBUG"):
        raise KeyboardInterrupt
    message = "interrupted; the store is unchanged by the unfinished step"
    if as_json:
        import json  # only on this error path

        sys.stdout.write(json.dumps({"error": message, "hint": "", "exit_code": 130,
                                     "type": "KeyboardInterrupt"}, sort_keys=True) + "\n")
    else:
        sys.stderr.write(f"error: {message}\n")
    sys.exit(130)


def __getattr__(name: str) -> click.Group:
    # `from vbstore.cli import cli`: the group loads click, so it is imported when asked for
    if name == "cli":
        from ._root import cli  # as in main

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
