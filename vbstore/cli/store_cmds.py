"""Commands on the store itself: init, put, cat, show, ls, tag, why, du, gc, fsck."""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

import click

from .. import store as store_ops  # gc, fsck...: functions of a store, named as the commands
from ..engine import lineage, result_columns, summary, weights_of_tensor_hash
from ..errors import ObjectNotFound, VbstoreError
from ..records import ResultRecord
from ..store import KINDS, encoding, read_safetensors_header, sniff_kind
from ._common import emit, human_size, json_option, parse_duration, parse_size, with_store
from ._dataopts import data_layout_options
from ._lineage import render_lineage, run_line
from ._showdata import data_view_options, looks_like_data, show_data_cmd

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


def _lost_how(kind: str) -> str:
    """How an evicted object of ``kind`` comes back."""
    return _COMES_BACK.get(kind, "recomputable: the command that made it makes it again")


# what a user hands the store (put, suite push, result import): nothing here remakes it alone
_COMES_BACK = {
    **dict.fromkeys(("blob", "tensors", "suite"),
                    "not recomputable: put, push or pull it again"),
    "evaluation": "get result --suite makes it again from its result; an imported one: import "
                  "it again",
}


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "-"


@click.command()
@json_option
@with_store
def init(store, as_json: bool) -> None:
    """Create the store (if needed) and print where it is."""
    _ = store.db  # opening the registry creates it and applies migrations
    emit(as_json, {"store": str(store.root)}, f"store ready at {store.root}")


@click.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--kind", type=click.Choice(KINDS), default=None,
              help="Artifact kind; default: read from a JSON 'kind' field or safetensors "
                   "metadata, else blob.")
@json_option
@with_store
def put(store, path: str, kind: str | None, as_json: bool) -> None:
    """Add a file (or - for stdin) to the store and print its id."""
    data = sys.stdin.buffer.read() if path == "-" else None
    if kind is None:
        if data is None:
            kind = sniff_kind(path)
        else:
            kind = "blob"
    if data is not None:
        if encoding(kind) == "raw":
            oid = store.put_bytes(data, kind)
        else:
            oid = store.put_parsed(data, kind)
    else:
        oid = store.put_file(path, kind)
    emit(as_json, {"id": oid, "kind": kind}, oid)


@click.command()
@click.argument("ref")
@with_store
def cat(store, ref: str) -> None:
    """Write an object's raw bytes to stdout (verified first)."""
    sys.stdout.buffer.write(store.read_bytes(store.resolve(ref), verify=True))


@click.command()
@click.argument("ref")
@data_view_options
@data_layout_options
@json_option
@with_store
def show(store, ref: str, as_json: bool, task: str | None, data_options: dict[str, Any],
         **view: Any) -> None:
    """Show an object's registry row, content summary and direct inputs; with --task, draw REF
    as data.

    REF may also be a weights' tensor hash (what a head mismatch prints): its weights are shown.
    `vbstore show DATA --task T` is VisBench's `show`: the first --frames samples of DATA, each
    image beside its target as task T reads it (a class map, a depth map, normals, boxes, or
    the label), written to a PNG before anything is trained (needs the plot extra).
    """
    if task is not None:
        show_data_cmd(store, ref, task, view, data_options, as_json)
        return
    note = None
    try:
        oid = store.resolve(ref)
    except ObjectNotFound as exc:
        found = weights_of_tensor_hash(store, ref)
        if len(found) != 1 and looks_like_data(ref):
            exc.hint = "to draw it as data, name the task that reads it: --task T"
        if len(found) != 1:
            raise
        oid = found[0]
        note = (f"{ref} is the tensor hash of weights {oid[:12]} (the hash of their tensors' "
                "content, not an object id); showing those weights")
    info = store.info(oid).as_dict()
    data: dict[str, Any] = {**info, "present": store.has(oid),
                            "refs": [n for n, i in store.refs().items() if i == oid],
                            "inputs": [{"role": r, "id": c} for r, c in store.children(oid)],
                            "used_by": [{"role": r, "id": p} for r, p in store.parents(oid)]}
    runs = store.runs.of(oid)
    if runs:  # when, where and how long it was computed: the run log, not the content
        data["runs"] = [run.as_dict() for run in runs]
    notes = store.notes.of(oid)
    if notes:  # what a user attached to it (--notes): the registry's, not the content
        data["notes"] = notes
    if data["present"]:
        if encoding(info["kind"]) == "json":
            data["content"] = store.read_json(oid)
        elif encoding(info["kind"]) == "safetensors":
            header, _ = read_safetensors_header(store.path(oid))
            data["metadata"] = header.pop("__metadata__", {})
            data["tensors"] = {k: {"dtype": v["dtype"], "shape": v["shape"]}
                               for k, v in header.items()}

    if note is not None:
        data["note"] = note

    def text() -> None:
        if note is not None:
            click.echo(note, err=True)
        click.echo(f"{oid}  {info['kind']}  {human_size(info['size'])}")
        click.echo(f"created {_when(info['created'])}  last used {_when(info['last_used'])}"
                   f"  verified {_when(info['verified_at'])}"
                   + (f"  EVICTED ({_lost_how(info['kind'])})" if info["evicted_at"] else ""))
        if not data["present"] and not info["evicted_at"]:
            click.echo("MISSING  its blob is gone from objects/: `vbstore fsck --repair` "
                       "re-fetches it from a remote, or forgets it so the next get recomputes it")
        for name in data["refs"]:
            click.echo(f"ref: {name}")
        for run in runs:
            click.echo(f"computed {run_line(run)}")
        for text_ in notes:
            click.echo(f"notes: {text_}")
        for edge in data["inputs"]:
            click.echo(f"input {edge['role']}: {edge['id'][:12]}")
        if "content" in data:
            click.echo(json.dumps(data["content"], indent=2, sort_keys=True)[:20000])
        if "tensors" in data:
            click.echo(json.dumps({"metadata": data["metadata"], "tensors": data["tensors"]},
                                  indent=2))

    emit(as_json, data, text)


