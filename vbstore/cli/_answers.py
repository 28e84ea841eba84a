"""``get result`` asks the store's answer cache before click loads, and fills it after.

The cache itself -- what an answer depended on, how it is checked, its tables, gc -- is the
store's (:mod:`vbstore.store._answers`); what a plan's answer read is the engine's
(:func:`vbstore.engine.answer_inputs`). This module only makes the key of a command line
(its words, with the working directory, interpreter, ``sys.path``, ``VBSTORE_HOME`` and home
folder that change what they mean), prints a found answer with the command's own printer
(:func:`._resulttext.result_lines`), and, after the full command answered from the store, asks
the store to record it. ``main`` calls :func:`answer` before importing click; the command gets
the :class:`Pending` key through click's context object.

Nothing is recorded for a read-only store, for ``--head``, ``--suite``, ``--recompute`` or
``--dry-run`` (the command does not ask), or when the printed answer is not what the stored
document would print; a command line with ``--notes`` or ``--results`` is never answered here
(the full command attaches the notes in the registry, appends the record to the file).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time

from .. import __version__
from ..store import _answers as cache
from ..store import default_home  # the store package loads its names lazily
from ._resulttext import result_lines

TYPE_CHECKING = False  # see vbstore/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


# options whose command writes beyond printing the answer: never answered here
_WRITES = ("--notes", "--results")


class Pending:
    """A command line the cache could not answer: its key, and when it started (a state
    newer than that is racy)."""

    __slots__ = ("key", "started_ns")

    def __init__(self, key: str, started_ns: int) -> None:
        self.key, self.started_ns = key, started_ns


def answer_key(args: list[str]) -> str:
    """The key of a command line: its words and everything that changes what they mean."""
    return cache.answer_key([__version__, sys.executable, sys.version, sys.path, os.getcwd(),
                             os.environ.get("VBSTORE_HOME"), os.path.expanduser("~"), args])


def _store_root(args: list[str]) -> str | None:
    """The store a ``[--store DIR] get result ...`` command line names, else None."""
    at = args.index("get")
    if args[at + 1:at + 2] != ["result"]:
        return None
    head = args[:at]
    if not head:
        return default_home()
    if len(head) == 2 and head[0] == "--store":
        return os.path.expanduser(head[1])
    if len(head) == 1 and head[0].startswith("--store="):
        return os.path.expanduser(head[0][len("--store="):])
    return None


def answer(args: list[str]) -> Pending | bool:
    """Print the stored answer of ``vbstore ARGS`` if the store's cache holds a valid one.

    Returns:
        True when it printed the answer; else the :class:`Pending` key the full command records
        its answer under, or False when this command line is not one the cache answers.
    """
    started, started_ns = time.perf_counter(), time.time_ns()
    root = _store_root(args)
    if root is None or any(a in _WRITES or a.startswith(tuple(f"{w}=" for w in _WRITES))
                           for a in args):
        return False  # notes go to the registry, --results to a file: the full command writes
    try:
        pending = Pending(answer_key(args), started_ns)  # OSError: a working directory removed
        found = cache.lookup(root, pending.key)
    except (OSError, sqlite3.Error, ValueError, KeyError, TypeError, IndexError):
        # a registry being created or migrated, a blob being replaced...: the full command
        # answers, and reports what is wrong if anything is
        if os.environ.get("VBSTORE_DEBUG"):
            raise
        return False
    if found is None:
        return pending
    seconds = time.perf_counter() - started
    if found.extra["json"]:
        text = json.dumps(stored_answer(found.oid, found.doc, found.run, seconds,
                                        found.extra.get("recorded")),
                          indent=2, sort_keys=True, default=str) + "\n"
        lines = [(False, text)]
    else:
        lines = [(err, line + "\n") for err, line in result_lines(
            found.doc, found.oid, found.extra.get("origin", "cached in the store"), seconds,
            found.extra["metric_order"])]
    if not _writable(lines):
        return pending
    try:
        for err, line in lines:
            (sys.stderr if err else sys.stdout).write(line)
            if not err:
                sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`), as the full command handles it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return True


def stored_answer(oid: str, doc: dict[str, Any], run: dict[str, Any] | None,
                  seconds: float, recorded: str | None = None) -> dict[str, Any]:
    """``--json``'s object for a stored result, as ``Result.as_dict`` gives it (``record``
    checks the two agree before it records an answer)."""
    out = {"id": oid, "from_cache": True, "source": "store", "seconds": round(seconds, 4),
           "record": doc}
    if run is not None:
        out["run"] = run
    if recorded not in (None, "computed"):
        out["recorded"] = recorded
    return out


def _writable(lines: list[tuple[bool, str]]) -> bool:
    """Whether each line can go to its stream as it is, as click would write it: click writes
    UTF-8 to a stream that says ASCII, and nothing where there is no stream (closed stdout)."""
    for err, line in lines:
        stream = sys.stderr if err else sys.stdout
        try:
            line.encode(stream.encoding, stream.errors or "strict")
        except (AttributeError, TypeError, LookupError, UnicodeError):
            return False  # the full command prints it (or not) its own way
    return True


def record(store, pending: Pending | None, the_plan, result, as_json: bool) -> None:
    """Ask the store to record the answer ``result`` of ``the_plan`` under ``pending``'s key,
    when it qualifies (the store watched its lookups since :func:`watch`)."""
    if pending is None or result.source != "store":
        return
    from ..engine import answer_inputs  # loaded by the command already
    from ..tasks import metric_order  # loaded by the command already

    # the answer must print as the stored document does (fields the record type would drop),
    # in the same --json object as the command's
    run = result.run.as_dict() if result.run is not None else None
    inputs = answer_inputs(the_plan)
    if inputs is None or result.as_dict() != stored_answer(
            result.id, store.read_json(result.id), run, result.seconds, result.recorded):
        return
    record = result.record
    store.record_answer(pending.key, result.id, started_ns=pending.started_ns,
                        folders=inputs.folders, samples=inputs.samples, used=inputs.used,
                        files=inputs.files,
                        extra={"metric_order": metric_order(record.task, record.params),
                               "json": as_json, "origin": result.origin,
                               "recorded": result.recorded})


def watch(store, pending: Pending | None) -> None:
    """Have ``store`` log its lookups when this command line's answer may be recorded."""
    if pending is not None:
        store.watch_reads()
