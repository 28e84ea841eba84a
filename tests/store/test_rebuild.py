"""A damaged registry: fsck finds it, `fsck --rebuild` makes a new one from the blobs (every blob
knows its kind and the ids it names) and keeps the damaged file aside."""

import json
import os
import re
import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from store_support import suite_doc

from vbstore import Store
from vbstore.cli import cli
from vbstore.errors import UsageError, VbstoreError
from vbstore.store import fsck, rebuild_registry

_ID = re.compile(r"[0-9a-f]{64}")


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """A store holding a trained head and its result, and the command that asked for it."""
    from vbstore.data import make_shapes

    base = tmp_path_factory.mktemp("rebuild")
    shapes = str(make_shapes(base / "shapes", per_class=2, seed=1, size=32))
    root = base / "store"
    get = ["get", "result", "-b", "test_cnn", "--weights", "random", "--input-size", "32",
           "-t", "classification", "-p", "epochs=1", "-d", shapes, "--split", "val",
           "--train-data", shapes, "--train-split", "train", "--json"]
    first = CliRunner().invoke(cli, ["--store", str(root), *get])
    assert first.exit_code == 0, first.output
    suite_file = base / "suite.json"
    suite_file.write_text(json.dumps(suite_doc("n")))
    suite = CliRunner().invoke(cli, ["--store", str(root), "suite", "push", str(suite_file)])
    assert suite.exit_code == 0, suite.output
    return root, get, json.loads(first.stdout)["id"]


@pytest.fixture
def run(computed, tmp_path):
    root, get, result = computed
    copy = tmp_path / "store"
    shutil.copytree(root, copy)

    def invoke(*args):
        return CliRunner().invoke(cli, ["--store", str(copy), *args])

    invoke.root, invoke.get, invoke.result = copy, get, result
    return invoke


def _ids(tree) -> set[str]:
    return set(_ID.findall(json.dumps(tree)))


