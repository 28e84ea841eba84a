
import shutil
import threading

import pytest
import torch

import vbstore
from vbstore.features import Features
from vbstore.store import gc


def test_second_get_features_does_no_forward(store, shapes, forwards):
    first = vbstore.get_features("test_vit", shapes, split="val", weights="random", store=store,
                                 input_size=32, progress=False)
    assert not first.from_cache
    assert first.stats["extracted"] == 30
    forwards.clear()
    second = vbstore.get_features("test_vit", shapes, split="val", weights="random", store=store,
                                  input_size=32, progress=False)
    assert second.from_cache
    assert second.id == first.id
    assert forwards == []
    x = second.features.pooled()
    assert x.shape == (30, first.backbone.doc["geometry"]["embed_dim"])
    assert torch.equal(x, first.features.pooled())


def test_same_image_through_two_datasets_is_extracted_once(store, shapes, tmp_path, forwards):
    other = tmp_path / "other"
    shutil.copytree(f"{shapes}/val/circle", other / "circle")
    shutil.copytree(f"{shapes}/val/square", other / "square")
    a = vbstore.get_features("test_cnn", shapes, split="val", weights="random", store=store,
                             input_size=32, progress=False)
    forwards.clear()
    b = vbstore.get_features("test_cnn", str(other), weights="random", store=store, input_size=32,
                             progress=False)
    assert forwards == []  # every image of the second dataset was already extracted
    assert b.stats["reused"] == 12
    assert b.stats["extracted"] == 0
    names_a = [s["name"] for s in a.manifest.doc["samples"]]
    names_b = [s["name"] for s in b.manifest.doc["samples"]]
    xa, xb = a.features.pooled(), b.features.pooled()
    for i, name in enumerate(names_b):
        assert torch.equal(xb[i], xa[names_a.index(name)])


def test_layers_modes_and_precision_are_separate_extractors(store, shapes, forwards):
    kw = dict(split="val", weights="random", store=store, input_size=32, progress=False, limit=2)
    both = vbstore.get_features("test_vit", shapes, layers=[0, -1], mode="both", **kw)
    assert both.stats["forward_passes"] == 1  # all layers from one forward per batch
    feats = Features(store, both.id)
    assert feats.dense(0).dtype == torch.float16
    assert feats.dense(0).ndim == 4
    assert feats.pooled(0).shape[0] == 10
    bf16 = vbstore.get_features("test_vit", shapes, precision="bf16", **kw)
    fp32 = vbstore.get_features("test_vit", shapes, **kw)
    assert len({both.id, bf16.id, fp32.id}) == 3
    assert not torch.equal(bf16.features.pooled(), fp32.features.pooled())


def test_missing_pack_is_recomputed(store, shapes, forwards):
    kw = dict(split="val", weights="random", store=store, input_size=32, progress=False)
    first = vbstore.get_features("test_cnn", shapes, **kw)
    before = first.features.pooled()
    # a result keeps the featureset (a gc root); --max-size may still evict the packs under it
    store.put_json({"task": "t", "op_version": 1, "metrics": {}, "params": {}, "inputs": {}},
                   "result", edges={"features": first.id})
    report = gc(store, grace=0, max_size=0)
    assert [o["kind"] for o in report.evicted] == ["pack"]
    assert report.removed == []
    forwards.clear()
    again = vbstore.get_features("test_cnn", shapes, **kw)
    assert not again.from_cache
    assert again.stats["extracted"] == 30
    after = again.features.pooled()
    assert torch.equal(after, before)
    assert again.id == first.id  # packs are canonical bytes: the same features, the same ids


def test_custom_backbone_module(store, shapes):
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU())
    from vbstore.backbones import BackboneCfg

    backbone = vbstore.CustomBackbone(conv, BackboneCfg(input_size=32, resize=32), name="tiny_conv")
    result = vbstore.get_features(backbone, shapes, split="val", store=store, limit=1,
                                  progress=False)
    assert result.features.pooled().shape == (5, 8)
    weights = store.read_json(result.backbone.doc["weights"])
    assert weights["tensor_hash"] == vbstore.tensor_identity(conv.state_dict())


