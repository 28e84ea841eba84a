"""The engine's dense path.

Pack-backed splits, aligned targets, verified bytes, a dense task end to end.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest
import torch
from PIL import Image

import vbstore
import vbstore.tasks
from vbstore.data import write_png
from vbstore.errors import BadInput, CorruptObject
from vbstore.tasks import Metric, Param, Task, register_task

WIDTH, HEIGHT = 40, 28  # not square: the shorter side is resized, the longer one cropped


def _write_split(root: Path, split: str, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    (root / split / "images").mkdir(parents=True)
    (root / split / "masks").mkdir(parents=True)
    for i in range(n):
        cut = int(rng.integers(8, WIDTH - 8))
        labels = np.zeros((HEIGHT, WIDTH), np.uint8)
        labels[:, cut:] = 1
        labels[: HEIGHT // 4, :] = 2 + (i % 2)  # a third (and fourth) class in the top band
        image = (np.stack([labels * 60, 255 - labels * 50, (labels == 2) * 200], -1)
                 + rng.integers(0, 20, (HEIGHT, WIDTH, 3))).astype(np.uint8)
        write_png(root / split / "images" / f"s{i:02d}.png", image)
        write_png(root / split / "masks" / f"s{i:02d}.png", labels)


@pytest.fixture(scope="module")
def dense_data(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("dense") / "data"
    _write_split(root, "train", 6, 0)
    _write_split(root, "val", 4, 1)
    return str(root)


class PixelPrior(Task):
    """A toy dense probe: predicts each pixel's most frequent train label; scores pixel accuracy."""

    level = "low"
    op_version = 1
    feature_mode = "dense"
    target_kind = "label_map"
    trains_head = True
    params = MappingProxyType({"classes": Param(4, "label values", minimum=2)})
    metrics = (Metric("pixel_acc", "higher", "fraction of pixels right"),)
    train_metrics = (Metric("train_pixels", "higher", "pixels seen"),)
    headline = "pixel_acc"

    def _fit_split(self, train, params, seed, class_names):
        counts = torch.zeros(params["classes"], *train.target_hw)
        for batch in train.batches(4, shuffle=True, seed=seed):
            assert batch.feats[-1].shape[1:] == (train.channels[-1], *train.grid_hw)
            counts.scatter_add_(0, batch.target.long().clamp(max=params["classes"] - 1),
                                torch.ones_like(batch.target, dtype=torch.float32))
        return {"prior": counts.argmax(0)}, {"train_pixels": float(counts.sum())}

    def _evaluate_split(self, head, split, params):
        right = total = 0
        for batch in split.batches(3):
            right += int((batch.target == head["prior"]).sum())
            total += batch.target.numel()
        return {"pixel_acc": right / total}


@pytest.fixture
def pixel_prior():
    """The toy task registered for one test only, so the registry's docs stay as shipped."""
    from vbstore.tasks import _registry

    register_task(name="test_pixel_prior")(PixelPrior)
    yield
    # only this name: built-in tasks the test loaded meanwhile stay registered (their modules
    # are imported once, so a registry restored without them could not get them back)
    del _registry._TASKS["test_pixel_prior"]


def _features(dense_data, split="val"):
    return vbstore.get_features("test_vit", dense_data, split=split, weights="random", mode="dense",
                                layers=(-2, -1), progress=False)


def _split(result):
    from vbstore.engine import PackSplit

    return PackSplit(result.backbone.store, result.id, result.manifest,
                     result.backbone.doc["preprocessing"], "label_map", None, "cpu")


