"""A store made before migration 3 (hex TEXT ids) opens, migrates in place, and loses nothing."""

import os
import sqlite3

import blake3
import pytest
from store_support import run_read_only

import vbstore.store._registry as registry_module
from vbstore import Store
from vbstore.errors import StoreIOError
from vbstore.store import db_id, derivation_key, derivation_spec, fsck, gc, hex_id


def _v2_registry(root, monkeypatch):
    """``registry.db`` as the code before migration 3 made it: only migrations 1 and 2 run."""
    (root / "objects").mkdir(parents=True)
    with monkeypatch.context() as patch:
        patch.setattr(registry_module, "MIGRATIONS", registry_module.MIGRATIONS[:2])
        registry_module.Registry(root / "registry.db").close()
    conn = sqlite3.connect(root / "registry.db", isolation_level=None)
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    return conn


def _blob(root, data: bytes) -> str:
    oid = blake3.blake3(data).hexdigest()
    path = root / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o444)
    return oid


def _old_store(root, monkeypatch, tmp_path):
    """A v2 store with every hot table filled the way the old code filled it (hex TEXT)."""
    conn = _v2_registry(root, monkeypatch)
    image = _blob(root, b"an image")
    pack = _blob(root, b"a pack's bytes")
    featureset = _blob(root, b'{"kind":"featureset"}')
    orphan = _blob(root, b"nobody needs me")
    objects = [(image, "blob", 8, 1.0, 2.0, 3.0, None), (pack, "pack", 14, 4.0, 5.0, None, None),
               (featureset, "featureset", 21, 6.0, 7.0, 8.0, None),
               (orphan, "blob", 15, 9.0, 10.0, None, None),
               ("ab" * 32, "pack", 99, 11.0, 12.0, None, 13.0)]  # an evicted one: no file
    conn.executemany("INSERT INTO objects VALUES (?,?,?,?,?,?,?)", objects)
    edges = [(featureset, pack, "pack"), (pack, image, "image"), (featureset, "ab" * 32, "pack")]
    conn.executemany("INSERT INTO edges(parent, child, role) VALUES (?,?,?)", edges)
    extractors = ["e" * 64, "f" * 64]
    images = [blake3.blake3(str(i).encode()).hexdigest() for i in range(50)]
    rows = [(extractor, img, pack, i) for extractor in extractors for i, img in enumerate(images)]
    rows += [("e" * 64, "c" * 64, "ab" * 32, 0)]  # a row of an evicted pack: never served
    conn.executemany("INSERT INTO feature_rows VALUES (?,?,?,?)", rows)
    cached = tmp_path / "cached.jpg"
    cached.write_bytes(b"pixels")
    os.utime(cached, (1e9, 1e9))
    st = cached.stat()
    fake = "d" * 64  # a hash only the cache could answer: proves the row survived
    conn.execute("INSERT INTO file_state VALUES (?,?,?,?,?,?)",
                 (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, fake))
    key = derivation_key(derivation_spec("featureset", 1, {"manifest": image}, {}))
    conn.execute("INSERT INTO derivations VALUES (?,?,?,?,?)",
                 (key, "featureset", featureset, "{}", 1.0))
    conn.execute("INSERT INTO refs VALUES (?,?,?)", ("named", featureset, 1.0))
    conn.close()
    return {"objects": objects, "edges": edges, "images": images, "pack": pack,
            "featureset": featureset, "image": image, "orphan": orphan, "key": key,
            "cached": cached, "fake": fake}


def test_a_v2_store_migrates_in_place_and_every_row_survives(tmp_path, monkeypatch):
    root = tmp_path / "s"
    old = _old_store(root, monkeypatch, tmp_path)
    with Store(root) as store:
        version = store.db.one("PRAGMA user_version")[0]
        assert version == registry_module.MIGRATIONS[-1][0] >= 3
        assert sorted((o.id, o.kind, o.size, o.created, o.last_used, o.verified_at, o.evicted_at)
                      for o in store.ls()) == sorted(old["objects"])
        # the layout really changed: raw 32-byte ids, no rowid b-tree
        assert store.db.one("SELECT typeof(id), length(id) FROM objects LIMIT 1") == ("blob", 32)
        sql = store.db.one("SELECT sql FROM sqlite_master WHERE name='feature_rows'")[0]
        assert "WITHOUT ROWID" in sql
        assert sorted((p, c, r) for p in {e[0] for e in old["edges"]}
                      for r, c in store.children(p)) == sorted(old["edges"])
        assert store.parents(old["image"]) == [("image", old["pack"])]
        for extractor in ("e" * 64, "f" * 64):
            assert store.feature_rows.find(extractor, [*old["images"], "c" * 64]) == {
                img: (old["pack"], i) for i, img in enumerate(old["images"])}
        assert store.file_states.hash([old["cached"]]) == [old["fake"]]
        assert store.lookup(old["key"]) == old["featureset"]
        assert store.resolve("named") == old["featureset"]
        assert store.resolve(old["pack"][:8]) == old["pack"]
        # every blob and row is intact; only the stand-in pack (bytes, not safetensors) cannot
        # vouch for the feature rows that name it
        report = fsck(store)
        assert {m["table"] for m in report.mismatched} == {"feature_rows"}
        assert report.faults == len(report.mismatched) == 100
        # gc on the migrated tables: the orphan goes, what the ref reaches stays
        removed = [o["id"] for o in gc(store, grace=0).removed]
        assert removed == [old["orphan"]]
        assert store.has(old["pack"])
        assert not store.has(old["orphan"])


