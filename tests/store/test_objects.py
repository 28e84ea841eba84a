import os
import stat

import pytest
from store_support import PROTOCOL, suite_doc

from vbstore import Store
from vbstore.canonical import digest
from vbstore.errors import (
    AmbiguousPrefix,
    CorruptObject,
    NonCanonical,
    ObjectNotFound,
    SchemaError,
    StoreIOError,
    UsageError,
)
from vbstore.store import fsck


def test_a_store_path_through_a_file_is_one_line_naming_the_fix(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    for root in (tmp_path / "afile", tmp_path / "afile" / "store"):
        with pytest.raises(StoreIOError, match="a file stands where a folder must be") as info:
            Store(root)
        assert "--store or VBSTORE_HOME" in str(info.value)
        assert info.value.exit_code == 7


def test_put_read_round_trip_and_layout(store):
    oid = store.put_bytes(b"some bytes")
    assert oid == digest(b"some bytes")
    path = store.root / "objects" / oid[:2] / oid[2:]
    assert path.read_bytes() == b"some bytes"
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert store.read_bytes(oid, verify=True) == b"some bytes"
    assert store.info(oid).kind == "blob"
    assert not list((store.root / "tmp").iterdir())


def test_existing_blob_is_not_rewritten_but_touched(store):
    oid = store.put_bytes(b"x" * 100)
    path = store.files.path(oid)
    inode, first_used = path.stat().st_ino, store.info(oid).last_used
    assert store.put_bytes(b"x" * 100) == oid
    assert path.stat().st_ino == inode
    assert store.info(oid).last_used > first_used


def test_put_file_matches_put_bytes(store, tmp_path):
    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(3 << 20))
    assert store.put_file(source) == digest(source.read_bytes())


def test_resolve_prefix_ref_and_errors(store):
    ids = [store.put_bytes(str(i).encode()) for i in range(300)]
    target = ids[0]
    assert store.resolve(target[:10]) == target
    assert store.resolve(target.upper()[:10]) == target
    store.tag("best", target)
    assert store.resolve("best") == target
    with pytest.raises(ObjectNotFound):
        store.resolve("ffffffffffff0000")
    with pytest.raises(ObjectNotFound, match="at least 4 hex digits"):
        store.resolve("ab")
    with pytest.raises(KeyError):  # errors stay catchable as builtins
        store.resolve("no-such-ref")


def test_ambiguous_prefix_at_four_digits(store):
    seen = {}
    i = 0
    while True:
        oid = store.put_bytes(f"v{i}".encode())
        i += 1
        if oid[:4] in seen:
            break
        seen[oid[:4]] = oid
    with pytest.raises(AmbiguousPrefix, match="give more hex digits") as info:
        store.resolve(oid[:4])
    assert oid in info.value.matches


def test_json_is_canonical_and_validated(store):
    a = store.put_json({"version": 1, "name": "s", "slug": "s", "protocol": PROTOCOL}, "suite")
    b = store.put_json({**suite_doc("s"), "kind": "suite"}, "suite")
    assert a == b
    assert store.read_bytes(a).startswith(b'{"kind":"suite","name":"s","protocol":{"conditions":')
    assert store.read_bytes(a).endswith(b'},"slug":"s","version":1}')
    with pytest.raises(SchemaError, match="at version"):
        store.put_json(suite_doc("s", version="3"), "suite")
    with pytest.raises(NonCanonical, match=r"metrics\.top1"):
        store.put_json({"task": "t", "op_version": 1, "metrics": {"top1": float("nan")},
                        "params": {}, "inputs": {}}, "result")
    with pytest.raises(UsageError, match="kind"):
        store.put_json({**suite_doc("s"), "kind": "result"}, "suite")


def test_schema_error_names_nested_field(store):
    with pytest.raises(SchemaError) as info:
        store.put_json({"task": "t", "op_version": 1, "metrics": {}, "params": {},
                        "inputs": {"head": "not-a-hash"}}, "result")
    assert info.value.field == "inputs.head"


def test_corrupt_json_read_raises(store):
    oid = store.put_json(suite_doc("s"), "suite")
    path = store.files.path(oid)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptObject, match=oid[:12]):
        store.read_json(oid)
    assert not store.verify(oid)


