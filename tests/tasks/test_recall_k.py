"""``zeroshot_retrieval``'s ``recall_k`` (CLIP_benchmark's ``--recall_k``): the cut-offs name the
metrics; the defaults are the same question (the same id) as leaving it out."""

import pytest

import vbstore
from vbstore.errors import UsageError
from vbstore.tasks import get_task

CLIP = "open_clip:ViT-B-32@laion2b_s34b_b79k"


def test_recall_k_is_canonical_and_names_the_metrics():
    task = get_task("zeroshot_retrieval")
    assert task.resolve_params({"recall_k": "10, 5 5"})["recall_k"] == "5,10"
    assert task.resolve_params({"recall_k": [10, 1, 5]})["recall_k"] == ""  # the defaults
    assert task.resolve_params({"recall_k": 5})["recall_k"] == "5"
    params = task.resolve_params({"recall_k": "5"})
    assert [m.name for m in task.metrics_for(params)] == [
        "image_retrieval_recall@5", "text_retrieval_recall@5"]
    assert task.headline_for(params) == "image_retrieval_recall@5"
    assert task.headline_for({}) == "image_retrieval_recall@1"
    assert task.keyed_params(task.resolve_params({})) == {"language": "en"}
    for bad in ("0", "x", "1.5", "-5"):
        with pytest.raises(UsageError, match="is not an integer >= 1"):
            task.resolve_params({"recall_k": bad})


@pytest.mark.slow
def test_recall_k_scores_only_those_cut_offs(store):
    kw = dict(weights="random", input_size=64, store=store, progress=False)
    full = vbstore.get_result(CLIP, "zeroshot_retrieval", "skimage:samples", **kw)
    five = vbstore.get_result(CLIP, "zeroshot_retrieval", "skimage:samples",
                              params={"recall_k": 5}, **kw)
    assert set(five.metrics) == {"image_retrieval_recall@5", "text_retrieval_recall@5"}
    assert five.metrics["image_retrieval_recall@5"] == full.metrics["image_retrieval_recall@5"]
    assert five.metrics["text_retrieval_recall@5"] == full.metrics["text_retrieval_recall@5"]
    assert five.record.params["recall_k"] == "5"
    same = vbstore.get_result(CLIP, "zeroshot_retrieval", "skimage:samples",
                              params={"recall_k": "1,5,10"}, **kw)
    assert same.id == full.id
    assert "recall_k" not in full.record.params
