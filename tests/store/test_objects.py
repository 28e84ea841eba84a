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
