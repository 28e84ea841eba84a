"""``load_clfs`` at the task: the loaded classifiers (CLIP_benchmark's ``--load_clfs``) are
averaged as it averages them and scored instead of the text tower, in both zero-shot
classification tasks, and a classifier of the wrong shape is one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vbstore.errors import UsageError
from vbstore.tasks import get_task


def _no_text(texts):
    raise AssertionError("the text tower ran although classifiers were loaded")


def test_multilabel_scores_the_loaded_classifiers_average_and_runs_no_text_tower():
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(3)
    names = ["cat", "dog", "owl"]
    feats = torch.tensor(rng.normal(size=(40, 4)), dtype=torch.float32)
    targets = torch.tensor(rng.random((40, 3)) < 0.4, dtype=torch.float32)
    a = torch.tensor(rng.normal(size=(4, 3)), dtype=torch.float32)
    b = torch.tensor(rng.normal(size=(4, 3)), dtype=torch.float16)  # dtypes kept, then float32
    context = {"text_encoder": _no_text, "class_names": names, "files": {"load_clfs": [a, b]}}
    metrics = get_task("zeroshot_multilabel").evaluate_zero_shot(
        feats, targets, {"load_clfs": "stored-id"}, context)
    # A / 2 + B / 2 in order (B's half in float16), not normalised again
    classifier = (a / 2 + b / 2).float()
    scores = ((feats / feats.norm(dim=1, keepdim=True)) @ classifier).numpy()
    expected = np.mean([average_precision_score(targets[:, j].numpy(), scores[:, j])
                        for j in range(3)])
    assert metrics["mean_average_precision"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(("shape", "says"), [
    ((5, 3), "made for 5-dim embeddings, but this backbone's image embeddings have 4"),
    ((4, 2), "2 classes, but the data has 3"),
])
def test_a_classifier_of_another_shape_is_refused(shape, says):
    context = {"text_encoder": _no_text, "class_names": ["cat", "dog", "owl"],
               "files": {"load_clfs": [torch.zeros(shape)]}}
    with pytest.raises(UsageError, match=says):
        get_task("zeroshot_classification").evaluate_zero_shot(
            torch.ones(3, 4), torch.tensor([0, 1, 2]), {"load_clfs": "stored-id"}, context)
