"""Feature rows are tied to their images (issue 21): a registry row or a pack header that puts
another image's features at a row is never assembled into a featureset, never indexed by a
rebuild, and fsck calls it a fault. test_vit random weights, digits.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.engine import get_result
from vbstore.store import rebuild_registry

LIMIT, SMALLER = 8, 6  # per class: the smaller request shares its images with the larger one


def _ask(store, k: int, limit: int):
    return get_result("test_vit", "knn", "sklearn:digits", "sklearn:digits", split="val",
                      train_split="train", limit=limit, train_limit=limit, weights="random",
                      params={"k": k}, store=store, progress=False)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A store holding the larger request's features, and the smaller request's true answer."""
    root = tmp_path_factory.mktemp("rows")
    with Store(root / "truth") as store:
        truth = _ask(store, 20, SMALLER)
    with Store(root / "base") as store:
        first = _ask(store, 5, LIMIT)
    return {"root": root / "base", "truth": truth, "first": first}


def _copy(base, tmp_path) -> Store:
    shutil.copytree(base["root"], tmp_path / "s")
    return Store(tmp_path / "s")


def _fsck(path, *args):
    return CliRunner().invoke(cli, ["--store", str(path), "fsck", *args])


def test_rotated_feature_rows_are_never_assembled_and_fsck_says_so(base, tmp_path):
    with _copy(base, tmp_path) as store:
        with store.db.write() as conn:  # every image now points at its neighbour's row
            conn.execute("UPDATE feature_rows SET row = (row + 1) % "
                         "(SELECT count(*) FROM feature_rows f2 WHERE f2.pack = feature_rows.pack)")
        out = _fsck(store.root)
        assert out.exit_code == 1, out.output
        assert "MISMATCH feature_rows" in out.output
        result = _ask(store, 20, SMALLER)  # assembled from the index: every row re-checked
        assert result.metrics == base["truth"].metrics
        assert result.extracted > 0  # the rows that disagreed were computed again
        assert _fsck(store.root, "--repair").exit_code == 0
        assert _fsck(store.root).exit_code == 0


def test_a_rebuild_indexes_only_rows_a_featureset_vouches_for(base, tmp_path):
    with _copy(base, tmp_path) as store:
        first = base["first"]
        features = store.read_json(first.record.inputs["eval_features"])
        real_packs = list(features["packs"])
        header = store.read_json(first.record.inputs["eval_manifest"])
        images = [s["image"] for s in header["samples"]]
        # a pack whose header claims this extractor and these images, with other numbers
        rng = np.random.default_rng(0)
        planted = store.put_tensors(
            {"pooled.-1": rng.standard_normal((len(images), 32)).astype(np.float32)}, "pack",
            {"format": "vbstore.pack.v1", "extractor": features["extractor_key"],
             "layers": "[-1]", "images": "[" + ",".join(f'"{i}"' for i in images) + "]"})
        for pack in real_packs:  # the real eval rows are lost: only the planted pack names them
            path = store.path(pack)
            path.chmod(0o644)
            path.unlink()
        report = rebuild_registry(store, force=True)
        assert report.packs_not_indexed == [planted]
    with Store(tmp_path / "s") as store:
        assert store.db.one("SELECT count(*) FROM feature_rows f JOIN packs p ON p.id = f.pack "
                            "WHERE p.oid = ?", (bytes.fromhex(planted),))[0] == 0
        result = _ask(store, 20, SMALLER)
        assert result.metrics == base["truth"].metrics
