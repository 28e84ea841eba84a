"""Zero-shot CLIP tasks with fake deterministic text towers whose answers are known."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.metrics import balanced_accuracy_score

from vbstore.errors import UsageError
from vbstore.tasks import TaskInputError, get_task
from vbstore.tasks.zeroshot_classification import TEMPLATES

CLASSES = ["cat", "dog", "golden_retriever"]


def one_hot(indices, n):
    return torch.nn.functional.one_hot(torch.tensor(indices), n).float()


def test_zeroshot_classification_by_hand(class_name_encoder):
    # The encoder sees "golden retriever" (underscore read as a space), never "golden_retriever".
    encoder = class_name_encoder(["cat", "dog", "golden retriever"])
    targets = torch.tensor([0, 0, 0, 1, 2, 2])
    predicted = [0, 0, 1, 1, 2, 0]  # each image points straight at one class's prompts
    metrics = get_task("zeroshot_classification").evaluate_zero_shot(
        one_hot(predicted, 3), targets, {}, {"text_encoder": encoder, "class_names": CLASSES}
    )
    assert metrics["acc1"] == pytest.approx(4 / 6)
    assert metrics["acc5"] == 1.0  # three classes: top-3
    # Recall per class: 2/3, 1/1, 1/2.
    assert metrics["mean_per_class_recall"] == pytest.approx((2 / 3 + 1 + 1 / 2) / 3)
    prompts = [p for call in encoder.calls for p in call]
    assert len(prompts) == 3 * len(TEMPLATES["ensemble"]) == 21
    assert "a photo of the small golden retriever." in prompts


def test_prompt_embeddings_are_normalised_then_averaged(lookup_encoder):
    # Class x: six prompts on axis 0 and one, (1, 0, 3), leaning on axis 2. Class y: every
    # prompt on axis 1. The image (0, 0.2, 1) sits near axis 2.
    # - CLIP's recipe: normalise each prompt, average, normalise. x's lean shrinks to 0.149 on
    #   axis 2, so y (0.2 on axis 1) wins.
    # - First prompt only, or averaging before normalising, would leave x a large axis-2
    #   component (0.95 / 0.39), and x would win.
    table = {}
    for j, template in enumerate(TEMPLATES["ensemble"]):
        table[template.format(c="x")] = [1.0, 0.0, 3.0 if j == 0 else 0.0]
        table[template.format(c="y")] = [0.0, 1.0, 0.0]
    encoder = lookup_encoder(table)
    metrics = get_task("zeroshot_classification").evaluate_zero_shot(
        torch.tensor([[0.0, 0.2, 1.0]]),
        torch.tensor([1]),
        {},
        {"text_encoder": encoder, "class_names": ["x", "y"]},
    )
    assert metrics["acc1"] == 1.0


@pytest.mark.parametrize("seed", [0, 1])
def test_zeroshot_classification_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_classes, dim = 12, 8
    names = [f"class{i:02d}" for i in range(n_classes)]
    vectors = rng.normal(size=(n_classes, dim))
    table = {t.format(c=n): vectors[i] for i, n in enumerate(names) for t in TEMPLATES["photo"]}
    targets = rng.integers(0, n_classes, size=80)
    images = vectors[targets] + rng.normal(size=(80, dim)) * 1.5

    class Encoder:
        def __call__(self, texts):
            return torch.tensor(np.stack([table[t] for t in texts]) * 4.0)  # scale is irrelevant

    metrics = get_task("zeroshot_classification").evaluate_zero_shot(
        torch.tensor(images, dtype=torch.float32),
        torch.tensor(targets),
        {"templates": "photo"},
        {"text_encoder": Encoder(), "class_names": names},
    )
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = (images / np.linalg.norm(images, axis=1, keepdims=True)) @ unit.T
    order = np.argsort(-scores, axis=1, kind="stable")
    assert metrics["acc1"] == pytest.approx(np.mean(order[:, 0] == targets))
    assert metrics["acc5"] == pytest.approx(
        np.mean([t in o[:5] for t, o in zip(targets, order, strict=True)])
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = balanced_accuracy_score(targets, order[:, 0])
    assert metrics["mean_per_class_recall"] == pytest.approx(expected)
    assert 0.2 < metrics["acc1"] < metrics["acc5"] < 1.0


def test_zeroshot_classification_refusals(class_name_encoder):
    task = get_task("zeroshot_classification")
    x, y = one_hot([0, 1], 3), torch.tensor([0, 1])
    encoder = class_name_encoder(["cat", "dog", "golden retriever"])
    with pytest.raises(UsageError, match="needs a text encoder"):
        task.evaluate_zero_shot(x, y, {}, {"class_names": CLASSES})
    with pytest.raises(UsageError, match="class names"):
        task.evaluate_zero_shot(x, y, {}, {"text_encoder": encoder})
    with pytest.raises(UsageError, match="zero-shot and takes no training data"):
        task.fit(x, y, seed=0, class_names=CLASSES)
    with pytest.raises(TaskInputError, match="3 dims but image features have 5"):
        task.evaluate_zero_shot(
            torch.ones(2, 5), y, {}, {"text_encoder": encoder, "class_names": CLASSES}
        )
    with pytest.raises(TaskInputError, match="must return"):
        task.evaluate_zero_shot(
            x, y, {}, {"text_encoder": lambda texts: torch.ones(3), "class_names": CLASSES}
        )
    with pytest.raises(TaskInputError, match="hold class 2"):
        task.evaluate_zero_shot(
            x, torch.tensor([0, 2]), {}, {"text_encoder": encoder, "class_names": CLASSES[:2]}
        )


def retrieval_case(lookup_encoder):
    images = torch.eye(3)
    captions = [["c00", "c01"], ["c10"], ["c20"]]
    encoder = lookup_encoder(
        {"c00": [1, 0, 0], "c01": [0.2, 1, 0], "c10": [0.1, 1, 0], "c20": [1, 0, 0.5]}
    )
    return images, captions, encoder


def test_zeroshot_retrieval_by_hand(lookup_encoder):
    # text -> image: c00 finds image 0 first; c01 finds image 1 first (its image 0 is 2nd);
    # c10 finds image 1; c20 finds image 0 first (its image 2 is 2nd). Recall@1 = 2/4.
    # image -> text: image 0's best caption is c00 (1.0 vs c20's 0.89); image 1's is c10;
    # image 2's only non-zero one is c20. Recall@1 = 3/3.
    images, captions, encoder = retrieval_case(lookup_encoder)
    metrics = get_task("zeroshot_retrieval").evaluate_zero_shot(
        images, None, {}, {"text_encoder": encoder, "captions": captions}
    )
    assert metrics == {
        "image_retrieval_recall@1": 0.5,
        "image_retrieval_recall@5": 1.0,
        "image_retrieval_recall@10": 1.0,
        "text_retrieval_recall@1": 1.0,
        "text_retrieval_recall@5": 1.0,
        "text_retrieval_recall@10": 1.0,
    }


def test_zeroshot_retrieval_against_brute_force():
    rng = np.random.default_rng(0)
    n_images, dim = 40, 6
    images = rng.normal(size=(n_images, dim))
    captions = [[f"img{i}-cap{j}" for j in range(1 + i % 3)] for i in range(n_images)]
    table = {c: images[i] + rng.normal(size=dim) * 1.2 for i, cs in enumerate(captions) for c in cs}

    def encoder(texts):
        return torch.tensor(np.stack([table[t] for t in texts]))

    metrics = get_task("zeroshot_retrieval").evaluate_zero_shot(
        torch.tensor(images, dtype=torch.float32),
        None,
        {},
        {"text_encoder": encoder, "captions": captions},
    )
    texts = [c for cs in captions for c in cs]
    owner = np.array([i for i, cs in enumerate(captions) for _ in cs])
    t = np.stack([table[c] for c in texts])
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    v = images / np.linalg.norm(images, axis=1, keepdims=True)
    scores = t @ v.T  # (texts, images), as CLIP_benchmark lays it out
    positive = owner[:, None] == np.arange(n_images)[None, :]
    for k in (1, 5, 10):
        t2i = [positive[i, np.argsort(-scores[i], kind="stable")[:k]].any() for i in range(len(t))]
        i2t = [
            positive[:, j][np.argsort(-scores[:, j], kind="stable")[:k]].any()
            for j in range(n_images)
        ]
        assert metrics[f"image_retrieval_recall@{k}"] == pytest.approx(np.mean(t2i))
        assert metrics[f"text_retrieval_recall@{k}"] == pytest.approx(np.mean(i2t))
    assert 0 < metrics["image_retrieval_recall@1"] < 1


def test_zeroshot_retrieval_refusals(lookup_encoder):
    images, captions, encoder = retrieval_case(lookup_encoder)
    task = get_task("zeroshot_retrieval")
    with pytest.raises(UsageError, match=r"context\['captions'\]"):
        task.evaluate_zero_shot(images, None, {}, {"text_encoder": encoder})
    with pytest.raises(TaskInputError, match="image 1 has no caption"):
        task.evaluate_zero_shot(
            images, None, {}, {"text_encoder": encoder, "captions": [["c00"], [], ["c20"]]}
        )
    with pytest.raises(TaskInputError, match="one list of captions per image"):
        task.evaluate_zero_shot(
            images, None, {}, {"text_encoder": encoder, "captions": captions[:2]}
        )
    with pytest.raises(TaskInputError, match="targets must be None"):
        task.evaluate_zero_shot(
            images, torch.arange(3), {}, {"text_encoder": encoder, "captions": captions}
        )


def test_zeroshot_multilabel_is_sklearn_macro_ap(class_name_encoder):
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(3)
    names = ["cat", "dog", "golden_retriever", "owl"]
    encoder = class_name_encoder(["cat", "dog", "golden retriever", "owl"])
    feats = torch.tensor(rng.normal(size=(40, 4)), dtype=torch.float32)
    targets = torch.tensor(rng.random((40, 4)) < 0.3, dtype=torch.float32)
    targets[:, 3] = 0  # no positive: left out, not counted as 0
    metrics = get_task("zeroshot_multilabel").evaluate_zero_shot(
        feats, targets, {"templates": "photo"}, {"text_encoder": encoder, "class_names": names})
    # the class embeddings are the one-hot axes, so a label's score is the image's normalised
    # coordinate on its axis
    scores = (feats / feats.norm(dim=1, keepdim=True)).numpy()
    expected = np.mean([average_precision_score(targets[:, j].numpy(), scores[:, j])
                        for j in range(3)])
    assert metrics["mean_average_precision"] == pytest.approx(expected, abs=1e-6)


def test_zeroshot_multilabel_refuses_single_label_targets(class_name_encoder):
    encoder = class_name_encoder(["cat", "dog"])
    with pytest.raises(TaskInputError, match="multi-hot"):
        get_task("zeroshot_multilabel").evaluate_zero_shot(
            torch.eye(2), torch.tensor([0, 1]), {},
            {"text_encoder": encoder, "class_names": ["cat", "dog"]})