_PLURALS = {f"{k}s": k for k in KINDS if not k.endswith("s")}


@click.command(name="ls")
@click.argument("kind", required=False, type=click.Choice([*KINDS, *_PLURALS]))
@json_option
@with_store
def ls_cmd(store, kind: str | None, as_json: bool) -> None:
    """List objects, optionally of one KIND (singular or plural: result, results...)."""
    rows = store.ls(_PLURALS.get(kind, kind) if kind else None)
    refs: dict[str, list[str]] = {}
    for name, oid in store.refs().items():
        refs.setdefault(oid, []).append(name)

    def text() -> None:
        for row in rows:
            names = ",".join(refs.get(row.id, []))
            state = " (evicted)" if row.evicted_at else ""
            click.echo(f"{row.id[:12]}  {row.kind:<10} {human_size(row.size):>10}  "
                       f"{_when(row.created)}  {summary(store, row.id, row.kind)}{state}"
                       + (f"  [{names}]" if names else ""))

    def row_dict(row) -> dict[str, Any]:
        out = dict(row.as_dict(), refs=refs.get(row.id, []))
        if row.kind == "result" and store.has(row.id):  # what tells two results apart
            out.update(result_columns(store, ResultRecord.from_dict(store.read_json(row.id))))
        return out

    if as_json:
        emit(True, [row_dict(r) for r in rows])
        return
    emit(False, None, text)


@click.command()
@click.argument("name", required=False)
@click.argument("ref", required=False)
@click.option("-d", "--delete", is_flag=True, help="Remove the ref NAME.")
@json_option
@with_store
def tag(store, name: str | None, ref: str | None, delete: bool, as_json: bool) -> None:
    """Name an object (NAME REF), remove a name (-d NAME), or list names (no arguments).

    Named objects are gc roots: they and everything they were made from are kept.
    """
    if delete:
        if not name:
            raise click.UsageError("give the NAME to delete")
        store.untag(name)
        emit(as_json, {"deleted": name}, f"deleted {name}")
        return
    if name is not None and ref is not None:  # an empty one ("$UNSET") is refused, not a listing
        oid = store.resolve(ref)
        previous = store.refs().get(name)
        store.tag(name, oid)
        moved = f" (moved from {previous[:12]})" if previous not in (None, oid) else ""
        emit(as_json, {"name": name, "id": oid, "previous": previous},
             f"{name} -> {oid[:12]}{moved}")
        return
    if name is not None:
        raise click.UsageError("give both NAME and REF (an id, prefix or ref) to tag")
    refs = store.refs()

    def text() -> None:
        for n, i in refs.items():
            click.echo(f"{n}  {i[:12]}")

    emit(as_json, refs, text)


@click.command()
@click.argument("ref")
@click.option("--depth", type=int, default=None, help="Stop after this many levels.")
@json_option
@with_store
def why(store, ref: str, depth: int | None, as_json: bool) -> None:
    """Trace an object to everything it was made from (its lineage tree)."""
    tree = lineage(store, store.resolve(ref), depth)
    emit(as_json, tree, lambda: render_lineage(tree))


