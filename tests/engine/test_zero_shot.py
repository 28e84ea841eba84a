"""Zero-shot tasks end to end through a real open_clip model (random weights: no download)."""

import pytest

import vbstore
from vbstore.errors import UsageError

CLIP = "open_clip:ViT-B-32@laion2b_s34b_b79k"


@pytest.mark.slow
def test_zero_shot_classification_and_retrieval_with_the_text_tower(store, shapes):
    kw = dict(weights="random", input_size=64, store=store, progress=False)
    result = vbstore.get_result(CLIP, "zeroshot_classification", shapes, split="val", **kw)
    assert set(result.metrics) == {"acc1", "acc5", "mean_per_class_recall"}
    assert result.record.weights_kind == "random"
    backbone = store.read_json(result.record.inputs["backbone"])
    # compared with text: the projected embedding
    assert backbone["params"]["use_projection"] is True
    captions = vbstore.get_result(CLIP, "zeroshot_retrieval", "skimage:samples", **kw)
    assert {"image_retrieval_recall@1", "text_retrieval_recall@5"} <= set(captions.metrics)
    assert captions.record.data["eval"]["samples"] == 8
    with pytest.raises(UsageError, match="zero-shot"):
        vbstore.get_result(CLIP, "zeroshot_classification", shapes, shapes, split="val",
                           train_split="train", **kw)