def test_split_rows_and_targets_match_an_independent_reading(dense_data):
    result = _features(dense_data)
    split = _split(result)
    assert len(split) == 4
    assert split.layers == (-2, -1)
    batches = list(split.batches(3))
    assert [len(b.index) for b in batches] == [3, 1]
    for i, layer in enumerate((-2, -1)):
        got = torch.cat([b.feats[i] for b in batches])
        assert torch.equal(got, result.features.dense(layer).float())
    # the targets a task sees are PIL's own nearest resize + centre crop of the label files
    cfg = result.backbone.doc["preprocessing"]
    size = cfg["input_size"]
    scale = cfg["resize"] / HEIGHT
    new_w = int(cfg["resize"] * WIDTH / HEIGHT)
    left, top = round((new_w - size) / 2), round((cfg["resize"] - size) / 2)
    for position, target in enumerate(torch.cat([b.target for b in batches])):
        name = result.manifest.samples[position]["target_name"]
        label = Image.open(Path(dense_data) / "val" / name).resize(
            (new_w, round(HEIGHT * scale)), Image.Resampling.NEAREST)
        expected = np.asarray(label.crop((left, top, left + size, top + size)))
        assert target.shape == (size, size)
        assert np.array_equal(target.numpy(), expected)


def test_shuffled_batches_cover_every_row_once(dense_data):
    split = _split(_features(dense_data))
    seen = torch.cat([b.index for b in split.batches(3, shuffle=True, seed=5)])
    assert sorted(seen.tolist()) == [0, 1, 2, 3]
    again = torch.cat([b.index for b in split.batches(3, shuffle=True, seed=5)])
    assert torch.equal(seen, again)


def test_damaged_pack_never_reaches_a_task(dense_data):
    result = _features(dense_data)
    store = result.backbone.store
    pack = store.read_json(result.id)["packs"][0]
    path = store.path(pack)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-10:] = b"\x00" * 10  # finite values overwritten: the file still parses
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptObject, match="fsck"):
        next(_split(result).batches(2))


def test_target_edited_after_the_manifest_is_refused(tmp_path, dense_data):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(dense_data, copy)
    split = _split(_features(str(copy)))
    mask = sorted((copy / "val" / "masks").iterdir())[0]
    write_png(mask, np.ones((HEIGHT, WIDTH), np.uint8))
    with pytest.raises(BadInput, match="changed since the manifest"):
        list(split.batches(4))


@pytest.mark.usefixtures("pixel_prior")
def test_dense_task_end_to_end_and_cached(dense_data):
    first = vbstore.get_result("test_vit", "test_pixel_prior", dense_data, dense_data, split="val",
                               train_split="train", weights="random", progress=False)
    assert 0.5 < first.metrics["pixel_acc"] <= 1.0
    size = vbstore.Store().read_json(first.record.inputs["backbone"])["preprocessing"]["input_size"]
    assert first.record.train_metrics["train_pixels"] == 6 * size * size
    assert first.record.extractor["mode"] == "dense"
    assert first.record.sample_ci is None
    assert "dense task" in first.record.sample_ci_skipped  # stated, not silently missing
    second = vbstore.get_result("test_vit", "test_pixel_prior", dense_data, dense_data, split="val",
                                train_split="train", weights="random", progress=False)
    assert second.from_cache
    assert second.id == first.id


SCENES = "scenes:per_split=6,size=32"
DENSE_KW = dict(split="val", train_split="train", weights="random", progress=False)


@pytest.mark.parametrize(("task", "target", "params", "protocol"), [
    ("semantic_segmentation", "labels", {"num_classes": 5, "epochs": 2}, "visbench_semantic_seg"),
    ("depth", "depth", {"target_scale": 1000.0, "epochs": 2}, "probe3d"),
    ("surface_normal", "normals", {"epochs": 1}, "probe3d"),
    # targets from the pixels: the images are read alone, beside target folders
    ("orientation", None, {"epochs": 1}, "gradient_orientation"),
    ("corner", None, {"epochs": 1}, "visbench_shi_tomasi_regression"),
])
def test_dense_probes_run_end_to_end_on_scenes(task, target, params, protocol):
    """The built-in dense probes through the engine: packs, aligned targets, a cached answer."""
    kw = dict(DENSE_KW, data_options={"target": target} if target else None, params=params)
    first = vbstore.get_result("test_vit", task, SCENES, SCENES, **kw)
    assert first.record.protocol == protocol
    assert first.record.extractor["mode"] == "dense"
    assert set(first.metrics) == {m.name for m in vbstore.tasks.get_task(task).metrics}
    assert "train_loss" in first.record.train_metrics
    assert vbstore.get_result("test_vit", task, SCENES, SCENES, **kw).from_cache


