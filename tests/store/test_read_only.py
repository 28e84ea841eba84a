"""A read-only store (a team's shared cache on a read-only mount) serves reads and refuses
writes with one line that says it is read-only."""

import json

import pytest
from click.testing import CliRunner
from store_support import run_read_only, suite_doc

from vbstore.cli import cli

LIBRARY = r"""
import json, sys
from vbstore import Store
from vbstore.errors import CorruptObject, StoreReadOnly
from vbstore.store import derivation_key, derivation_spec, gc

store = Store(sys.argv[1])
out = {"read_only": store.read_only, "ids": [o.id for o in store.ls()]}
suite = store.resolve("the-suite")
out["read"] = store.read_json(suite)["name"]
out["lookup"] = store.lookup(derivation_key(derivation_spec("op", 1, {}, {})))
try:  # a damaged answer cannot be moved aside and recomputed here: it is an integrity error
    store.lookup(derivation_key(derivation_spec("op", 3, {}, {})))
except CorruptObject as exc:
    out["corrupt"] = exc.exit_code
out["hash"] = store.file_states.hash([sys.argv[2]])  # the file-state cache is not written
out["again"] = store.put_json(store.read_json(suite), "suite")  # already there: nothing to write
for name, write in [("put", lambda: store.put_bytes(b"new bytes")),
                    ("tag", lambda: store.tag("other", suite)),
                    ("record", lambda: store.record(derivation_spec("op", 2, {}, {}), suite)),
                    ("gc", lambda: gc(store, grace=0))]:
    try:
        write()
        out[name] = "written"
    except StoreReadOnly as exc:
        out[name] = [str(exc), exc.exit_code]
print(json.dumps(out))
"""


def test_a_read_only_store_reads_and_refuses_writes(tmp_path):
    from vbstore import Store
    from vbstore.store import derivation_spec

    root = tmp_path / "shared"
    with Store(root) as store:
        suite = store.put_json(suite_doc("n"), "suite")
        store.tag("the-suite", suite)
        store.record(derivation_spec("op", 1, {}, {}), suite)
        loose = store.put_bytes(b"no root holds me")
        damaged = store.put_json(suite_doc("damaged"), "suite")
        store.record(derivation_spec("op", 3, {}, {}), damaged)
    path = store.files.path(damaged)
    path.chmod(0o644)
    path.write_bytes(path.read_bytes().replace(b"damaged", b"DAMAGED"))
    data = tmp_path / "image.bin"
    data.write_bytes(b"pixels")
    out = run_read_only(root, LIBRARY, str(root), str(data))
    assert out["read_only"] is True
    assert sorted(out["ids"]) == sorted([suite, loose, damaged])
    assert out["corrupt"] == 10
    assert out["read"] == "n"
    assert out["lookup"] == suite
    assert out["again"] == suite
    for name in ("put", "tag", "record", "gc"):
        message, code = out[name]
        assert code == 7
        assert "read-only" in message
        assert "\n" not in message
    with Store(root) as store:  # writable again, and as it was
        assert store.refs() == {"the-suite": suite}
        assert store.has(loose)


CLI = r"""
import json, sys
from click.testing import CliRunner
from vbstore.cli import cli

out = {}
for name, args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(cli, args)
    crashed = result.exc_info is not None and not isinstance(result.exception, SystemExit)
    out[name] = {"code": result.exit_code, "output": result.output, "traceback": crashed}
out["torch"] = "torch" in sys.modules
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A store holding one computed result, and the command that asks for it."""
    from vbstore.data import make_shapes

    base = tmp_path_factory.mktemp("ro")
    shapes = make_shapes(base / "shapes", per_class=2, seed=1, size=32)
    root = base / "store"
    get = ["get", "result", "-b", "test_cnn", "--weights", "random", "--input-size", "32",
           "-t", "retrieval", "-d", str(shapes), "--split", "val"]
    first = CliRunner().invoke(cli, ["--store", str(root), *get, "--json"])
    assert first.exit_code == 0, first.output
    return root, get, json.loads(first.stdout)["id"]


def test_cli_serves_reads_from_a_read_only_store(cached):
    root, get, result = cached
    store = ["--store", str(root)]
    commands = [
        ("get", [*store, *get, "--json"]),
        ("dry", [*store, *get, "--dry-run"]),
        ("ls", [*store, "ls", "result"]),
        ("show", [*store, "show", result[:12]]),
        ("why", [*store, "why", result[:12]]),
        ("du", [*store, "du"]),
        ("fsck", [*store, "fsck"]),
        ("repair", [*store, "fsck", "--repair"]),
        ("tag", [*store, "tag", "mine", result[:12]]),
        ("gc", [*store, "gc", "--grace", "0"]),
        ("forget", [*store, "forget", result[:12]]),
        ("forget-dry", [*store, "forget", result[:12], "--dry-run"]),
        ("compute", [*store, *get[:-2], "--split", "train"]),
        ("notes", [*store, *get, "--notes", "rerun for the paper"]),
        ("notes-compute", [*store, *get[:-2], "--split", "train", "--notes", "new"]),
    ]
    out = run_read_only(root, CLI, json.dumps(commands))
    for name in ("get", "dry", "ls", "show", "why", "du", "fsck", "forget-dry"):
        assert out[name]["code"] == 0, (name, out[name])
    assert json.loads(out["get"]["output"])["id"] == result
    assert json.loads(out["get"]["output"])["from_cache"]
    assert result[:12] in out["ls"]["output"]
    assert not out["torch"]  # a cached answer from a read-only store still needs no torch...
    assert "store is intact" in out["fsck"]["output"]  # checked, without any housekeeping
    # notes a user asked for are never dropped: refused in one line, cached or not
    for name in ("tag", "gc", "forget", "compute", "repair", "notes", "notes-compute"):
        assert out[name]["code"] == 7, (name, out[name])
        assert not out[name]["traceback"]
        assert "read-only" in out[name]["output"]
        assert len(out[name]["output"].strip().splitlines()) == 1, out[name]["output"]
    assert "cannot attach notes" in out["notes"]["output"]  # a cached answer is not enough
