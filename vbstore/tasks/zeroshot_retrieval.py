"""Zero-shot image-text retrieval for CLIP models, as CLIP_benchmark defines it.

Data: N images, each with one or more captions (``context["captions"][i]`` belongs to image
row ``i``; eval targets are ``None``). Every caption is embedded by the text tower; images and
captions are L2-normalised and scored by cosine similarity.

- ``image_retrieval_recall@k`` (text -> image): for each caption, whether its image is among
  the k images most similar to it; averaged over captions.
- ``text_retrieval_recall@k`` (image -> text): for each image, whether at least one of its
  captions is among the k captions most similar to it; averaged over images.

k is 1, 5 and 10 (``recall_k``: CLIP_benchmark's ``--recall_k``, e.g. ``5``, names other
cut-offs, and the metrics follow them), capped at the candidate count. Ties in similarity keep
candidate order. The headline is the image recall at the smallest k.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, field_ref
from ._base import Metric, Param
from ._errors import TaskInputError
from ._prompts import Multilingual
from ._registry import register_task

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.

RECALL_KS = (1, 5, 10)


def parse_recall_k(value: Any) -> str:
    """A ``recall_k`` value (``"5"``, ``"1,5"``, ``"1 5"``, an int or a list of ints) in
    canonical form: ascending, distinct, comma separated; the defaults read as ``""``.

    Raises:
        UsageError: no k, or a k that is not an integer >= 1.
    """
    if isinstance(value, (list, tuple)):
        parts = [str(v) for v in value]
    else:
        parts = str(value).replace(",", " ").split()
    if not parts and str(value).strip() == "":
        return ""
    ks = set()
    for part in parts:
        try:
            k = int(part)
        except ValueError:
            k = 0
        if k < 1 or str(k) != part.strip():
            raise UsageError(f"zeroshot_retrieval recall_k {part!r} is not an integer >= 1",
                             hint=f"e.g. {field_ref('param:recall_k', '5')} or recall_k=1,5,10 "
                                  "(CLIP_benchmark's "
                                  "--recall_k)")
        ks.add(k)
    if not ks:
        raise UsageError("zeroshot_retrieval recall_k names no k",
                         hint=f"e.g. {field_ref('param:recall_k', '5')}")
    ordered = tuple(sorted(ks))
    return "" if ordered == RECALL_KS else ",".join(map(str, ordered))


def recall_ks(params: Mapping[str, Any] | None) -> tuple[int, ...]:
    """The cut-offs of resolved params or a record's (the defaults absent or ``""``)."""
    given = str((params or {}).get("recall_k", ""))
    return tuple(int(k) for k in given.split(",")) if given else RECALL_KS


def retrieval_metrics(ks: tuple[int, ...]) -> tuple[Metric, ...]:
    """The metrics scored at ``ks``."""
    return (
        *(Metric(f"image_retrieval_recall@{k}", "higher", f"text->image: its image in top {k}")
          for k in ks),
        *(Metric(f"text_retrieval_recall@{k}", "higher", f"image->text: a caption in top {k}")
          for k in ks),
    )


def _captions(context: dict[str, Any], n_images: int) -> tuple[list[str], list[int]]:
    """Flatten the per-image captions into (texts, image index of each text)."""
    from ._text import strings

    if "captions" not in context:
        raise UsageError(
            "zeroshot_retrieval needs the captions in context['captions']",
            hint="evaluate on an image-caption manifest",
        )
    captions = context["captions"]
    if isinstance(captions, str) or not isinstance(captions, Sequence) or len(captions) != n_images:
        raise TaskInputError(
            f"context['captions'] must hold one list of captions per image ({n_images})"
        )
    texts: list[str] = []
    owners: list[int] = []
    for i, per_image in enumerate(captions):
        per_image = strings(per_image, f"captions of image {i}")
        if not per_image:
            raise TaskInputError(f"image {i} has no caption; each image needs at least one")
        texts.extend(per_image)
        owners.extend([i] * len(per_image))
    return texts, owners


@register_task(name="zeroshot_retrieval")
class ZeroShotRetrieval(Multilingual):
    """CLIP image<->text retrieval; image_/text_retrieval_recall@1/5/10."""

    level = "high"
    op_version = 1
    target_kind = "captions"
    shape = "text"
    stochastic = False
    # the captions' language, recorded (CLIP_benchmark's --language); captions are the data's own
    params = MappingProxyType({
        "language": Param(
            "en", "language of the captions (CLIP_benchmark's --language: en, fr, jp...)"),
        "recall_k": Param("", "recall@k cut-offs, e.g. 5 (CLIP_benchmark's --recall_k; "
                          "default 1,5,10); they name the metrics", added=True),
    })
    metrics = retrieval_metrics(RECALL_KS)
    headline = "image_retrieval_recall@1"

    def resolve_params(self, user_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """See :meth:`Task.resolve_params`; ``recall_k`` in canonical form, ``""`` for the
        defaults (the same question as leaving it out, the same id).

        Raises:
            UsageError: also a k that is not an integer >= 1.
        """
        given = dict(user_params or {})
        if "recall_k" in given:
            given["recall_k"] = parse_recall_k(given["recall_k"])
        return super().resolve_params(given)

    def metrics_for(self, params: Mapping[str, Any] | None = None) -> tuple[Metric, ...]:
        """The metrics ``recall_k`` names (the defaults: :attr:`metrics`)."""
        return retrieval_metrics(recall_ks(params))

    def headline_for(self, params: Mapping[str, Any] | None = None) -> str:
        """The image recall at the smallest k (the defaults: ``image_retrieval_recall@1``)."""
        return f"image_retrieval_recall@{min(recall_ks(params))}"

    def _evaluate_zero_shot(
        self,
        feats: torch.Tensor,
        targets: None,
        params: dict[str, Any],
        context: dict[str, Any],
    ) -> dict[str, float]:
        import torch

        from ._metrics import l2_normalise, ranking, row_blocks
        from ._text import encode

        texts, owners = _captions(context, len(feats))
        images = l2_normalise(feats)
        text = encode(context["text_encoder"], texts, feats.shape[1], feats.device)
        owner = torch.tensor(owners, dtype=torch.int64, device=feats.device)
        ks = recall_ks(params)
        kmax = max(ks)

        image_hits = dict.fromkeys(ks, 0)
        for rows in row_blocks(len(text), len(images)):
            top = ranking(text[rows] @ images.T)[:, :kmax] == owner[rows, None]
            for k in ks:
                image_hits[k] += int(top[:, :k].any(dim=1).sum())

        text_hits = dict.fromkeys(ks, 0)
        for rows in row_blocks(len(images), len(text)):
            image_index = torch.arange(rows.start, rows.stop, device=feats.device)
            top = owner[ranking(images[rows] @ text.T)[:, :kmax]] == image_index[:, None]
            for k in ks:
                text_hits[k] += int(top[:, :k].any(dim=1).sum())

        metrics = {f"image_retrieval_recall@{k}": image_hits[k] / len(text) for k in ks}
        metrics.update(
            {f"text_retrieval_recall@{k}": text_hits[k] / len(images) for k in ks}
        )
        return metrics
