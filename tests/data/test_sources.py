"""hf:, torchvision: and wds: sources, each built offline by the test in its own format."""

from __future__ import annotations

import io
import json
import os
import pickle
import tarfile

import numpy as np
import pytest
from data_support import age

import vbstore
from vbstore.data import load_manifest, png_bytes
from vbstore.errors import BadInput, DataUnavailable, UsageError

CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                 "truck"]
N_TEST = 8


@pytest.fixture(scope="module")
def pictures():
    """``N_TEST`` test images (32x32 RGB) and their CIFAR labels, plus 2 per train batch."""
    rng = np.random.default_rng(7)
    test = rng.integers(0, 256, (N_TEST, 32, 32, 3), dtype=np.uint8)
    labels = [0, 3, 5, 3, 9, 0, 1, 5]
    train = rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    return test, labels, train, [i % 10 for i in range(10)]


def _batch(images: np.ndarray, labels: list[int]) -> dict:
    # CIFAR's python batches: (N, 3072) rows, channel planes R, G, B of 32x32 each
    return {"data": images.transpose(0, 3, 1, 2).reshape(len(images), -1), "labels": labels,
            "batch_label": "test", "filenames": []}


@pytest.fixture
def cifar_root(tmp_path, pictures):
    """``root/cifar-10-batches-py`` in CIFAR-10's own pickled batch format."""
    test, labels, train, train_labels = pictures
    folder = tmp_path / "tv" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for k in range(5):
        part = slice(2 * k, 2 * k + 2)
        (folder / f"data_batch_{k + 1}").write_bytes(
            pickle.dumps(_batch(train[part], train_labels[part])))
    (folder / "test_batch").write_bytes(pickle.dumps(_batch(test, labels)))
    (folder / "batches.meta").write_bytes(
        pickle.dumps({"label_names": CIFAR_CLASSES}))
    age(folder)
    return tmp_path / "tv"


@pytest.fixture
def cifar_md5_ok(monkeypatch):
    """Our batches cannot match CIFAR's published md5s: check that they exist, as without md5s."""
    from torchvision.datasets import cifar

    monkeypatch.setattr(cifar, "check_integrity", lambda path, md5=None: os.path.isfile(path))


@pytest.fixture
def hf_saved(tmp_path, pictures):
    """A ``datasets`` DatasetDict (PNG bytes + ClassLabel) written with ``save_to_disk``."""
    import datasets

    test, labels, _, _ = pictures
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(names=CIFAR_CLASSES),
                                  "caption": datasets.Value("string")})
    table = {"img": [{"bytes": png_bytes(p), "path": None} for p in test], "label": labels,
             "caption": [f"picture {i}" for i in range(N_TEST)]}
    saved = tmp_path / "hf-cifar"
    datasets.DatasetDict({"test": datasets.Dataset.from_dict(table, features=features)}
                         ).save_to_disk(str(saved))
    return saved


