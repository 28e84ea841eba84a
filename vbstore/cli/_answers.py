"""``get result`` asks the store's answer cache before click loads, and fills it after.

The cache itself -- what an answer depended on, how it is checked, its tables, gc -- is the
store's (:mod:`vbstore.store._answers`); what a plan's answer read is the engine's
(:func:`vbstore.engine.answer_inputs`). This module only makes the key of a command line
(its words from ``get`` on, with the store it names, the working directory, interpreter,
``sys.path`` and home folder that change what they mean), prints a found answer with the
command's own printer (:func:`._resulttext.result_lines`), and, after the full command
answered (from the store, or computed and stored just now), asks the store to record it.
``main`` calls :func:`answer` before importing click; the command gets the :class:`Pending` key
through click's context object.

Every spelling of one question has one key: the root group's options (``--quiet``/``-q``
anywhere, ``--store DIR``/``--store=DIR`` or ``VBSTORE_HOME``) are resolved into the store's
folder, and ``--json`` (where it cannot be an option's value: after ``result`` or after a
value) only chooses how the answer prints. So the first repeat of any spelling after a
computation is answered here.

Nothing is recorded for a read-only store, for ``--head``, ``--suite``, ``--recompute`` or
``--dry-run`` (the command does not ask), or when the printed answer is not what the stored
document would print; a command line with ``--notes`` or ``--results`` is never answered here
(the full command attaches the notes in the registry, appends the record to the file); nor
one with ``--save-clf`` (the full command writes the classifier file).
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
_WRITES = ("--notes", "--results", "--save-clf", "--save_clf")


class Pending:
    """A command line the cache could not answer: its key, when it started (a state newer
    than that is racy) and whether its ``--json`` was left out of the key (then the recorded
    answer says nothing of how to print it: the words do)."""

    __slots__ = ("json_flag", "key", "loaded", "started_ns")

    def __init__(self, key: str, started_ns: int, json_flag: bool = False) -> None:
        self.key, self.started_ns, self.json_flag = key, started_ns, json_flag
        self.loaded: frozenset[str] | None = None  # the modules loaded before planning


def answer_key(root: str, words: list[str]) -> str:
    """The key of ``get result`` words asked of the store ``root``: the words and everything
    that changes their meaning."""
    return cache.answer_key([__version__, sys.executable, sys.version, sys.path, os.getcwd(),
                             root, os.path.expanduser("~"), words])


def command_words(args: list[str]) -> tuple[str, list[str], bool] | None:
    """The store a ``[--store DIR] get result ...`` command line asks (absolute), its words from
    ``get`` on without ``--quiet``/``-q`` (anywhere) and the ``--json`` flags, and whether it
    had one; None when it is not such a command line (another command, or a root option the
    cache does not know).

    A ``--json`` right after an option name (``--split --json``) may be that option's value:
    it stays in the words, and the recorded answer says how that command line printed.
    """
    # --quiet/-q anywhere before `--` is the root's flag (``_root.LazyGroup.parse_args``), and
    # only turns progress off: a cached answer shows none
    end = args.index("--") if "--" in args else len(args)
    args = [*(a for a in args[:end] if a not in ("-q", "--quiet")), *args[end:]]
    store, at = None, 0
    while at < len(args) and args[at] != "get":
        word = args[at]
        if word == "--store" and at + 1 < len(args):
            store, at = args[at + 1], at + 2
        elif word.startswith("--store="):
            store, at = word[len("--store="):], at + 1
        else:
            return None
    if args[at:at + 2] != ["get", "result"] or store == "":
        return None
    root = os.path.abspath(default_home() if store is None else os.path.expanduser(store))
    words, as_json = args[at:at + 2], False
    for word in args[at + 2:]:
        if word == "--json" and not words[-1].startswith("-"):
            as_json = True
        else:
            words.append(word)
    return root, words, as_json


def answer(args: list[str]) -> Pending | bool:
    """Print the stored answer of ``vbstore ARGS`` if the store's cache holds a valid one.

    Returns:
        True when it printed the answer; else the :class:`Pending` key the full command records
        its answer under, or False when this command line is not one the cache answers.
    """
    started, started_ns = time.perf_counter(), time.time_ns()
    command = command_words(args)
    if command is None or any(a in _WRITES or a.startswith(tuple(f"{w}=" for w in _WRITES))
                              for a in args):
        return False  # notes go to the registry, --results and --save-clf to a file: the full
        # command writes
    root, words, json_flag = command
    try:
        pending = Pending(answer_key(root, words), started_ns, json_flag)  # OSError: cwd gone
        found = cache.lookup(root, pending.key)
    except (OSError, sqlite3.Error, ValueError, KeyError, TypeError, IndexError):
        # a registry being created or migrated, a blob being replaced...: the full command
        # answers, and reports what is wrong if anything is
        if os.environ.get("VBSTORE_DEBUG"):
            raise
        return False
    if found is None:
        return pending
    # a `--json` left in the words prints as the command line that recorded them printed
    as_json = True if json_flag else found.extra.get("json") if "--json" in words else False
    if as_json is None:  # ...which had a `--json` of its own besides: it cannot say
        return pending
    seconds = time.perf_counter() - started
    if as_json:
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
    when it qualifies (the store watched its lookups since :func:`watch`).

    A result computed just now is recorded as the store now answers it (what the same command
    line run again would print), with the derivation rows the computation wrote as they stand.
    """
    if pending is None or result.source not in ("store", "computed"):
        return
    from ..engine import answer_inputs, stored_result  # loaded by the command already
    from ..tasks import metric_order  # loaded by the command already

    wrote: tuple[str, ...] = ()
    modules = None  # every module loaded: all the store's answer ran
    if result.source == "computed":
        if pending.loaded is None:
            return
        wrote = result.computed  # the derivation keys this run wrote
        result = stored_result(the_plan)
        if result is None:
            return
        modules = answer_modules(pending.loaded)
    # the answer must print as the stored document does (fields the record type would drop),
    # in the same --json object as the command's
    run = result.run.as_dict() if result.run is not None else None
    inputs = answer_inputs(the_plan)
    if inputs is None or result.as_dict() != stored_answer(
            result.id, store.read_json(result.id), run, result.seconds, result.recorded):
        return
    record = result.record
    store.answers.record(pending.key, result.id, started_ns=pending.started_ns,
                         folders=inputs.folders, samples=inputs.samples, used=inputs.used,
                         files=inputs.files, wrote=wrote, modules=modules,
                         extra={"metric_order": metric_order(record.task, record.params),
                                "json": None if pending.json_flag else as_json,
                                "origin": result.origin, "recorded": result.recorded})


def watch(store, pending: Pending | None) -> None:
    """Have ``store`` log its lookups when this command line's answer may be recorded, and
    note the modules loaded before planning (see :func:`answer_modules`)."""
    if pending is not None:
        store.answers.watch()
        pending.loaded = frozenset(sys.modules)


def answer_modules(loaded: frozenset[str]) -> set[str]:
    """The modules whose code an answer computed in this process depends on: those ``loaded``
    before planning, vbstore's own, and the standard library's and those packages' submodules.

    Left out are the other libraries first loaded since, by building a backbone or computing
    (torch alone is ~1,500 files, each statted at every later answer): the store's answer never
    loads them (``tests/engine/test_results.py``'s ``UNREAD``), and
    ``tests/cli/test_answers.py`` checks that a store answer's modules are among these.
    """
    tops = {m.partition(".")[0] for m in loaded} | set(sys.stdlib_module_names) | {"vbstore"}
    return {m for m in list(sys.modules) if m.partition(".")[0] in tops}