def test_binary_masks_stored_as_0_255_read_non_zero_as_foreground():
    """VisBench's rule (``load_mask``): a 0/255 mask is foreground where non-zero, with no ignore
    region unless asked; the head learns the object, not a constant."""
    from vbstore.tasks import TensorSplit, get_task

    masks = torch.zeros(4, 16, 16, dtype=torch.int64)
    masks[:, 4:12, 4:12] = 255
    task = get_task("generic_segmentation")
    assert task.resolve_params({})["ignore_index"] == -1
    prepared = task._prepare(masks, task.resolve_params({}), "train")
    assert torch.equal(prepared, (masks == 255).long())
    split = TensorSplit([torch.randn(4, 8, 4, 4)], masks, target_kind="label_map")
    head, train = task.fit_split(split, {"epochs": 1}, seed=0)
    assert head
    assert train["train_loss"] > 0


def _mask_folder(root: Path, fg: int) -> str:
    for split, n in (("train", 3), ("val", 2)):
        (root / split / "images").mkdir(parents=True)
        (root / split / "masks").mkdir(parents=True)
        for i in range(n):
            mask = np.zeros((HEIGHT, WIDTH), np.uint8)
            mask[6:20, 10 + i:30] = fg
            write_png(root / split / "images" / f"s{i}.png",
                      np.stack([mask, mask // 2, 255 - mask], -1).astype(np.uint8))
            write_png(root / split / "masks" / f"s{i}.png", mask)
    return str(root)


def test_ignoring_every_foreground_label_is_refused_at_plan_time(tmp_path):
    """-p ignore_index=255 over 0/255 masks leaves nothing to learn: refused while planning,
    before a feature is extracted or anything stored (no object written)."""
    from vbstore.errors import UsageError

    data = _mask_folder(tmp_path / "masks255", 255)
    store = vbstore.Store()
    before = sorted(p for p in (store.root / "objects").rglob("*") if p.is_file())
    with pytest.raises(UsageError, match="every non-zero train label is ignore_index 255"):
        vbstore.get_result("test_vit", "generic_segmentation", data, data,
                           params={"ignore_index": 255, "epochs": 1}, **DENSE_KW)
    assert sorted(p for p in (store.root / "objects").rglob("*") if p.is_file()) == before
    # the same masks without the ignore region train and score
    result = vbstore.get_result("test_vit", "generic_segmentation", data, data,
                                params={"epochs": 1}, **DENSE_KW)
    assert result.record.params["ignore_index"] == -1
    assert 0.0 <= result.metrics["iou"] <= 1.0


def test_streaming_memory_does_not_grow_with_the_dataset(tmp_path):
    """Peak Python/numpy allocations while streaming a split: about the same at N and 4N images."""
    import tracemalloc

    peaks = {}
    for n in (8, 32):
        data = f"scenes:per_split={n},size=32"
        result = vbstore.get_features("test_vit", data, split="val", weights="random", mode="dense",
                                      progress=False, data_options={"target": "depth"})
        from vbstore.engine import PackSplit

        split = PackSplit(result.backbone.store, result.id, result.manifest,
                          result.backbone.doc["preprocessing"], "depth_map", 1000.0, "cpu")
        next(split.batches(4))  # open and verify the packs before measuring
        tracemalloc.start()
        for _batch in split.batches(4):
            pass
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[32] < 1.5 * peaks[8], peaks


def test_a_target_edited_between_epochs_is_refused(tmp_path, dense_data):
    """Files are hashed once per state: the next epoch after an edit hashes again and refuses."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(dense_data, copy)
    split = _split(_features(str(copy)))
    assert len(list(split.batches(4))) == 1  # the first epoch checks every file
    mask = sorted((copy / "val" / "masks").iterdir())[0]
    write_png(mask, np.ones((HEIGHT, WIDTH), np.uint8))
    with pytest.raises(BadInput, match="changed since the manifest"):
        list(split.batches(4))
