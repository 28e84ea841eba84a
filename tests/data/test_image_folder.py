import pickle
import shutil

import pytest
from data_support import age, write_image

from vbstore.canonical import key_of
from vbstore.data import ManifestView, load_manifest, manifest_digest


def test_split_folder_reads_into_a_sorted_stored_manifest(store, image_folder):
    view = load_manifest(store, image_folder, split="train")
    assert view.layout == "image_folder"
    assert view.split == "train"
    assert view.classes == ["cat", "dog", "eel"]
    assert len(view) == 15
    assert view.counts() == {"cat": 6, "dog": 4, "eel": 5}
    assert view.names == sorted(view.names)
    assert view.names[0] == "cat/00.png"
    assert view.root == (image_folder / "train").resolve()
    assert view.labels()[:6] == [0] * 6
    assert view.labels()[-1] == 2
    assert view.multi_hot().sum(axis=0).tolist() == [6, 4, 5]
    stored = store.read_json(view.id)
    assert stored == view.doc
    assert store.info(view.id).kind == "manifest"
    assert view.doc["digest"] == manifest_digest(view.classes, view.samples)
    assert view.id == key_of(view.doc)
    image = view.load_image(1)
    assert image.mode == "RGB"
    assert image.size == (8, 8)
    assert view.image_path(1) == image_folder / "train" / "cat" / "01.jpg"


def test_no_split_level_and_a_split_given_directly(store, image_folder):
    direct = load_manifest(store, image_folder / "val")
    via_split = load_manifest(store, image_folder, split="val")
    assert direct.split is None
    assert via_split.split == "val"
    # same files and labels: the same content digest, but the recorded split differs the id
    assert direct.digest == via_split.digest
    assert direct.id != via_split.id


def test_several_splits_need_a_split(store, image_folder):
    from vbstore.errors import UsageError

    with pytest.raises(UsageError, match=r"has splits \(train, val\).*--split"):
        load_manifest(store, image_folder)
    with pytest.raises(UsageError, match=r"no split 'test'.*train, val"):
        load_manifest(store, image_folder, split="test")
    assert store.ls() == []


def test_classes_are_the_union_over_splits(store, image_folder):
    shutil.rmtree(image_folder / "val" / "dog")
    view = load_manifest(store, image_folder, split="val")
    assert view.classes == ["cat", "dog", "eel"]
    assert view.counts() == {"cat": 2, "dog": 0, "eel": 2}
    assert sorted(set(view.labels())) == [0, 2]  # eel keeps index 2, as in train


def test_limit_is_per_class_by_name_hash_not_a_prefix(store, image_folder):
    full = load_manifest(store, image_folder, split="train")
    limited = load_manifest(store, image_folder, split="train", limit=3)
    assert limited.doc["limit"] == 3
    assert full.doc["limit"] is None
    assert limited.counts() == {"cat": 3, "dog": 3, "eel": 3}
    assert set(limited.names) <= set(full.names)
    assert limited.names != full.names[:9]
    prefixes = {c: [n for n in full.names if n.startswith(c)][:3] for c in full.classes}
    assert any([n for n in limited.names if n.startswith(c)] != p for c, p in prefixes.items())
    again = load_manifest(store, image_folder, split="train", limit=3)
    assert again.id == limited.id
    assert limited.id != full.id


def test_limit_hashes_only_the_kept_images(store, image_folder, monkeypatch):
    import vbstore.store._filestate as fs

    calls = []
    real = fs.read_and_hash
    monkeypatch.setattr(fs, "read_and_hash", lambda p: calls.append(p) or real(p))
    load_manifest(store, image_folder, split="train", limit=1)
    assert len(calls) == 3


def test_id_is_stable_and_independent_of_location(store, image_folder, tmp_path):
    first = load_manifest(store, image_folder, split="train")
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(image_folder, moved)
    copied = load_manifest(store, moved, split="train")
    assert copied.id == first.id
    assert copied.root == (moved / "train").resolve()
    assert str(tmp_path) not in store.read_bytes(first.id).decode()