def test_tensors_round_trip_with_kind_metadata(store):
    np = pytest.importorskip("numpy")
    from safetensors.numpy import load

    oid = store.put_tensors({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, "tensors",
                            {"task": "classification"})
    from vbstore.store._tensors import read_safetensors_header

    header, _ = read_safetensors_header(store.path(oid))
    assert header["__metadata__"] == {"task": "classification", "vbstore.kind": "tensors"}
    assert load(store.read_bytes(oid))["w"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_put_parsed_refuses_pickle_disguised_as_head(store, tmp_path):
    import pickle

    fake = tmp_path / "head.safetensors"
    fake.write_bytes(pickle.dumps({"w": [1, 2, 3]}))
    with pytest.raises(Exception, match="not a safetensors file"):
        store.put_file(fake, "head")
    assert store.ls() == []


def test_edges_and_refs(store):
    a = store.put_bytes(b"a")
    b = store.put_bytes(b"b", edges={"source": a})
    assert store.children(b) == [("source", a)]
    assert store.parents(a) == [("source", b)]
    store.tag("x", b)
    assert store.refs() == {"x": b}
    with pytest.raises(UsageError):
        store.tag("../evil", b)
    store.untag("x")
    assert store.refs() == {}


def test_store_created_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv("VBSTORE_HOME", str(tmp_path / "deep" / "home"))
    with Store() as s:
        s.put_bytes(b"1")
    assert (tmp_path / "deep" / "home" / "registry.db").is_file()


def test_pack_metadata_is_validated(store):
    np = pytest.importorskip("numpy")
    with pytest.raises(SchemaError, match="extractor"):
        store.put_tensors({"x": np.zeros(2)}, "pack",
                          {"format": "vbstore.pack.v1", "layers": "[-1]", "images": "[]"})
    assert store.ls() == []


def test_safetensors_bytes_are_canonical_golden():
    """Pins the on-disk layout: header canonical JSON padded to 8, widest dtype first."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    from vbstore.store._tensors import to_safetensors_bytes

    data = to_safetensors_bytes(
        {"b.small": np.array([1, 2], dtype=np.int16), "a": np.array([0.5], dtype=np.float32)},
        "tensors", {"z": "1", "m": "2"})
    header = (b'{"__metadata__":{"m":"2","vbstore.kind":"tensors","z":"1"},'
              b'"a":{"data_offsets":[0,4],"dtype":"F32","shape":[1]},'
              b'"b.small":{"data_offsets":[4,8],"dtype":"I16","shape":[2]}}')
    header += b" " * (-len(header) % 8)
    assert data == len(header).to_bytes(8, "little") + header + \
        np.array([0.5], dtype="<f4").tobytes() + np.array([1, 2], dtype="<i2").tobytes()
    same = to_safetensors_bytes(
        {"a": torch.tensor([0.5]), "b.small": torch.tensor([1, 2], dtype=torch.int16)},
        "tensors", {"m": "2", "z": "1"})
    assert same == data  # torch or numpy, any key order: the same bytes


def test_put_many_stores_a_batch_with_its_rows_in_one_transaction(store, monkeypatch):
    """One flush for the temp files and one for the renames, however many blobs; the blobs'
    rows and the caller's rows commit together (issue 32)."""
    from vbstore.store import _objects

    flushes = []
    real = _objects.ObjectFiles.flush
    monkeypatch.setattr(_objects.ObjectFiles, "flush",
                        lambda self, paths: flushes.append(len(list(paths))) or None)
    old = store.put_bytes(b"already here")
    blobs = [(f"blob {i}".encode(), "blob", None) for i in range(50)]
    blobs += [(b"already here", "blob", {"child": old}), (b"blob 3", "blob", None)]
    seen = []
    ids = store.put_many(blobs, then=lambda conn: seen.append(
        conn.execute("SELECT COUNT(*) FROM objects").fetchone()[0]))
    assert ids == [digest(data) for data, _, _ in blobs]
    assert len(flushes) == 2
    assert flushes[0] == 50  # 50 new files (the duplicate written once)
    assert seen == [51]  # inside the transaction, every row of the batch is there
    assert all(store.read_bytes(oid) == data for oid, (data, _, _) in zip(ids, blobs, strict=True))
    monkeypatch.setattr(_objects.ObjectFiles, "flush", real)

    def fails(conn):
        raise RuntimeError("killed before the commit")

    with pytest.raises(RuntimeError):
        store.put_many([(b"lost row", "blob", None)], then=fails)
    oid = digest(b"lost row")
    # the blob stands whole without a row (no row without its blob); fsck adopts it
    assert store.files.exists(oid)
    assert store.db.one("SELECT 1 FROM objects WHERE id=?", (bytes.fromhex(oid),)) is None
    assert oid in fsck(store).adopted
    assert not list(store.files.tmp.iterdir())  # no temp file left behind


_VALID = {
    "evaluation": {"kind": "evaluation", "suite": "s@1", "suite_id": "a" * 64,
                   "checkpoint": {"id": "c", "label": "c", "weights": "pretrained"},
                   "results": {"day": {"overall": {"m": 0.5}}}, "sample_counts": {"day": 3},
                   "evidence": "observed",
                   "verdict": {"state": "eligible", "reasons": [], "ranked": True}},
    "result": {"kind": "result", "task": "knn", "op_version": 1, "metrics": {"top1": 0.5},
               "params": {}, "inputs": {"eval": "b" * 64}},
}


@pytest.mark.parametrize("kind", sorted(_VALID))
def test_the_compiled_schema_check_agrees_with_jsonschema(kind):
    """A schema checked by fastjsonschema too must accept exactly what jsonschema accepts (a
    document it passed is never checked again): every property of a valid document, and every
    part of a nested one, set to values of every JSON type."""
    import json

    import jsonschema

    from vbstore.store._schemas import _fast, schema_text

    fast = _fast(kind)
    assert fast is not None
    schema = json.loads(schema_text(kind))
    slow = jsonschema.validators.validator_for(schema)(schema)
    values = [None, True, 0, -1, 1.0, 1.5, "", "x", "a" * 64, [], ["x"], [1], {}, {"a": 1},
              {"a": "b"}, {"overall": {"m": 0.5}}, {"overall": {"m": "x"}}, {"m": True}]
    base = _VALID[kind]
    docs = [base]
    for name in [*schema["properties"], "extra"]:
        docs += [{**base, name: value} for value in values]
        if isinstance(base.get(name), dict):
            for part in [*base[name], "extra"]:
                docs += [{**base, name: {**base[name], part: value}} for value in values]
    agreed = 0
    for doc in docs:
        try:
            fast(doc)
            fast_ok = True
        except Exception:
            fast_ok = False
        assert fast_ok == slow.is_valid(doc), doc
        agreed += fast_ok
    assert 0 < agreed < len(docs)  # both accepted some and refused some