def _tar(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def wds_root(tmp_path, pictures):
    """CLIP_benchmark's layout: ``root/test/*.tar`` (``KEY.png`` + ``KEY.cls``), classnames.txt."""
    test, labels, _, _ = pictures
    root = tmp_path / "wds_cifar10"
    (root / "test").mkdir(parents=True)
    for shard, part in enumerate((range(0, 5), range(5, N_TEST))):
        _tar(root / "test" / f"{shard:d}.tar",
             {name: data for i in part for name, data in
              ((f"{i:06d}.png", png_bytes(test[i])), (f"{i:06d}.cls", str(labels[i]).encode()))})
    (root / "classnames.txt").write_text("\n".join(CIFAR_CLASSES) + "\n")
    age(root)
    return root


@pytest.fixture
def image_folder_of(tmp_path, pictures):
    """The same test images as PNG files in a plain image folder."""
    test, labels, _, _ = pictures
    root = tmp_path / "folder"
    for i, (pixels, label) in enumerate(zip(test, labels, strict=True)):
        path = root / CIFAR_CLASSES[label] / f"{i:06d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png_bytes(pixels))
    age(root)
    return root


def test_three_sources_give_one_content_and_share_features(
        store, cifar_root, cifar_md5_ok, hf_saved, wds_root, image_folder_of):
    tv = load_manifest(store, "torchvision:CIFAR10", split="test", dataset_root=str(cifar_root))
    hf = load_manifest(store, f"hf:{hf_saved}", split="test")
    wds = load_manifest(store, f"wds:{wds_root}", split="test")
    folder = load_manifest(store, image_folder_of)
    # the same bytes under the same keys and labels: one content digest, one set of image ids
    assert tv.image_ids == hf.image_ids == wds.image_ids
    assert sorted(tv.image_ids) == sorted(folder.image_ids)
    assert tv.digest == hf.digest == wds.digest
    assert tv.classes == CIFAR_CLASSES
    assert tv.labels() == [0, 3, 5, 3, 9, 0, 1, 5]
    assert len({tv.id, hf.id, wds.id}) == 3  # provenance differs, and is kept
    assert tv.doc["source"] == {"kind": "torchvision", "name": "CIFAR10"}
    assert wds.doc["source"] == {"kind": "wds", "name": "wds_cifar10", "shards": ["0.tar", "1.tar"]}
    assert hf.doc["source"]["image_column"] == "img"
    assert hf.doc["source"]["label_column"] == "label"
    assert len(hf.doc["source"]["fingerprint"]) >= 16

    first = vbstore.get_features("test_cnn", "torchvision:CIFAR10", split="test", store=store,
                                 weights="random", input_size=32, progress=False,
                                 data_options={"dataset_root": str(cifar_root)})
    assert first.stats["extracted"] == N_TEST
    for data in (f"hf:{hf_saved}", f"wds:{wds_root}", str(image_folder_of)):
        again = vbstore.get_features("test_cnn", data, split="test" if ":" in data else None,
                                     store=store, weights="random", input_size=32,
                                     progress=False)
        assert again.stats["extracted"] == 0, data
        assert again.stats["reused"] == N_TEST, data


def test_a_source_is_read_once(store, hf_saved):
    first = load_manifest(store, f"hf:{hf_saved}", split="test")
    written = sorted((store.root / "datasets").iterdir())
    again = load_manifest(store, f"hf:{hf_saved}", split="test", limit=1)
    assert sorted((store.root / "datasets").iterdir()) == written
    assert len(again) < len(first)
    assert set(again.image_ids) <= set(first.image_ids)


def test_hf_columns_are_overridable(store, hf_saved):
    view = load_manifest(store, f"hf:{hf_saved}", split="test", label_column="caption")
    assert view.target_type == "captions"
    assert view.captions()[0] == ["picture 0"]
    with pytest.raises(UsageError, match="no label column 'lable'"):
        load_manifest(store, f"hf:{hf_saved}", split="test", label_column="lable")
    with pytest.raises(UsageError, match="no split 'val'"):
        load_manifest(store, f"hf:{hf_saved}", split="val")


def test_hf_not_cached_fails_at_once_offline(store):
    import time

    started = time.monotonic()
    with pytest.raises(DataUnavailable, match="not in the local datasets cache") as caught:
        load_manifest(store, "hf:someone/not-cached@0123abcd:plain")
    assert "--download" in caught.value.hint
    assert caught.value.exit_code == 6  # the network's code, as for weights, not a usage error
    assert isinstance(caught.value, ConnectionError)
    # offline means no retry loop: well under the library's ~20 s of backoff
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("spec", ["hf:", "hf:name@", "hf:name:"])
def test_bad_hf_specs_are_refused(store, spec):
    with pytest.raises(UsageError):
        load_manifest(store, spec)


def test_torchvision_needs_its_root_and_never_downloads(store, cifar_root, tmp_path):
    with pytest.raises(UsageError, match="reads its files from a dataset root"):
        load_manifest(store, "torchvision:CIFAR10", split="test")
    with pytest.raises(UsageError, match="did you mean torchvision:CIFAR10"):
        load_manifest(store, "torchvision:CIFAR1O", split="test", dataset_root=str(cifar_root))
    for name in ("CIFAR11", "cifar10"):  # the name is checked first, whatever its case
        with pytest.raises(UsageError, match="did you mean torchvision:CIFAR10"):
            load_manifest(store, f"torchvision:{name}", split="test")
    with pytest.raises(UsageError, match="splits train and test"):
        load_manifest(store, "torchvision:CIFAR10", split="val", dataset_root=str(cifar_root))
    # the real md5 check refuses the test's batches: a corrupt copy is named, not read
    with pytest.raises(UsageError, match="is not in") as caught:
        load_manifest(store, "torchvision:CIFAR10", split="test", dataset_root=str(cifar_root))
    assert "--download" in caught.value.hint
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="is not in"):
        load_manifest(store, "torchvision:CIFAR10", split="test", dataset_root=str(empty))
    assert list(empty.iterdir()) == []  # nothing was fetched


