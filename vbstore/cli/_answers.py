"""The answer cache: a ``get result`` answered before is printed again at interpreter speed.

A cached ``get result`` still costs the import of click, the engine and the data readers, a
listing of every data folder and a plan. When the full command answers from the store, it
records, under a key made of its exact command line (with the working directory, the
interpreter and ``sys.path``), everything the answer depended on:

* the state (device, inode, size, mtime, ctime) of every module file it loaded, of the
  interpreter (so an edited or reinstalled module misses), and of a checkpoint given as
  ``--weights`` (its hash is in the backbone's alias key);
* the state of every file and folder under each data folder it read (a folder's mtime changes
  when an entry is added, removed or renamed in it, so an unchanged tree lists the same), the
  folder statted through the path given (a link pointed elsewhere changes its state);
* every registry row it looked up (derivations and aliases), with the id each gave.

The next run of the same command line (``main`` asks before importing click) re-stats those
paths, re-reads those rows, reads the result blob and checks its BLAKE3 hash, then prints it
through the same function the command uses (:func:`._resulttext.result_lines`). Any
difference, missing row or unreadable file is a miss, and the full command runs as before; so
the cache can only answer what the full command would answer.

Nothing is recorded when a state is racy (changed in the last 0.1 s before the command
started, so a second change could keep the timestamp), for a read-only store, for ``--head``,
``--suite``, ``--recompute`` or ``--dry-run``, for task parameters naming files, for data
that is a list file or a remote source or takes layout options naming files, for a data
folder holding many more files than the answer reads (statting them all would cost more than
the full command: a marker remembers that until the folder's own listing changes), and for
manifests naming files outside their folder, nor when recording fails (it never fails the
command). gc empties the cache.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from array import array

import blake3

from .. import __version__
from ._resulttext import result_lines

TYPE_CHECKING = False  # see vbstore/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

# Local imports: the engine's and data's names load in `record`, which runs after a full
# command has imported them anyway; the lookup imports nothing beyond the standard library.

VERSION = 1  # of the key and of the recorded document
REGISTRY_VERSION = 5  # the registry's newest migration (a test pins it)
RACY_NS = 100_000_000  # vbstore.store._filestate.RACY_SECONDS (a test pins it)
WRITE_WAIT_MS = 200  # how long recording waits for another writer before giving up
# The most names a data folder may hold for its answer to be cached: a stat costs ~2.5 us, and
# the full command ~70 ms of imports and planning plus ~10 us per sample (an image and its
# target listed and stat'ed), so statting more than this would cost about as much
_PER_SAMPLE, _SPARE = 4, 20_000
# the options a data reference may take and stay answerable: none of them names a file
_PLAIN_OPTIONS = frozenset({"layout", "target", "target_type"})

# the command line main asked about, and when (states newer than that are racy); None when
# main did not ask (the click group called directly, the Python API)
_key: str | None = None
_started = 0


def answer_key(args: list[str]) -> str:
    """The key of a command line: its words and everything that changes what they mean."""
    words = [VERSION, __version__, sys.executable, sys.version, sys.path, os.getcwd(),
             os.environ.get("VBSTORE_HOME"), os.path.expanduser("~"), args]
    return blake3.blake3(json.dumps(words).encode()).hexdigest()


def _store_root(args: list[str]) -> str | None:
    """The store a ``[--store DIR] get result ...`` command line names, else None."""
    at = args.index("get")
    if args[at + 1:at + 2] != ["result"]:
        return None
    head = args[:at]
    # the rule of vbstore.store._store.default_root, which imports what this module must not
    if not head:
        home = os.environ.get("VBSTORE_HOME")
        return os.path.expanduser(home) if home else os.path.expanduser("~/.cache/vbstore")
    if len(head) == 2 and head[0] == "--store":
        return os.path.expanduser(head[1])
    if len(head) == 1 and head[0].startswith("--store="):
        return os.path.expanduser(head[0][len("--store="):])
    return None


def states(base: str, names: list[str],
           known: dict[str, tuple[int, ...]] | None = None) -> tuple[str, int] | None:
    """The digest of the (dev, inode, size, mtime, ctime) of ``base + name`` for each name, and
    the newest mtime or ctime among them; None when one is missing or unreadable.

    Args:
        known: the states of some of the names as this process statted them already (while it
            listed the data): taken as they are, the rest statted now.
    """
    out = array("q")
    add, stat = out.extend, os.stat
    try:
        if known:
            for name in names:
                state = known.get(name)
                if state is None:
                    st = stat(base + name)
                    state = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                add(state)
        else:
            for name in names:
                st = stat(base + name)
                add((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    except (OSError, OverflowError):  # gone, or an inode past 2**63 (some network filesystems)
        return None
    newest = max(max(out[3::5], default=0), max(out[4::5], default=0))
    return blake3.blake3(out.tobytes()).hexdigest(), newest


# ---- answering ---------------------------------------------------------------------------


def answer(args: list[str]) -> bool:
    """Print the stored answer of ``vbstore ARGS`` if the cache holds a valid one.

    Returns:
        True when it printed the answer; False when the full command must run (it then
        records its answer under the key computed here).
    """
    global _key, _started
    started, _started = time.perf_counter(), time.time_ns()
    root = _store_root(args)
    if root is None:
        return False
    try:
        _key = answer_key(args)  # OSError: a working directory removed meanwhile
        found = _lookup(root, _key)
    except (OSError, sqlite3.Error, ValueError, KeyError, TypeError, IndexError):
        # a registry being created or migrated, a blob being replaced...: the full command
        # answers, and reports what is wrong if anything is
        if os.environ.get("VBSTORE_DEBUG"):
            raise
        return False
    if found is None:
        return False
    deps, oid, doc, run = found
    seconds = time.perf_counter() - started
    if deps["json"]:
        text = json.dumps(_stored_answer(oid, doc, run, seconds), indent=2, sort_keys=True,
                          default=str) + "\n"
        lines = [(False, text)]
    else:
        lines = [(err, line + "\n") for err, line in
                 result_lines(doc, oid, "cached in the store", seconds, deps["metric_order"])]
    if not _writable(lines):
        return False
    try:
        for err, line in lines:
            (sys.stderr if err else sys.stdout).write(line)
            if not err:
                sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`), as the full command handles it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return True


def _stored_answer(oid: str, doc: dict[str, Any], run: dict[str, Any] | None,
                   seconds: float) -> dict[str, Any]:
    """``--json``'s object for a stored result, as ``Result.as_dict`` gives it (``record``
    checks the two agree before it records an answer)."""
    out = {"id": oid, "from_cache": True, "source": "store", "seconds": round(seconds, 4),
           "record": doc}
    if run is not None:
        out["run"] = run
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


def _lookup(root: str, key: str) -> tuple[dict[str, Any], str, dict[str, Any],
                                         dict[str, Any] | None] | None:
    """The recorded dependencies, the result id and its document, if every check passes."""
    registry = os.path.join(root, "registry.db")
    if not os.path.isfile(registry):  # connecting would create it
        return None
    uri = registry.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    conn = sqlite3.connect(f"file:{uri}?mode=ro", uri=True, timeout=1.0)
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != REGISTRY_VERSION:
            return None  # an older store the full command migrates, or a newer one it refuses
        row = conn.execute("SELECT deps FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        deps = json.loads(row[0])
        if "skip" in deps:  # a folder too large to stat for this answer
            return None
        # the code, then the data: their states are what the answer was computed from
        found = states("", deps["modules"])
        if found is None or found[0] != deps["modules_digest"]:
            return None
        for tree_id, digest in deps["trees"]:
            tree = conn.execute("SELECT root, names FROM answer_trees WHERE id = ?",
                                (tree_id,)).fetchone()
            if tree is None:
                return None
            found = states(tree[0] + os.sep, tree[1].split("\0"))
            if found is None or found[0] != digest:
                return None
        # the registry rows the answer was found through, still as they were
        for table, column, value_column in (("derivations", "key", "output"),
                                            ("aliases", "spec", "id")):
            wanted = {k: v for t, k, v in deps["reads"] if t == table}
            if not wanted:
                continue
            marks = ",".join("?" * len(wanted))
            current = dict(conn.execute(
                f"SELECT {column}, {value_column} FROM {table} WHERE {column} IN ({marks})",  # noqa: S608 - names from the tuple above
                list(wanted)).fetchall())
            if any(current.get(k) != v for k, v in wanted.items()):
                return None
        oid = {k: v for t, k, v in deps["reads"] if t == "derivations"}[deps["result"]]
        if not isinstance(oid, str) or len(oid) != 64:
            return None
        row = conn.execute("SELECT recorded, host, device, seconds, timings, features_from_cache "
                           "FROM runs WHERE object = ? ORDER BY recorded DESC LIMIT 1",
                           (bytes.fromhex(oid),)).fetchone()
    finally:
        conn.close()
    run = None if row is None else _run_dict(row)
    # ObjectFiles.fspath's layout and Store.read_bytes' check, without importing the store
    with open(os.path.join(root, "objects", oid[:2], oid[2:]), "rb") as f:
        data = f.read()
    if blake3.blake3(data).hexdigest() != oid:
        return None  # damaged: the full command moves it aside and recomputes
    return deps, oid, json.loads(data), run


def _run_dict(row: tuple) -> dict[str, Any]:
    """``RunInfo.as_dict`` of a runs row, without importing the store."""
    recorded, host, device, seconds, timings, from_cache = row
    out = {"recorded": recorded, "host": host, "timings": json.loads(timings)}
    for name, value in (("device", device), ("seconds", seconds),
                        ("features_from_cache", None if from_cache is None else bool(from_cache))):
        if value is not None:
            out[name] = value
    return out


# ---- recording ---------------------------------------------------------------------------


def forget() -> None:
    """End this command line (main calls it as the command returns)."""
    global _key
    _key = None


def recording(store) -> None:
    """Make ``store`` log its lookups when this command line's answer may be recorded."""
    if _key is not None and not store.read_only:
        store.reads = []