@click.command()
@json_option
@with_store
def du(store, as_json: bool) -> None:
    """Disk usage of the store, per kind."""
    usage = store_ops.du(store)

    def text() -> None:
        click.echo(f"store {usage['store']}")
        for kind, row in usage["kinds"].items():
            extra = f"  ({row['evicted']} evicted)" if row["evicted"] else ""
            click.echo(f"  {kind:<11} {row['count']:>7}  {human_size(row['bytes']):>10}{extra}")
        click.echo(f"  {'total':<11} {usage['objects']:>7}  {human_size(usage['bytes']):>10}"
                   f"  (+ registry {human_size(usage['registry_bytes'])})")

    emit(as_json, usage, text)


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would be removed, remove nothing.")
@click.option("--grace", default="1h", show_default=True,
              help="Keep anything used more recently than this (e.g. 0, 30m, 2d).")
@click.option("--max-size", default=None,
              help="Then evict least-recently-used recomputable artifacts (packs first) until "
                   "the store fits (e.g. 10G).")
@click.option("--summary", is_flag=True,
              help="With --json, counts and bytes per kind instead of one entry per removed "
                   "object (a gc of millions of objects).")
@json_option
@with_store
def gc(store, dry_run: bool, grace: str, max_size: str | None, summary: bool,
       as_json: bool) -> None:
    """Remove what no ref, result or suite needs; optionally shrink to a size."""
    report = store_ops.gc(store, grace=parse_duration(grace), dry_run=dry_run,
                          max_size=parse_size(max_size) if max_size else None)

    def text() -> None:
        done = ("would remove", "evict", "free") if dry_run else ("removed", "evicted", "freed")
        temps = len(report.temp_removed)
        # the partial writes of killed processes (tmp/), freed with the rest
        temps_text = f" and {temps} dead temp file{'s' * (temps != 1)}" if temps else ""
        click.echo(f"{done[0]} {report.removed_count} unreachable objects{temps_text}, {done[1]} "
                   f"{len(report.evicted)}, {done[2]} {human_size(report.freed_bytes)}; "
                   f"kept {report.kept}")
        for warning in report.warnings:
            click.echo(f"warning: {warning}", err=True)

    emit(as_json, report.as_dict(itemize=not summary) if as_json else None, text)