def test_damaged_header_is_found_and_rebuilt_from_the_blobs(run):
    objects = {o["id"]: o["kind"] for o in json.loads(run("ls", "--json").stdout)}
    lineage = _ids(json.loads(run("why", run.result, "--json").stdout))
    assert {"head", "pack", "featureset", "manifest", "backbone", "result", "suite"} <= set(
        objects.values())
    db = run.root / "registry.db"
    with open(db, "r+b") as handle:  # SQLite's header: "SQLite format 3\0", page size...
        handle.write(os.urandom(100))

    broken = run("ls")
    assert broken.exit_code == 7
    assert "fsck --rebuild" in broken.output
    found = run("fsck")
    assert found.exit_code == 1
    assert "registry.db is damaged" in found.output
    assert "fsck --rebuild" in found.output

    rebuilt = run("fsck", "--rebuild", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    report = json.loads(rebuilt.stdout)
    assert report["clean"]
    assert sum(report["rebuilt"]["kinds"].values()) == len(objects)
    assert "derivations" in report["rebuilt"]["lost"]
    aside = report["rebuilt"]["kept_aside"]
    assert aside
    assert os.path.exists(aside[0])
    assert {o["id"]: o["kind"] for o in json.loads(run("ls", "--json").stdout)} == objects
    assert _ids(json.loads(run("why", run.result, "--json").stdout)) == lineage  # edges are back
    assert run("suite", "show", "s@1").exit_code == 0  # the suite index too

    again = run(*run.get)  # derivations were lost: recomputed, from the recovered feature rows
    assert again.exit_code == 0, again.output
    record = json.loads(again.stdout)
    packs = {o["id"] for o in json.loads(run("ls", "pack", "--json").stdout)}
    assert packs == {i for i, kind in objects.items() if kind == "pack"}  # no forward pass
    assert record["record"]["metrics"] == json.loads(run("show", run.result, "--json").stdout)[
        "content"]["metrics"]


def test_damaged_index_is_rebuilt(store):
    ids = [store.put_bytes(f"blob {i}".encode() * 20) for i in range(300)]
    suite = store.put_json(suite_doc("n"), "suite")
    with pytest.raises(UsageError, match="intact"):  # a healthy registry is never thrown away
        rebuild_registry(store)
    store.close()
    db = store.root / "registry.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE type='index' "
                            "AND tbl_name='objects' LIMIT 1").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(db.read_bytes())
    start = (root - 1) * page_size
    data[start + page_size // 2 : start + page_size] = os.urandom(page_size // 2)
    db.write_bytes(bytes(data))
    assert fsck(store).registry_errors

    report = rebuild_registry(store)
    assert report.kinds == {"blob": 300, "suite": 1}
    assert fsck(store).clean
    assert {o.id for o in store.ls()} == {*ids, suite}
    assert store.info(suite).kind == "suite"


def test_rebuild_leaves_corrupt_blobs_out(tmp_path):
    with Store(tmp_path / "s") as store:
        good = store.put_bytes(b"good")
        bad = store.put_bytes(b"bad")
        path = store.files.path(bad)
        path.chmod(0o644)
        path.write_bytes(b"tampered")
        report = rebuild_registry(store, force=True)
        assert report.corrupt == [bad]
        assert [o.id for o in store.ls()] == [good]


@pytest.mark.parametrize("loss", ["deleted", "emptied"])
def test_a_lost_registry_beside_blobs_is_refused_not_started_afresh(run, loss):
    # a registry.db deleted (taken for a cache) or truncated to nothing beside a store's blobs:
    # opened as a new store, refs and lineage were gone silently, fsck adopted the blobs without
    # their edges and said clean, and `fsck --rebuild` refused the new, "intact" registry
    objects = {o["id"]: o["kind"] for o in json.loads(run("ls", "--json").stdout)}
    db = run.root / "registry.db"
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    if loss == "deleted":
        db.unlink()
    else:
        db.write_bytes(b"")
    for args in (run.get, ("ls",), ("show", run.result), ("gc",), ("tag", "x", run.result)):
        refused = run(*args)
        assert refused.exit_code == 7, (args, refused.output)
        assert "fsck --rebuild" in refused.output
    assert not db.exists() or db.stat().st_size == 0  # nothing was started in its place
    found = run("fsck")
    assert found.exit_code == 1
    assert "fsck --rebuild" in found.output
    rebuilt = run("fsck", "--rebuild", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert {o["id"]: o["kind"] for o in json.loads(run("ls", "--json").stdout)} == objects
    assert run("why", run.result).exit_code == 0


def test_a_new_store_in_an_empty_folder_is_made_as_before(tmp_path):
    (tmp_path / "s" / "objects").mkdir(parents=True)  # an empty objects/ holds nothing to lose
    with Store(tmp_path / "s") as store:
        assert store.ls() == []


KILLED_REBUILD = """
import os, signal, sys
from vbstore import Store
from vbstore.store import _rebuild

def killed(*args, **kwargs):  # inside the rebuild's one write: a crash, a power loss
    os.kill(os.getpid(), signal.SIGKILL)

_rebuild.insert_feature_rows = killed
_rebuild.rebuild_registry(Store(sys.argv[1]), force=True)
"""


def test_a_rebuild_killed_midway_leaves_no_empty_registry_behind(tmp_path):
    import subprocess
    import sys

    meta = {"format": "vbstore.pack.v1", "extractor": "e" * 64, "layers": "[-1]",
            "images": json.dumps(["a" * 64])}
    with Store(tmp_path / "s") as store:
        blob = store.put_bytes(b"kept")
        pack = store.put_tensors({"pooled": __import__("numpy").zeros((1, 2), "float32")},
                                 "pack", meta)
        # a featureset vouching for the pack's row, so the rebuild indexes it (and is killed)
        manifest = store.put_json({"layout": "folder", "samples": [{"image": "a" * 64}]},
                                  "manifest")
        featureset = store.put_json({"extractor": {}, "extractor_key": "e" * 64,
                                     "manifest": manifest, "backbone": "b" * 64,
                                     "packs": [pack], "rows": [[0, 0]]}, "featureset")
    killed = subprocess.run([sys.executable, "-c", KILLED_REBUILD, str(tmp_path / "s")],
                            capture_output=True, check=False)
    assert killed.returncode == -9, killed.stderr
    # the registry was moved aside, the new one never finished: refused, not served empty
    with Store(tmp_path / "s") as store, pytest.raises(VbstoreError, match="fsck --rebuild"):
        store.ls()
    with Store(tmp_path / "s") as store:
        rebuild_registry(store)
        assert {o.id for o in store.ls()} == {blob, pack, manifest, featureset}
        assert fsck(store).clean