def test_a_failed_migration_leaves_the_v2_store_as_it_was(tmp_path, monkeypatch):
    root = tmp_path / "s"
    conn = _v2_registry(root, monkeypatch)
    # the old rowid table let a NULL into its key; the compact one refuses it
    conn.execute("INSERT INTO edges(parent, child, role) VALUES (?,?,NULL)", ("a" * 64, "b" * 64))
    conn.execute("INSERT INTO objects VALUES (?,?,?,?,?,?,?)",
                 ("a" * 64, "blob", 1, 1.0, 1.0, None, None))
    conn.close()
    with pytest.raises(StoreIOError, match="NOT NULL"):
        Store(root).db  # noqa: B018 - opening the registry runs the migration
    conn = sqlite3.connect(root / "registry.db")
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    assert conn.execute("SELECT id, typeof(id) FROM objects").fetchall() == [("a" * 64, "text")]
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '%_v3'"
                        ).fetchone() == (0,)
    conn.close()


READ_OLD = r"""
import json, sys
from vbstore import Store
from vbstore.errors import StoreReadOnly
try:
    Store(sys.argv[1]).ls()
    print(json.dumps({"read": True}))
except StoreReadOnly as exc:
    print(json.dumps({"error": str(exc), "code": exc.exit_code}))
"""