def record(store, the_plan, result, as_json: bool) -> None:
    """Record what the answer ``result`` of ``the_plan`` depended on, when it qualifies.

    The answer is printed already, so nothing here may fail the command or keep it waiting: a
    name that is not UTF-8, a folder gone meanwhile, a registry another process is writing
    (waited for briefly) or a full disk leave this answer unrecorded.
    """
    from ..errors import VbstoreError  # loaded by the command already

    reads, store.reads = store.reads, None
    if reads is None:
        return
    conn = store.db.conn
    waits = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute(f"PRAGMA busy_timeout={WRITE_WAIT_MS}")
    try:
        _record(store, the_plan, result, as_json, reads)
    except (OSError, sqlite3.Error, ValueError, VbstoreError):
        if os.environ.get("VBSTORE_DEBUG"):
            raise
    finally:
        conn.execute(f"PRAGMA busy_timeout={waits}")


def _record(store, the_plan, result, as_json: bool, reads) -> None:
    if result.source != "store" or skipped(store):
        return
    seen: dict[tuple[str, str], str | None] = {}
    for table, key, value in reads:
        if seen.setdefault((table, key), value) != value:
            return  # a row that changed while the command ran
    # a row this command wrote after finding none (a manifest or backbone it had to build):
    # the next run reads the id it wrote, which this answer used
    used = {m.id for m in (the_plan.ref, the_plan.eval_m, the_plan.train_m) if m is not None}
    for (table, key), value in seen.items():
        if value is None:
            column, where = ("output", "key") if table == "derivations" else ("id", "spec")
            row = store.db.one(f"SELECT {column} FROM {table} WHERE {where} = ?", (key,))  # noqa: S608 - names from the line above
            if row is not None and row[0] in used:
                seen[(table, key)] = row[0]
    request = the_plan.request
    if request.probe.head is not None or the_plan.task_params != request.probe.resolved_params():
        return  # a given head is a ref that can move; a file parameter is read from a file
    # the answer must print as the stored document does (fields the record type would drop),
    # in the same --json object as the command's
    doc = store.read_json(result.id)
    run = result.run.as_dict() if result.run is not None else None
    if result.as_dict() != _stored_answer(result.id, doc, run, result.seconds):
        return
    roots = _data_roots(store, the_plan)
    if roots is None:
        return
    samples = sum(len(m) for m in (the_plan.eval_m, the_plan.train_m) if m is not None)
    trees = _trees(store, roots, budget=_PER_SAMPLE * samples + _SPARE)
    if trees is None:
        return
    from ..tasks import metric_order  # loaded by the command already

    # every module file the answer ran (sys.path is in the key: it decides which files load),
    # and a checkpoint the backbone's alias key hashed (statted through any link, as it is read)
    alias = the_plan.ref.alias if the_plan.ref is not None else None
    files = ({os.path.join(os.getcwd(), os.path.expanduser(request.backbone.weights))}
             if alias is not None and alias["params"].get("checkpoint") else set())
    modules = sorted(files | {os.path.abspath(f) for f in (
        *(getattr(m, "__file__", None) for m in list(sys.modules.values())), sys.executable)
        if f})
    found = states("", modules)
    if found is None or found[1] >= _started - RACY_NS:
        return
    result_key = next(k for (t, k), v in seen.items() if t == "derivations" and v == result.id)
    deps = {"modules": modules, "modules_digest": found[0],
            "trees": [[tree_id, digest] for tree_id, _, _, digest in trees],
            "reads": [[t, k, v] for (t, k), v in sorted(seen.items())], "result": result_key,
            "metric_order": metric_order(result.record.task), "json": as_json}
    _write(store, deps, trees)


