"""``vbstore browse``: the registry in Datasette on 127.0.0.1."""

from __future__ import annotations

import click

from ._common import emit, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


@click.command()
@click.option("--port", type=click.IntRange(1, 65535), default=8001, show_default=True,
              help="Port on 127.0.0.1.")
@click.option("--snapshot", type=click.Path(dir_okay=False), default=None,
              help="Where to write the read-only snapshot (default: <store>/browse/vbstore.db).")
@click.option("--no-serve", is_flag=True, help="Only write the snapshot; start no server.")
@json_option
@with_store
def browse(store, port: int, snapshot: str | None, no_serve: bool, as_json: bool) -> None:
    """Browse results, heads, refs and lineage in Datasette (needs the browse extra).

    Writes a read-only snapshot of the registry's readable tables, then serves it on
    http://127.0.0.1:PORT until interrupted (Ctrl-C or SIGTERM, which stop the server too).
    The snapshot is never written inside the store (but for its browse/ folder) nor over an
    existing file that is not a snapshot.
    """
    from ..browse import build_snapshot, serve, serving, wait_until_up

    path = build_snapshot(store, snapshot or store.root / "browse" / "vbstore.db")
    url = f"http://127.0.0.1:{port}/{path.stem}"
    if no_serve:
        emit(as_json, {"snapshot": str(path)}, f"wrote {path}")
        return
    with serving(serve(path, port)) as process:  # stops the server on Ctrl-C and SIGTERM too
        wait_until_up(process, url)
        emit(as_json, {"snapshot": str(path), "url": url},
             f"serving {url}/results (Ctrl-C to stop)")
        process.wait()