@click.command()
@click.argument("results", nargs=-1, required=True, metavar="RESULT...")
@click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")
@json_option
@with_store
def forget(store, results: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Remove results (ids or prefixes) from the store, so they stop being gc roots.

    What only they kept (their features, heads, manifests) is then unreachable, and the next
    `vbstore gc` removes it once it is older than the grace period (`--grace 0`: at once). A
    result that a ref names or an evaluation cites is refused, naming what keeps it; asking the
    same question again computes it again.
    """
    report = store_ops.forget(store, list(results), dry_run=dry_run)

    def text() -> None:
        verb = "would forget" if dry_run else "forgot"
        for item in report.forgotten:
            click.echo(f"{verb} result {item['id'][:12]}  {item['task']}")
        kinds: dict[str, int] = {}
        for item in report.released:
            kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
        held = ", ".join(f"{n} {kind}{'s' * (n != 1)}" for kind, n in sorted(kinds.items()))
        if held:
            click.echo(f"only {'they' if len(report.forgotten) > 1 else 'it'} kept {held} "
                       f"({human_size(report.released_bytes)}): "
                       + ("`vbstore gc` would then remove them once past its grace period"
                          if dry_run else "`vbstore gc` removes them once past its grace "
                          "period (--grace 0: now)"))
        else:
            click.echo("nothing else was kept by it alone")

    emit(as_json, report.as_dict(), text)


@click.command()
@click.option("--jobs", type=int, default=None, help="Hashing threads (default: one per core).")
@click.option("--repair", is_flag=True,
              help="Move damaged blobs aside so the next get recomputes them.")
@click.option("--rebuild", is_flag=True,
              help="Rebuild a damaged registry.db from the blobs (refs and cached derivations "
                   "are lost; the old file is kept aside), then check.")
@json_option
@with_store
def fsck(store, jobs: int | None, repair: bool, rebuild: bool, as_json: bool) -> None:
    """Re-hash every blob and check the registry; exit 1 on any fault."""
    rebuilt = store_ops.rebuild_registry(store, jobs=jobs) if rebuild else None
    if rebuilt is not None:
        # only a rebuild needs the suites package: ls, show and gc do not pay for its import
        from ..suites import reindex

        reindex(store)  # the suite and evaluation indexes are read from their blobs
    from ..records import StoreReader, answer_differences

    reader = StoreReader(store)

    def index(ids: list[str]) -> list[str]:
        from ..suites import index_stored  # see above

        return index_stored(store, ids)  # judged as a board pull judges them

    report = store_ops.fsck(store, jobs=jobs, repair=repair, refetch=_refetcher(store),
                            answers=lambda spec, output: answer_differences(spec, output, reader),
                            index=index)
    if repair and any(m["table"] == "evaluations" for m in report.mismatched):
        from ..suites import reindex  # see above

        reindex(store)  # the forgotten evaluation rows, indexed again from their blobs

    def text() -> None:
        if rebuilt is not None:
            kinds = ", ".join(f"{n} {k}" for k, n in rebuilt.kinds.items()) or "no objects"
            click.echo(f"rebuilt registry.db from the blobs: {kinds}; {rebuilt.edges} edges, "
                       f"{rebuilt.feature_rows} feature rows")
            if rebuilt.packs_not_indexed:
                click.echo(f"not indexed: {len(rebuilt.packs_not_indexed)} packs whose rows no "
                           "featureset vouches for (extracted again when needed)")
            click.echo(f"not recoverable: {', '.join(rebuilt.lost)} (tag again what you named; "
                       "the next get recomputes or re-finds what it needs)")
            for path in rebuilt.kept_aside:
                click.echo(f"kept aside {path}")
        click.echo(f"checked {report.checked} blobs ({human_size(report.bytes)}) "
                   f"in {report.seconds:.2f} s")
        if report.unrecorded:
            click.echo("the disk is full: the check is complete, but verification times were "
                       "not recorded (`vbstore gc` frees space)")
        for oid in report.corrupt:
            click.echo(f"CORRUPT  {oid}  {store.files.path(oid)}")
        for oid in report.missing:
            click.echo(f"MISSING  {oid}")
        for edge in report.dangling_edges:
            click.echo(f"DANGLING edge {edge['parent'][:12]} -{edge['role']}-> "
                       f"{edge['child'][:12]}")
        for fault in report.mismatched:
            key = fault["key"] if isinstance(fault["key"], str) else fault["key"][1]
            state = " (forgotten)" if repair else ""
            click.echo(f"MISMATCH {fault['table']} {key[:12]}: {fault['why']}{state}")
        for oid in report.unindexed:
            click.echo(f"UNINDEXED evaluation {oid[:12]}: stored but not on its leaderboard "
                       "(a killed pull's); `vbstore fsck --repair` or the next pull indexes it")
        for oid in report.indexed:
            click.echo(f"indexed  evaluation {oid[:12]} (judged as a pull judges it)")
        for problem in report.registry_errors:
            click.echo(f"REGISTRY {problem}")
        if report.registry_errors:
            click.echo("registry.db is damaged: nothing was written to it; run `vbstore fsck "
                       "--rebuild` to rebuild it from the blobs (the damaged file is kept aside)")
        for oid in report.unsafe:
            state = "removed" if repair else "refused, not followed; --repair removes the link"
            click.echo(f"SYMLINK  {oid}  ({state})")
        for oid in report.modes_fixed:
            click.echo(f"made read-only {oid[:12]} (it was writable)")
        if report.locks_removed:
            click.echo(f"removed {len(report.locks_removed)} stale lock files")
        for oid in report.adopted:
            click.echo(f"adopted  {oid[:12]} (intact blob without a registry row)")
        for oid in report.revived:
            click.echo(f"present again {oid[:12]} (intact; its row said evicted)")
        if report.temp_removed:
            click.echo(f"removed {len(report.temp_removed)} temp files left by dead writers")
        for oid in report.repaired:
            how = "re-fetched from a remote" if oid in report.refetched else "will be recomputed"
            click.echo(f"moved aside {oid[:12]} ({how})")
        click.echo("store is intact" if report.clean else f"{report.faults} faults")

    data = report.as_dict()
    if rebuilt is not None:
        data["rebuilt"] = rebuilt.as_dict()
    emit(as_json, data, text)
    # a repair also forgets every mismatched row
    all_repaired = (repair and len(report.repaired) >= len(report.corrupt) + len(report.missing)
                    and not report.dangling_edges and not report.registry_errors
                    and not report.unindexed)
    if not report.clean and not all_repaired:
        sys.exit(1)


def _refetcher(store):
    """Re-fetch a damaged blob from the configured remotes; None when there are none."""
    if not (store.root / "remotes.json").is_file():
        return None

    def refetch(oid: str) -> bool:
        from ..remotes import fetch_object

        try:
            return fetch_object(store, oid) is not None
        except VbstoreError as exc:  # a remote without it, or offline: it will be recomputed
            click.echo(f"warning: could not re-fetch {oid[:12]}: {exc}", err=True)
            return False

    return refetch


COMMANDS = [init, put, cat, show, ls_cmd, tag, why, du, gc, fsck]
