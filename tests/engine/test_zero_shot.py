"""Zero-shot tasks end to end through a real open_clip model (random weights: no download)."""

import pytest

import vbstore
from vbstore.errors import UsageError

# open_clip's smallest built-in CLIP, random weights (no download): a real open_clip model whose
# towers cost a fifth of ViT-B-32's (the text tower, run on every prompt, most of it)
CLIP = "open_clip:ViT-S-32-alt"


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


@pytest.mark.slow
def test_linear_probe_trains_on_the_image_embedding_and_shares_it(store, shapes):
    kw = dict(weights="random", input_size=64, store=store, progress=False)
    zero = vbstore.get_result(CLIP, "zeroshot_classification", shapes, split="val", **kw)
    result = vbstore.get_result(CLIP, "linear_probe", shapes, shapes, split="val",
                                train_split="train", params={"fewshot_k": 2}, **kw)
    # five shapes: no lp_acc5 (CLIP_benchmark writes NaN there)
    assert set(result.metrics) == {"lp_acc1", "lp_mean_per_class_recall"}
    assert result.record.train_metrics == {"weight_decay": 0.0}
    # the same backbone (projected) and the same eval features as the zero-shot run
    assert result.record.inputs["backbone"] == zero.record.inputs["backbone"]
    assert result.record.inputs["eval_features"] == zero.record.inputs["eval_features"]
    with pytest.raises(UsageError, match="needs a CLIP backbone"):
        vbstore.get_result("test_vit", "linear_probe", shapes, shapes, split="val",
                           train_split="train", **kw)
