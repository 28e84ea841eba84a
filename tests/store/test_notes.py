"""Notes attached to a result live in the registry (migration 9), never in its document."""

import sqlite3

import torch
from store_support import run_read_only
from test_gc import _old, put_pack

from vbstore import Store
from vbstore.store import gc
from vbstore.store._layout import REGISTRY_VERSION


def test_notes_newest_first_again_bumps_and_gc_deletes_them_with_their_object(store):
    pack = put_pack(store, {"pooled": torch.zeros(2, 3)})
    store.notes.add(pack, "first")
    store.notes.add(pack, "second")
    assert store.notes.of(pack) == ["second", "first"]
    store.notes.add(pack, "first")  # given again: the newest
    assert store.notes.of(pack) == ["first", "second"]
    store.notes.add(pack, "   ")  # empty text says nothing
    assert store.notes.of(pack) == ["first", "second"]
    _old(store, pack)
    gc(store, grace=0)  # an unreachable pack goes, and its rows with it
    assert not store.has(pack)
    assert store.notes.of(pack) == []
    assert store.db.query("SELECT count(*) FROM result_notes") == [(0,)]


REFUSED = "attach notes (they are rows of its registry; without notes the result is read as usual)"
READ_NOTES = """
import json, sys
from vbstore import Store
from vbstore.errors import StoreReadOnly
store = Store(sys.argv[1])
try:  # asked for, so refused on a read-only store rather than dropped
    store.notes.add(sys.argv[2], "not kept")
    refused = None
except StoreReadOnly as exc:
    refused = exc.doing
store.notes.add(sys.argv[2], "  ")  # empty text says nothing, so writes nothing
print(json.dumps({"read_only": store.read_only, "version": store.db.version,
                  "notes": store.notes.of(sys.argv[2]), "refused": refused}))
"""


def test_a_read_only_store_refuses_a_note_and_an_old_registry_has_none(tmp_path):
    root = tmp_path / "s"
    with Store(root) as store:
        pack = put_pack(store, {"pooled": torch.zeros(1, 1)})
        store.notes.add(pack, "kept")
    assert run_read_only(root, READ_NOTES, str(root), pack) == {
        "read_only": True, "version": REGISTRY_VERSION, "notes": ["kept"], "refused": REFUSED}
    conn = sqlite3.connect(root / "registry.db")
    conn.execute("DROP TABLE verified_scores")  # undoing 11 and 10 first
    conn.execute("DROP TABLE result_notes")  # as migration 9 found it
    conn.execute("DROP TABLE evaluation_uuids")
    conn.execute("ALTER TABLE evaluations DROP COLUMN project")
    conn.execute("PRAGMA user_version=8")
    conn.commit()
    conn.close()
    assert run_read_only(root, READ_NOTES, str(root), pack) == {
        "read_only": True, "version": 8, "notes": [], "refused": REFUSED}
    with Store(root) as store:  # migrated again on a writable open
        assert store.db.version == REGISTRY_VERSION
        assert store.notes.of(pack) == []
