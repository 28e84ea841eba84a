"""Compositionality: pick the true caption among hard negatives, as CLIP_benchmark scores it.

CLIP_benchmark's ``image_caption_selection`` (``clip_benchmark/metrics/
image_caption_selection.py``, MIT) scores instances of I images and C captions where image i
belongs with caption i: SugarCrepe (one image; its caption, then a hard negative) and
Winoground (two images, two captions made of the same words). Per instance, with normalised
embeddings and ``scores = images @ captions.T``:

- ``text_acc``: every image's best caption (argmax over captions) is its own;
- ``image_acc``: every caption i < min(I, C) has image i as its best image (with one image
  this always holds: SugarCrepe's ``image_acc`` is 1);
- ``acc``: both; each metric is the mean over instances (taken in float32, as CLIP_benchmark
  takes it). Ties go to the first index, as ``torch.argmax`` breaks them.

Data: a list (CSV/JSONL) with a ``captions`` column; an instance is the run of consecutive
samples (in manifest order, i.e. by name) that carry the same caption list, and a sample's
place in its run is the caption it belongs with. SugarCrepe is one row per instance,
``{"image": ..., "captions": [caption, negative_caption]}``; Winoground two,
``NNN_0.png`` and ``NNN_1.png`` both with ``[caption_0, caption_1]``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._base import Metric, Param
from ._errors import TaskInputError
from ._registry import register_task
from ._shape_zero_shot import TextTask

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _text) load inside the functions
# that compute; importing a task only declares it, and a cached result reads nothing more.


def instances(captions: list[list[str]]) -> list[tuple[list[int], list[str]]]:
    """``(sample rows, captions)`` of each instance: runs of equal caption lists.

    Raises:
        TaskInputError: a sample without captions, or a run with more images than captions.
    """
    out: list[tuple[list[int], list[str]]] = []
    for row, texts in enumerate(captions):
        texts = [str(t) for t in texts]
        if len(texts) < 2:
            raise TaskInputError(f"sample {row} has {len(texts)} caption(s); an instance needs "
                                 "its caption and at least one negative",
                                 hint="give each image its instance's caption list, true first")
        if out and out[-1][1] == texts:
            out[-1][0].append(row)
        else:
            out.append(([row], texts))
    return out


@register_task(name="image_caption_selection")
class ImageCaptionSelection(TextTask):
    """Choose the true caption among hard negatives (SugarCrepe, Winoground); acc, text_acc."""

    level = "high"
    op_version = 1
    target_kind = "captions"
    shape = "text"
    stochastic = False
    protocol = "clip_benchmark_image_caption_selection"
    layout = ("a .csv/.jsonl list with a captions column: each image's instance captions, the "
              "one it belongs with at its place in the run of rows sharing them")
    params = MappingProxyType({"language": Param(
        "en", "language of the captions (CLIP_benchmark's --language: en, fr, jp...)")})
    metrics = (
        Metric("acc", "higher", "instances whose images and captions all pick each other"),
        Metric("text_acc", "higher", "instances where every image picks its own caption"),
        Metric("image_acc", "higher", "instances where every caption picks its own image"),
    )
    headline = "acc"

    def _evaluate_zero_shot(self, feats: torch.Tensor, targets: None, params: dict[str, Any],
                            context: dict[str, Any]) -> dict[str, float]:
        import torch

        from ._metrics import l2_normalise
        from ._text import encode

        groups = instances([list(c) for c in context.get("captions") or []])
        if sum(len(rows) for rows, _ in groups) != len(feats):
            raise TaskInputError("image_caption_selection needs each image's captions",
                                 hint="read the data as a list with a captions column")
        texts = [t for _, caps in groups for t in caps]
        text = encode(context["text_encoder"], texts, feats.shape[1], feats.device)
        images = l2_normalise(feats)
        image_ok = text_ok = both = 0
        start = 0
        for rows, caps in groups:
            if len(rows) > len(caps):
                raise TaskInputError(f"an instance has {len(rows)} images and {len(caps)} "
                                     "captions", hint="one caption per image at least")
            scores = images[rows] @ text[start:start + len(caps)].T
            start += len(caps)
            gt = torch.arange(min(len(rows), len(caps)), device=feats.device)
            text_right = bool((scores.argmax(dim=1)[:len(gt)] == gt).all())
            image_right = bool((scores.argmax(dim=0)[:len(gt)] == gt).all())
            text_ok += text_right
            image_ok += image_right
            both += text_right and image_right
        # CLIP_benchmark's mean: of a float32 tensor, read back as a Python float
        def mean(hits: int) -> float:
            return torch.tensor([1.0] * hits + [0.0] * (len(groups) - hits)).mean().item()

        return {"acc": mean(both), "text_acc": mean(text_ok), "image_acc": mean(image_ok)}