def test_a_read_only_v2_store_says_it_needs_an_upgrade(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    _v2_registry(root, monkeypatch).close()
    out = run_read_only(root, READ_OLD, str(root))
    assert "read-only: cannot upgrade its registry to this vbstore" in out["error"]


def test_a_read_only_v3_store_is_served_without_the_answer_cache(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    (root / "objects").mkdir(parents=True)
    with monkeypatch.context() as patch:  # made by the vbstore before migration 4
        patch.setattr(registry_module, "MIGRATIONS", registry_module.MIGRATIONS[:3])
        registry_module.Registry(root / "registry.db").close()
    assert registry_module.READABLE_FROM == 3 < registry_module.MIGRATIONS[-1][0]
    assert run_read_only(root, READ_OLD, str(root)) == {"read": True}


def test_ids_convert_both_ways_and_keep_anything_else_as_text():
    oid = blake3.blake3(b"x").hexdigest()
    assert db_id(oid) == bytes.fromhex(oid)
    assert hex_id(db_id(oid)) == oid
    for other in ("named", "AB" * 32, "a" * 63, ""):  # not a lowercase 64-hex id: unchanged
        assert (db_id(other), hex_id(other)) == (other, other)


def test_a_feature_row_costs_under_a_third_of_the_old_layout(store):
    images = [blake3.blake3(str(i).encode()).hexdigest() for i in range(20_000)]
    for start in range(0, len(images), 4096):
        pack = store.put_bytes(f"pack {start}".encode(), "pack")
        store.feature_rows.add("e" * 64, pack, images[start : start + 4096])
    try:  # dbstat is a compile-time option of SQLite (on in Python's builds and Debian's)
        pages = store.db.conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN "
            "('feature_rows', 'idx_feature_rows_pack', 'packs', 'extractors')").fetchone()
    except sqlite3.OperationalError as exc:
        pytest.skip(f"this SQLite has no dbstat table ({exc})")
    # a renamed table or index would sum to NULL: a failure, not a skip
    assert pages[0] is not None
    assert pages[0] / len(images) < 460 / 3  # today's layout measured 460 bytes per row


def test_a_registry_from_a_newer_vbstore_is_refused_not_misread(tmp_path):
    root = tmp_path / "s"
    Store(root).close()
    newer = registry_module.MIGRATIONS[-1][0] + 1
    conn = sqlite3.connect(root / "registry.db")
    conn.execute(f"PRAGMA user_version={newer}")
    conn.close()
    with pytest.raises(StoreIOError, match=f"newer vbstore .registry version {newer}"):
        Store(root).ls()


READ_BOARD = r"""
import json, sys
from vbstore import Store
from vbstore.suites import leaderboard, list_evaluations
store = Store(sys.argv[1])
board = leaderboard(store, "road-test@1")
print(json.dumps({"read_only": store.read_only, "version": store.db.version,
                  "rows": [[r["evaluation"], r["variant"]] for r in board.rows],
                  "listed": [[r["id"], r["superseded_by"]] for r in list_evaluations(store)],
                  "names": store.data_names.of(sys.argv[2])}))
"""


def _downgraded(root, version: int) -> str:
    """A store with one ranked evaluation whose registry is rolled back to ``version`` (6: before
    board variants and corrections; 7: before data names; 10: before the verified-scores
    cache); return the evaluation's id."""
    from vbstore.suites import build, push_suite, record

    with Store(root) as store:
        suite = push_suite(store, {
            "slug": "road-test", "version": 1, "name": "Road test", "protocol": {
                "task": "segmentation", "data": {"kind": "external", "manifestSha256": "a" * 64},
                "conditions": [{"name": "day", "sampleCount": 10}],
                "metrics": [{"key": "miou", "direction": "max", "headline": True}]}})[0]
        oid = record(store, build(
            suite, checkpoint={"id": "c" * 64, "label": "alpha", "weights": "pretrained"},
            results={"day": {"overall": {"miou": 0.5}}}, sample_counts={"day": 10},
            data={"kind": "external", "manifestSha256": "a" * 64},
            protocol={"task": "segmentation", "params": {}},
            evaluator={"package": "vbstore", "version": "0.1.0"}), recorded=1.0).id
    conn = sqlite3.connect(root / "registry.db")
    if version < 11:  # as migration 11 found it
        conn.execute("DROP TABLE verified_scores")
    if version < 8:  # as migration 8 found it
        conn.execute("DROP TABLE data_names")
    if version < 7:  # as migration 7 found it
        conn.execute("DROP INDEX idx_evaluations_board")
        conn.execute("ALTER TABLE evaluations DROP COLUMN variant")
        conn.execute("ALTER TABLE evaluations DROP COLUMN superseded_by")
        conn.execute("CREATE INDEX idx_evaluations_suite_evidence_checkpoint_ranked_recorded_id "
                     "ON evaluations(suite, evidence, checkpoint, ranked, recorded, id)")
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()
    return oid


@pytest.mark.parametrize("version", [6, 7, 10])
def test_a_read_only_store_before_variants_and_names_serves_its_board(tmp_path, version):
    root = tmp_path / "shared"
    oid = _downgraded(root, version)
    assert registry_module.READABLE_FROM <= version
    assert run_read_only(root, READ_BOARD, str(root), oid) == {
        "read_only": True, "version": version, "rows": [[oid, {}]], "listed": [[oid, None]],
        "names": []}


def test_a_store_before_the_verified_scores_cache_migrates_and_its_board_fills_it(tmp_path):
    """Migration 11 adds an empty cache; the first board reads the blob and records it."""
    from vbstore.suites import leaderboard

    root = tmp_path / "s"
    oid = _downgraded(root, 10)
    with Store(root) as store:
        assert store.db.version == 11
        assert store.db.query("SELECT id FROM verified_scores") == []
        assert [r["evaluation"] for r in leaderboard(store, "road-test@1").rows] == [oid]
        assert store.db.query("SELECT id FROM verified_scores") == [(oid,)]
        assert fsck(store).mismatched == []


def test_creating_a_store_does_not_load_pandas(tmp_path):
    """sqlite_utils imports pandas whenever it is installed (seconds of a cold run); the store
    keeps it out, and pandas still imports afterwards."""
    import subprocess
    import sys

    code = ("import sys\nfrom vbstore import Store\n"
            f"Store({str(tmp_path / 's')!r}).close()\n"
            "from vbstore.store._registry import expected_schema\nexpected_schema()\n"
            "print('pandas' in sys.modules, 'sqlite_utils' in sys.modules)\n"
            "try:\n    import pandas\nexcept ImportError as exc:\n"
            "    print('missing' if 'No module named' in str(exc) else 'blocked')\n"
            "else:\n    print('imports')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[:2] == ["False", "True"]
    assert out[2] in ("imports", "missing")  # as it would without vbstore