def _data_roots(store, the_plan) -> dict[str, list[Any]] | None:
    """The folders every file of the plan's data lies in, each with the views of the plan whose
    files lie in it; None when that cannot be said."""
    from ..data import local_folder  # loaded by the command already

    roots: dict[str, list[Any]] = {}
    for ref, view in ((the_plan.request.data, the_plan.eval_m),
                      (the_plan.request.train, the_plan.train_m)):
        if ref is None or view is None:
            continue
        if {k for k, v in ref.options.items() if v not in (None, False)} - _PLAIN_OPTIONS:
            return None
        folder = local_folder(store, ref.source)
        if folder is None:
            return None
        # the names as listed (or, for a view not listed here, as the manifest holds them)
        names = view.files[0] if view.files is not None else (
            n for s in view.samples for n in (s["name"], s.get("target_name")) if n)
        listing = "\0".join(names)
        if ".." in listing and any(".." in name.split("/") for name in listing.split("\0")):
            return None  # a table naming files beside its folder (pairs.csv can)
        # a folder given through a link is statted through it, as the full command resolves it
        # afresh each time: the link pointed elsewhere changes the root's own state
        given = os.path.join(os.getcwd(), os.path.expanduser(ref.source))  # `link/..` kept
        roots.setdefault(given if os.path.realpath(given) == str(folder) else str(folder),
                         []).append(view)
    return dict(sorted(roots.items()))


