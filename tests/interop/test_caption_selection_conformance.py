"""``image_caption_selection`` equals CLIP_benchmark 1.6.2's own evaluation on SugarCrepe- and
Winoground-shaped data, with a small random CLIP-like model registered through the public API
(its loader hands CLIP_benchmark the same model, transform and tokenizer)."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import torch
from clip_support import SIZE, clip_loader, registered_clip
from PIL import Image

import vbstore

pytestmark = pytest.mark.slow
WORDS = ["a", "red", "dog", "on", "blue", "cat", "under", "green", "table", "the", "big", "box"]


load_tiny = clip_loader(ordered=True, normalize=True)


@pytest.fixture(scope="module", autouse=True)
def tiny():
    with registered_clip("ics_clip", load_tiny):
        yield


def _caption(rng):
    return " ".join(rng.choice(WORDS, size=5))


def _data(folder, instances, images_per_instance, seed):
    """A JSONL list: each image with its instance's captions (its own at its place)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    lines, groups = [], []
    for i in range(instances):
        words = _caption(rng).split()
        swapped = list(words)
        swapped[0], swapped[-1] = swapped[-1], swapped[0]
        caps = [" ".join(words), " ".join(swapped) if images_per_instance == 2 else _caption(rng)]
        pictures = []
        for j in range(images_per_instance):
            pixels = rng.integers(0, 256, size=(SIZE, SIZE, 3), dtype=np.uint8)
            name = f"{i:03d}_{j}.png"
            Image.fromarray(pixels).save(folder / name)
            pictures.append(folder / name)
            lines.append(json.dumps({"image": name, "captions": caps}))
        groups.append((pictures, caps))
    (folder / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return groups


def _clip_benchmark(groups):
    metric = importlib.import_module("clip_benchmark.metrics.image_caption_selection")
    model, transform, tokenizer = load_tiny("tiny", "v1")
    model.eval()
    batches = [(torch.stack([transform(Image.open(p).convert("RGB")) for p in pictures])[None],
                [caps]) for pictures, caps in groups]
    return metric.evaluate(model, batches, tokenizer, device="cpu", amp=False)


@pytest.mark.parametrize(("images", "instances"), [(1, 12), (2, 9)])  # SugarCrepe, Winoground
def test_image_caption_selection_equals_clip_benchmark(clip_benchmark, store, tmp_path, images,
                                                        instances):
    groups = _data(tmp_path / "data", instances, images, seed=images)
    result = vbstore.get_result("ics_clip:tiny@v1", "image_caption_selection",
                                str(tmp_path / "data" / "samples.jsonl"), store=store,
                                progress=False)
    theirs = _clip_benchmark(groups)
    assert result.metrics == theirs
    if images == 1:
        assert result.metrics["image_acc"] == 1.0  # one image: always its own
    assert 0 < result.metrics["text_acc"] < 1  # the data tells the metrics apart