@pytest.mark.parametrize("images", ["slow", "fast", "fast, some kept"])
def test_decode_threads_get_a_run_of_images_each_not_a_future_per_image(images, thread_submits,
                                                                       monkeypatch):
    """A future and its locks per image cost about what decoding a small image does: a batch
    goes to the decode threads as one run per thread, and comes back whole and in order. The
    first batch is loaded on the calling thread, timed; where images are fast to load, one
    thread loads the rest (more would fight for the GIL): the same batches either way."""
    import vbstore._threads
    from vbstore.features._extract import _prefetch

    monkeypatch.setattr(vbstore._threads, "DECODE_FAST_SECONDS",
                        0.0 if images == "slow" else 3600.0)
    loaded_by = []

    def load(i: int) -> torch.Tensor:
        loaded_by.append(threading.get_ident())
        return torch.full((3, 2, 2), float(i))

    # some images kept decoded, not all: the first batch's cost is not the rest's
    stream = _prefetch(load, list(range(100)), 32, 2, alike=images != "fast, some kept")
    batches = [next(stream)]
    # while the first batch is used, the next ones (up to 3) are already on the threads
    assert len(thread_submits) == (3 if images == "fast" else 6)
    batches += list(stream)
    assert [chunk for chunk, _ in batches] == [list(range(at, min(at + 32, 100)))
                                               for at in range(0, 100, 32)]
    for chunk, batch in batches:
        assert torch.equal(batch[:, 0, 0, 0], torch.tensor(chunk, dtype=torch.float32))
    assert set(loaded_by[:32]) == {threading.get_ident()}  # the first batch: here, timed
    assert threading.get_ident() not in loaded_by[32:]
    if images == "fast":
        assert len(set(loaded_by[32:])) == 1  # one decode thread
    # the 3 later batches: 2 threads each (the last: 4 images, 2 runs of 2), or 1 for fast ones
    assert len(thread_submits) == (3 if images == "fast" else 6)


def test_a_failing_forward_ends_the_decode_threads_at_once(store, shapes, monkeypatch):
    """The error's traceback holds the batches' generator: it is closed as the error leaves
    the extraction, so its decode threads are joined then, not whenever the traceback goes."""
    from vbstore.features import _extract

    def boom(self, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr(_extract.PackWriter, "add", boom)
    with pytest.raises(RuntimeError, match="boom") as failed:
        vbstore.get_features("test_cnn", shapes, split="val", store=store, weights="random",
                             input_size=32, progress=False, batch_size=4)
    assert failed.traceback  # still held here
    assert not [t for t in threading.enumerate() if t.name.startswith(_extract.DECODE_THREADS)]


def test_corrupt_image_is_a_clear_error_and_writes_nothing(store, tmp_path):
    from vbstore.errors import BadInput

    root = tmp_path / "bad" / "cls"
    root.mkdir(parents=True)
    (root / "a.jpg").write_bytes(b"\xff\xd8\xff\xe0 definitely not a jpeg")
    with pytest.raises(BadInput, match=r"a\.jpg"):
        vbstore.get_features("test_cnn", str(tmp_path / "bad"), weights="random", store=store,
                             progress=False)
    assert [o.kind for o in store.ls()] in ([], ["weights", "backbone"])


@pytest.mark.parametrize(
    "spec", ["test_vit", "test_cnn", "torchvision:resnet18", "timm:vit_tiny_patch16_224"])
def test_bf16_runs_a_bfloat16_copy_and_leaves_the_model_alone(spec):
    from vbstore.backbones import build_backbone

    backbone = build_backbone(spec, weights="random", input_size=32)
    twin = backbone.in_bfloat16()
    assert twin.dtype == torch.bfloat16
    assert backbone.dtype == torch.float32
    x = torch.randn(2, 3, 32, 32)
    layers = [0, -1]  # intermediate blocks too: hooks must land in the copy
    fp32 = backbone.extract(x, layers=layers)["layers"]
    bf16 = twin.extract(x, layers=layers)["layers"]
    for layer in layers:
        a, b = fp32[layer]["pooled"], bf16[layer]["pooled"]
        assert b.dtype == torch.bfloat16
        assert a.dtype == torch.float32
        assert torch.allclose(a, b.float(), atol=0.15, rtol=0.15)
        assert not torch.equal(a, b.float())