def test_a_changed_image_changes_the_id(store, image_folder):
    before = load_manifest(store, image_folder, split="train")
    write_image(image_folder / "train" / "dog" / "02.png", seed=999)
    age(image_folder)
    after = load_manifest(store, image_folder, split="train")
    assert after.id != before.id
    assert after.digest != before.digest
    changed = [a["name"] for a, b in zip(after.samples, before.samples, strict=True) if a != b]
    assert changed == ["dog/02.png"]


def test_second_load_is_served_from_the_file_state_cache(store, image_folder, monkeypatch):
    import vbstore.data._manifest as manifest
    import vbstore.store._filestate as fs

    hashed, decoded = [], []
    real_hash, real_check = fs.read_and_hash, manifest.check_image
    monkeypatch.setattr(fs, "read_and_hash", lambda p: hashed.append(p) or real_hash(p))
    monkeypatch.setattr(manifest, "check_image",
                        lambda p, *data: decoded.append(p) or real_check(p, *data))
    first = load_manifest(store, image_folder, split="train")
    assert len(hashed) == len(decoded) == 15
    hashed.clear()
    decoded.clear()
    again = load_manifest(store, image_folder, split="train")
    assert again.id == first.id
    assert hashed == []
    assert decoded == []


def test_an_unchanged_folder_reads_its_manifest_only_when_used(store, image_folder, monkeypatch):
    first = load_manifest(store, image_folder, split="train")
    reads = []
    real = type(store).read_json
    monkeypatch.setattr(type(store), "read_json",
                        lambda self, oid, *a, **k: reads.append(oid) or real(self, oid, *a, **k))
    again = load_manifest(store, image_folder, split="train")
    assert (again.id, len(again)) == (first.id, 15)
    assert reads == []  # a cached result needs the id and the size: both come from the listing
    assert again.doc == first.doc
    assert reads == [first.id]
    lazy = load_manifest(store, image_folder, split="train")
    copy = pickle.loads(pickle.dumps(lazy))  # noqa: S301 - our own bytes, as a spawned loader worker gets them
    assert (copy.id, copy.root, copy.doc) == (first.id, first.root, first.doc)


def test_a_damaged_manifest_is_rebuilt_when_its_document_is_read(store, image_folder):
    first = load_manifest(store, image_folder, split="train")
    blob = store.files.path(first.id)
    blob.chmod(0o644)  # blobs are read-only
    blob.write_bytes(blob.read_bytes().replace(b"dog", b"cow"))
    again = load_manifest(store, image_folder, split="train")
    assert again.id == first.id
    assert again.doc == first.doc  # damaged: moved aside and rebuilt from the files
    assert store.verify(first.id)


def test_view_reopens_from_the_store(store, image_folder):
    view = load_manifest(store, image_folder, split="val")
    reopened = ManifestView.open(store, view.id[:10], image_folder / "val")
    assert reopened.doc == view.doc
    assert reopened.image_path(0) == view.image_path(0)
    assert view.labels(classes=["eel", "dog", "cat", "yak"]) == [2, 2, 1, 1, 0, 0]
    from vbstore.errors import UsageError

    with pytest.raises(UsageError, match="cat"):
        view.labels(classes=["dog", "eel"])
    with pytest.raises(UsageError, match="no target files"):
        view.target_path(0)


def test_nested_folders_inside_a_class_and_non_images_are_skipped(store, tmp_path):
    root = tmp_path / "d"
    write_image(root / "a" / "x.png", 1)
    write_image(root / "a" / "deeper" / "y.png", 2)
    write_image(root / "b" / "z.png", 3)
    (root / "b" / "notes.txt").write_text("not an image")
    (root / "b" / ".DS_Store").write_bytes(b"\0")
    view = load_manifest(store, root)
    assert view.names == ["a/deeper/y.png", "a/x.png", "b/z.png"]