def test_torchvision_train_split_reads_every_batch(store, cifar_root, cifar_md5_ok, pictures):
    view = load_manifest(store, "torchvision:CIFAR10", split="train", dataset_root=str(cifar_root))
    assert len(view) == 10
    assert view.labels() == list(range(10))
    _, _, train, _ = pictures
    assert np.array_equal(np.asarray(view.load_image(3)), train[3])


def test_wds_captions_and_splits(store, tmp_path, pictures):
    test, _, _, _ = pictures
    root = tmp_path / "captions"
    (root / "test").mkdir(parents=True)
    _tar(root / "test" / "0.tar", {"a/x.png": png_bytes(test[0]), "a/x.txt": b"a red square",
                                   "b.png": png_bytes(test[1]), "b.txt": b"noise"})
    with pytest.raises(UsageError, match="has splits"):
        load_manifest(store, f"wds:{root}")
    view = load_manifest(store, f"wds:{root}", split="test")
    assert view.target_type == "captions"
    assert view.names == ["images/a/x.png", "images/b.png"]
    assert view.captions() == [["a red square"], ["noise"]]


def test_wds_incomplete_samples_are_listed(store, tmp_path, pictures):
    test, _, _, _ = pictures
    shard = tmp_path / "bad.tar"
    _tar(shard, {"1.png": png_bytes(test[0]), "1.cls": b"0", "2.png": png_bytes(test[1]),
                 "3.cls": b"1"})
    with pytest.raises(BadInput) as caught:
        load_manifest(store, f"wds:{shard}")
    assert [p for p, _ in caught.value.problems] == ["2", "3"]
    assert not (store.root / "datasets").exists() or not any(
        p.name.startswith("wds") for p in (store.root / "datasets").iterdir())


def test_source_options_need_a_source(store, image_folder_of):
    with pytest.raises(UsageError, match="applies to hf:, torchvision: or wds: data"):
        load_manifest(store, image_folder_of, dataset_root=str(image_folder_of))
    with pytest.raises(UsageError, match="wds: data takes no image_column"):
        load_manifest(store, "wds:/nowhere", image_column="img")


def test_cli_reads_a_torchvision_dataset(cifar_root, cifar_md5_ok):
    from click.testing import CliRunner

    from vbstore.cli import cli

    out = CliRunner().invoke(cli, ["get", "manifest", "torchvision:CIFAR10", "--split", "test",
                                    "--dataset-root", str(cifar_root), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    assert summary["samples"] == N_TEST
    assert summary["classes"] == CIFAR_CLASSES


@pytest.fixture
def hub_cache(tmp_path, pictures, monkeypatch):
    """``someone/tiny`` in the datasets cache as the Hub leaves it: <ns>___<name>/<config>/
    <version>/<commit>/; written by the real parquet builder, then filed under a commit."""
    import shutil

    import datasets

    test, labels, _, _ = pictures
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(names=CIFAR_CLASSES)})
    table = {"img": [{"bytes": png_bytes(p), "path": None} for p in test], "label": labels}
    datasets.Dataset.from_dict(table, features=features).to_parquet(str(tmp_path / "t.parquet"))
    built = tmp_path / "built"
    datasets.load_dataset("parquet", data_files={"train": str(tmp_path / "t.parquet")},
                          cache_dir=str(built))
    source = next(p for p in (built / "parquet").glob("default-*/0.0.0/*") if p.is_dir())
    commit = "0123456789abcdef0123456789abcdef01234567"
    target = tmp_path / "cache" / "someone___tiny" / "default" / "0.0.0" / commit
    target.mkdir(parents=True)
    for file in source.iterdir():
        shutil.copy(file, target / file.name.replace("parquet-", "tiny-"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    return commit


def test_hf_hub_dataset_from_the_cache_pins_its_revision(store, hub_cache, hf_saved):
    view = load_manifest(store, "hf:someone/tiny", split="train")
    assert view.doc["source"]["revision"] == hub_cache
    assert view.doc["source"]["name"] == "someone/tiny"
    # the same images as the saved dataset: the same image ids
    assert view.image_ids == load_manifest(store, f"hf:{hf_saved}", split="test").image_ids
    pinned = load_manifest(store, f"hf:someone/tiny@{hub_cache[:9]}", split="train")
    assert pinned.doc["source"]["revision"] == hub_cache
    with pytest.raises(UsageError, match=f"the cache holds hf:someone/tiny@{hub_cache[:12]}"):
        load_manifest(store, "hf:someone/tiny@fedcba987", split="train")