def _trees(store, roots: dict[str, list[Any]],
           budget: int) -> list[tuple[str, str, str, str]] | None:
    """``(tree id, root, listing, states digest)`` of each root; None when one cannot be."""
    out = []
    for root, views in roots.items():
        names = _walk(root, budget)
        if names is None:
            _write(store, {"skip": [[root, _folder_state(root)] for root in roots]})
            return None
        found = states(root + os.sep, names, _listed(root, views))
        if found is None or found[1] >= _started - RACY_NS:
            return None
        listing = "\0".join(names)
        tree_id = blake3.blake3(f"{root}\0\0{listing}".encode()).hexdigest()
        out.append((tree_id, root, listing, found[0]))
    return out


def _listed(root: str, views: list[Any]) -> dict[str, tuple[int, ...]]:
    """The states the views' listings took of their files, by name under ``root`` (a view's
    folder is ``root`` or a folder in it: a split's)."""
    top = os.path.realpath(root)
    known: dict[str, tuple[int, ...]] = {}
    for view in views:
        if view.files is None:
            continue
        base = str(view.root)
        if base == top:
            prefix = ""
        elif base.startswith(top + os.sep):
            prefix = base[len(top) + 1:] + "/"
        else:
            continue
        names, numbers = view.files
        fives = zip(*[iter(numbers)] * 5, strict=True)
        known.update(zip([prefix + n for n in names], fives, strict=True))
    return known


def _walk(root: str, budget: int) -> list[str] | None:
    """Every name under ``root`` (hidden ones too, folder links followed), ``""`` for the root
    itself; None past ``budget`` names or on a folder reached twice (a link loop)."""
    names, stack, seen = [""], [""], set()
    while stack:
        rel = stack.pop()
        folder = os.path.join(root, rel) if rel else root
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen:
            return None
        seen.add((st.st_dev, st.st_ino))
        prefix = f"{rel}/" if rel else ""
        with os.scandir(folder) as it:
            for entry in it:
                names.append(prefix + entry.name)
                if entry.is_dir():
                    stack.append(prefix + entry.name)
        if len(names) > budget:
            return None
    return names


def _folder_state(folder: str) -> list[int]:
    st = os.stat(folder)
    return [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _write(store, deps: dict[str, Any], trees: Sequence[tuple[str, str, str, str]] = ()) -> None:
    """Store this command line's row and the listings it names, in one transaction."""
    assert _key is not None  # recording() enabled the log only then
    with store.db.write() as conn:
        added = sum(conn.execute("INSERT OR IGNORE INTO answer_trees(id, root, names) "
                                 "VALUES (?,?,?)", tree[:3]).rowcount for tree in trees)
        conn.execute("INSERT OR REPLACE INTO answers(key, deps, created) VALUES (?,?,?)",
                     (_key, json.dumps(deps), time.time()))
        if added:  # a listing changed: the one it replaced may be named by no answer now
            conn.execute("DELETE FROM answer_trees WHERE id NOT IN (SELECT json_extract("
                         "t.value, '$[0]') FROM answers, json_each(answers.deps, '$.trees') t)")


def skipped(store) -> bool:
    """Whether a marker says this command line's data folder is too large to snapshot, and the
    folder's own listing has not changed since."""
    if _key is None:
        return False
    row = store.db.one("SELECT deps FROM answers WHERE key = ?", (_key,))
    if row is None:
        return False
    marker = json.loads(row[0]).get("skip")
    try:
        return marker is not None and all(_folder_state(r) == s for r, s in marker)
    except OSError:
        return False
