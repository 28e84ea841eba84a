"""The answer cache: an answer given again, at interpreter speed, while nothing it read changed.

A caller (the ``get result`` command) that answered from the store records, under a key of its
own making (its command line, working directory, interpreter...), everything the answer
depended on:

* the state (device, inode, size, mtime, ctime) of every module file the process loaded and of
  the interpreter (an edited or reinstalled module misses), and of any file it names (a
  checkpoint given as ``--weights``);
* the state of every file and folder under each data folder it read (a folder's mtime changes
  when an entry is added, removed or renamed in it, so an unchanged tree lists the same), the
  folder statted through the path given (a link pointed elsewhere changes its state);
* every ``derivations`` and ``aliases`` row the store looked up meanwhile (:meth:`Answers.watch`),
  with the id each gave.

:func:`lookup` -- which imports nothing beyond the standard library and blake3, and opens the
registry read-only -- re-stats those paths, re-reads those rows, reads the result blob, checks
its BLAKE3 hash and reads its newest run row. Any difference, missing row or unreadable file is
a miss: the caller computes its answer the full way, so the cache can only answer what that
would answer. The newest run row is read at lookup, so a later ``--recompute`` shows.

Nothing is recorded when a state is racy (changed in the last ``RACY_SECONDS`` before the
caller started), for a read-only store, when a row changed while the caller ran, for a data
folder holding many more files than the answer reads (statting them all would cost more than
the full command: a marker remembers that until the folder's own listing changes), nor when
recording fails (it never fails the caller). The tables (migration 4) belong to the registry;
gc empties them (:meth:`Answers.clear`), since every answer is re-checked anyway
and the next full answer records it again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from array import array

import blake3

from ._layout import RACY_SECONDS, REGISTRY_VERSION, object_path

TYPE_CHECKING = False  # typing costs a cached answer ~10 ms to import
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from ._base import StoreBase

VERSION = 2  # of the key and of the recorded document (2: answers carry their run row)
RACY_NS = int(RACY_SECONDS * 1e9)
WRITE_WAIT_MS = 200  # how long recording waits for another writer before giving up
# The most names a data folder may hold for its answer to be cached: a stat costs ~2.5 us, and
# the full command ~70 ms of imports and planning plus ~10 us per sample (an image and its
# target listed and stat'ed), so statting more than this would cost about as much
PER_SAMPLE, SPARE = 4, 20_000


class Answer:
    """What :func:`lookup` found: the result's id, its document, its newest run row (as
    ``RunInfo.as_dict`` gives it, or None) and what the caller recorded beside it."""

    __slots__ = ("doc", "extra", "oid", "run")

    def __init__(self, oid: str, doc: dict[str, Any], run: dict[str, Any] | None,
                 extra: dict[str, Any]) -> None:
        self.oid, self.doc, self.run, self.extra = oid, doc, run, extra


def answer_key(words: list[Any]) -> str:
    """The key of an answer to ``words`` (JSON values): everything that changes their meaning."""
    return blake3.blake3(json.dumps([VERSION, *words]).encode()).hexdigest()


def states(base: str, names: Iterable[str],
           known: Mapping[str, tuple[int, ...]] | None = None) -> tuple[str, int] | None:
    """The digest of the (dev, inode, size, mtime, ctime) of ``base + name`` for each name, and
    the newest mtime or ctime among them; None when one is missing or unreadable.

    Args:
        known: the states of some of the names as the caller statted them already (while it
            listed the data): taken as they are, the rest statted now.
    """
    out = array("q")
    add, stat = out.extend, os.stat
    try:
        for name in names:
            state = known.get(name) if known else None
            if state is None:
                st = stat(base + name)
                state = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            add(state)
    except (OSError, OverflowError):  # gone, or an inode past 2**63 (some network filesystems)
        return None
    newest = max(max(out[3::5], default=0), max(out[4::5], default=0))
    return blake3.blake3(out.tobytes()).hexdigest(), newest


# ---- answering ---------------------------------------------------------------------------


def lookup(root: str, key: str) -> Answer | None:
    """The answer recorded under ``key`` in the store ``root``, if every check passes.

    Raises:
        OSError, sqlite3.Error, ValueError, KeyError, TypeError, IndexError: a registry being
            created or migrated, a blob being replaced...: the caller answers the full way.
    """
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
        if "skip" in deps or not _unchanged(conn, deps):
            return None
        oid = {k: v for t, k, v in deps["reads"] if t == "derivations"}[deps["result"]]
        if not isinstance(oid, str) or len(oid) != 64:
            return None
        run = conn.execute("SELECT recorded, host, device, seconds, timings, features_from_cache "
                           "FROM runs WHERE object = ? ORDER BY recorded DESC LIMIT 1",
                           (bytes.fromhex(oid),)).fetchone()
    finally:
        conn.close()
    with open(object_path(root, oid), "rb") as f:
        data = f.read()
    if blake3.blake3(data).hexdigest() != oid:
        return None  # damaged: the full command moves it aside and recomputes
    return Answer(oid, json.loads(data), None if run is None else _run_dict(run), deps["extra"])


def _unchanged(conn: sqlite3.Connection, deps: dict[str, Any]) -> bool:
    """Whether the code, the data and the registry rows ``deps`` names are as recorded."""
    found = states("", deps["modules"])
    if found is None or found[0] != deps["modules_digest"]:
        return False
    for tree_id, digest in deps["trees"]:
        tree = conn.execute("SELECT root, names FROM answer_trees WHERE id = ?",
                            (tree_id,)).fetchone()
        if tree is None:
            return False
        found = states(tree[0] + os.sep, tree[1].split("\0"))
        if found is None or found[0] != digest:
            return False
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
            return False
    return True


def _run_dict(row: tuple) -> dict[str, Any]:
    """``RunInfo.from_row(row).as_dict()`` without importing the dataclass machinery."""
    recorded, host, device, seconds, timings, from_cache = row
    out = {"recorded": recorded, "host": host, "timings": json.loads(timings)}
    for name, value in (("device", device), ("seconds", seconds),
                        ("features_from_cache", None if from_cache is None else bool(from_cache))):
        if value is not None:
            out[name] = value
    return out


# ---- recording ---------------------------------------------------------------------------


class Answers:
    """The answer cache of one store: ``store.answers``."""

    def __init__(self, store: StoreBase) -> None:
        self.store = store

    def watch(self) -> None:
        """Log every derivation and alias lookup from now on, for :meth:`record` (not on
        a read-only store, which records nothing)."""
        if not self.store.read_only:
            self.store.reads = []

    def record(self, key: str, result: str, *, started_ns: int,
               folders: Mapping[str, Mapping[str, tuple[int, ...]]], samples: int,
               used: Iterable[str] = (), files: Iterable[str] = (),
               wrote: Iterable[str] = (), modules: Iterable[str] | None = None,
               extra: Mapping[str, Any] | None = None) -> bool:
        """Record that ``key`` is answered by the result ``result``, found through the lookups
        logged since :meth:`watch`; return whether it was recorded.

        Args:
            started_ns: When the caller began (``time.time_ns()``): a state newer than
                ``RACY_SECONDS`` before it is racy, and nothing is recorded.
            folders: Each data folder the answer read (absolute, as the caller was given it)
                with the states its listing took already, by name under it.
            samples: How many samples the answer read (what statting its folders may cost).
            used: Ids the caller resolved: a lookup that found no row, then wrote one giving
                one of these, is recorded with the id written.
            files: Other files the answer read (statted through any link).
            wrote: Derivation keys the caller computed and recorded itself (its answer was
                computed just now): their rows are taken as they stand, as the same question
                asked again would find them.
            modules: The names of the modules whose files the answer depends on (default:
                every module loaded); the interpreter's own file is always among them.
            extra: JSON the caller wants back from :func:`lookup` (how to print the answer).

        Nothing here raises: an answer that cannot be recorded (a name that is not UTF-8, a
        folder gone meanwhile, a registry another process is writing, a full disk) is not.
        """
        reads, self.store.reads = self.store.reads, None
        if reads is None or self.store.read_only:
            return False
        from ..errors import VbstoreError  # loaded by any caller that computed an answer

        conn = self.store.db.conn
        waits = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.execute(f"PRAGMA busy_timeout={WRITE_WAIT_MS}")
        try:
            return self._record(key, result, reads, started_ns, folders, samples,
                                set(used), set(files), set(wrote), modules,
                                dict(extra or {}))
        except (OSError, sqlite3.Error, ValueError, VbstoreError):
            if os.environ.get("VBSTORE_DEBUG"):
                raise
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout={waits}")

    def _record(self, key, result, reads, started_ns, folders, samples, used, files,
                wrote, modules, extra) -> bool:
        if self.skipped(key):
            return False
        seen: dict[tuple[str, str], str | None] = {}
        for table, name, value in reads:
            if table == "derivations" and name in wrote:
                continue  # the caller's own rows: read below as they stand
            if seen.setdefault((table, name), value) != value:
                return False  # a row that changed while the caller ran
        for name in sorted(wrote):
            row = self.store.db.one("SELECT output FROM derivations WHERE key = ?", (name,))
            if row is None:
                return False  # written, then gone (a gc meanwhile)
            seen[("derivations", name)] = row[0]
        for (table, name), value in seen.items():
            if value is None:  # a row the caller wrote after finding none (a manifest it built)
                column, where = ("output", "key") if table == "derivations" else ("id", "spec")
                row = self.store.db.one(f"SELECT {column} FROM {table} WHERE {where} = ?", (name,))  # noqa: S608 - names from the line above
                if row is not None and row[0] in used:
                    seen[(table, name)] = row[0]
        result_key = next((k for (t, k), v in seen.items() if t == "derivations" and v == result),
                          None)
        if result_key is None:
            return False
        trees = self._trees(key, folders, PER_SAMPLE * samples + SPARE, started_ns)
        if trees is None:
            return False
        # every module file the caller ran (its sys.path is in the key: it decides which load);
        # a relative __file__ names no file (torch's _classes.py and _ops.py namespaces)
        loaded = sys.modules.copy()
        named = loaded.values() if modules is None else (loaded.get(m) for m in modules)
        paths = sorted(files | {f for f in (
            *(getattr(m, "__file__", None) for m in named), sys.executable)
            if isinstance(f, str) and os.path.isabs(f)})
        found = states("", paths)
        if found is None or found[1] >= started_ns - RACY_NS:
            return False
        deps = {"modules": paths, "modules_digest": found[0],
                "trees": [[tree_id, digest] for tree_id, _, _, digest in trees],
                "reads": [[t, k, v] for (t, k), v in sorted(seen.items())],
                "result": result_key, "extra": extra}
        self._write(key, deps, trees)
        return True

    def _trees(self, key: str, folders: Mapping[str, Mapping[str, tuple[int, ...]]], budget: int,
               started_ns: int) -> list[tuple[str, str, str, str]] | None:
        """``(tree id, root, listing, states digest)`` of each folder; None when one cannot be
        (and, for a folder past ``budget`` names, a marker that says so)."""
        out = []
        for root, known in sorted(folders.items()):
            names = walk(root, budget)
            if names is None:
                self._write(key, {"skip": [[r, _folder_state(r)] for r in sorted(folders)]})
                return None
            found = states(root + os.sep, names, known)
            if found is None or found[1] >= started_ns - RACY_NS:
                return None
            listing = "\0".join(names)
            tree_id = blake3.blake3(f"{root}\0\0{listing}".encode()).hexdigest()
            out.append((tree_id, root, listing, found[0]))
        return out

    def _write(self, key: str, deps: dict[str, Any],
               trees: list[tuple[str, str, str, str]] | None = None) -> None:
        """Store ``key``'s row and the listings it names, in one transaction."""
        with self.store.db.write() as conn:
            added = sum(conn.execute("INSERT OR IGNORE INTO answer_trees(id, root, names) "
                                     "VALUES (?,?,?)", tree[:3]).rowcount for tree in trees or ())
            conn.execute("INSERT OR REPLACE INTO answers(key, deps, created) VALUES (?,?,?)",
                         (key, json.dumps(deps), time.time()))
            if added:  # a listing changed: the one it replaced may be named by no answer now
                conn.execute("DELETE FROM answer_trees WHERE id NOT IN (SELECT json_extract("
                             "t.value, '$[0]') FROM answers, json_each(answers.deps, '$.trees') t)")

    def skipped(self, key: str) -> bool:
        """Whether a marker says ``key``'s data folder is too large to snapshot, and the
        folder's own listing has not changed since."""
        row = self.store.db.one("SELECT deps FROM answers WHERE key = ?", (key,))
        if row is None:
            return False
        marker = json.loads(row[0]).get("skip")
        try:
            return marker is not None and all(_folder_state(r) == s for r, s in marker)
        except OSError:
            return False

    def clear(self) -> None:
        """Forget every recorded answer (gc does, before it collects: an answer found through
        a row gc deletes would miss anyway, and the next full answer records it again)."""
        with self.store.db.write() as conn:
            conn.execute("DELETE FROM answers")
            conn.execute("DELETE FROM answer_trees")


def walk(root: str, budget: int) -> list[str] | None:
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
