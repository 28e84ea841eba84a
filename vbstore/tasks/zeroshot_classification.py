"""Zero-shot classification for CLIP models: class prompts through the text tower.

The CLIP paper's protocol, with the metric names CLIP_benchmark writes:

1. For each class, fill every template with the class name (underscores read as spaces, since
   manifest class names often come from folder names), embed the prompts with the model's
   text tower, L2-normalise each, average them and L2-normalise the mean.
2. Score each L2-normalised image feature against every class embedding (cosine similarity;
   CLIP's logit scale does not change a ranking, so it is left out).
3. ``acc1``/``acc5``: top-1 / top-min(5, C) accuracy (ties: lower class index first).
   ``mean_per_class_recall``: recall averaged over the classes present in the eval targets
   (balanced accuracy), from the top-1 predictions.

CLIP_benchmark reports ``acc5`` as NaN when there are fewer than five classes; vbstore never
writes NaN, so with C < 5 ``acc5`` is top-C accuracy, which is 1.0.

Prompts (:mod:`._prompts`): ``templates`` is a built-in set or a file of templates with
``{c}``; ``classnames`` a file of class names (default: the data's own); ``language`` names
their language, as CLIP_benchmark's ``--language`` does. ``ensemble`` is the seven-prompt
ImageNet ensemble published with CLIP; ``photo`` the single prompt "a photo of a {c}.".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError, field_ref
from ._base import Metric
from ._errors import TaskInputError
from ._prompts import DATASET_TEMPLATES, PROMPT_PARAMS, Multilingual, prompt_sets
from ._prompts import TEMPLATES as _BY_LANGUAGE
from ._registry import register_task

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.

TEMPLATES = _BY_LANGUAGE["en"]  # the English built-in sets, by name


def class_embeddings(
    text_encoder: Any, class_names: list[str], templates: list[str], dim: int, device: torch.device
) -> torch.Tensor:
    """(C, dim) unit vectors: the normalised mean of each class's normalised prompt embeddings.

    ``class_names`` are used as given: every template is filled with each.
    """
    from ._metrics import l2_normalise
    from ._text import encode

    texts = [template.format(c=name) for name in class_names for template in templates]
    emb = encode(text_encoder, texts, dim, device)
    return l2_normalise(emb.reshape(len(class_names), len(templates), dim).mean(dim=1))


def class_prompt_embeddings(
    text_encoder: Any, prompts: list[list[str]], dim: int, device: torch.device
) -> torch.Tensor:
    """(C, dim) unit vectors from class-specific prompts (CuPL): the normalised mean of each
    class's own prompt embeddings, however many it has."""
    import torch

    from ._metrics import l2_normalise
    from ._text import encode

    emb = encode(text_encoder, [t for texts in prompts for t in texts], dim, device)
    rows = torch.split(emb, [len(texts) for texts in prompts])
    return l2_normalise(torch.stack([row.mean(dim=0) for row in rows]))


def text_classifier(
    params: dict[str, Any], context: dict[str, Any], class_names: list[str], dim: int,
    device: torch.device,
) -> torch.Tensor:
    """The class embeddings of the params' language, templates and class names; with
    ``--templates dataset`` on data that recorded class-specific prompts (CuPL), those; with
    ``load_clfs``, the loaded classifiers' average (transposed to (C, dim), not normalised
    again, as CLIP_benchmark scores it), and the text tower is not run."""
    if params.get("load_clfs"):
        import torch

        from . import _classifiers

        loaded = (context.get("files") or {}).get("load_clfs")
        if not loaded:
            raise UsageError("load_clfs names classifiers that context['files'] lacks",
                             hint="run through vbstore (get result/run), which reads the "
                                  "files, or pass context['files']['load_clfs']")
        average = _classifiers.average(list(loaded))
        d, c = average.shape
        _classifiers.check_shape(d, c, dim, len(class_names))
        return average.T.to(device=device, dtype=torch.float32)
    prompts = context.get("dataset_prompts")
    if params["templates"] == DATASET_TEMPLATES and prompts:
        if len(prompts) != len(class_names):
            raise UsageError(f"the data gives prompts for {len(prompts)} classes, not "
                             f"{len(class_names)}", hint="read the data again")
        if params["classnames"] != "":
            raise UsageError("class-specific prompts name their classes themselves: a "
                             "classnames file has nothing to fill",
                             hint=f"drop {field_ref('param:classnames')}, or use a template set")
        return class_prompt_embeddings(context["text_encoder"], prompts, dim, device)
    templates, names = prompt_sets(params, context, class_names)
    return class_embeddings(context["text_encoder"], names, templates, dim, device)


def saved_classifier(
    params: dict[str, Any], context: dict[str, Any], class_names: list[str], dim: int,
) -> torch.Tensor:
    """The classifier CLIP_benchmark's ``--save_clf`` writes: (dim, C) float32 on the CPU, one
    column per class (:func:`text_classifier`, transposed, contiguous)."""
    import torch

    text = text_classifier(params, context, class_names, dim, torch.device("cpu"))
    return text.T.clone(memory_format=torch.contiguous_format)


@register_task(name="zeroshot_classification")
class ZeroShotClassification(Multilingual):
    """CLIP zero-shot classification from class-name prompts; acc1, acc5, mean_per_class_recall."""

    level = "high"
    op_version = 1
    target_kind = "class_index"
    shape = "text"
    stochastic = False
    params = PROMPT_PARAMS
    metrics = (
        Metric("acc1", "higher", "fraction of eval images whose best-matching prompt is right"),
        Metric("acc5", "higher", "fraction whose class is among the top min(5, classes)"),
        Metric("mean_per_class_recall", "higher", "top-1 recall averaged over present classes"),
    )
    headline = "acc1"

    def _evaluate_zero_shot(
        self,
        feats: torch.Tensor,
        targets: torch.Tensor,
        params: dict[str, Any],
        context: dict[str, Any],
    ) -> dict[str, float]:
        from ._checks import context_class_names
        from ._metrics import l2_normalise, mean_per_class_recall, ranking, topk_accuracies

        names = context_class_names(
            self.name, context, "evaluate on a classification manifest (one with class names)")
        if int(targets.max()) >= len(names):
            raise TaskInputError(
                f"eval targets hold class {int(targets.max())}; there are {len(names)} class names"
            )
        text = text_classifier(params, context, names, feats.shape[1], feats.device)
        scores = l2_normalise(feats) @ text.T
        acc1, acc5 = topk_accuracies(scores, targets)
        pred = ranking(scores)[:, 0]  # the same tie rule as acc1
        return {
            "acc1": acc1,
            "acc5": acc5,
            "mean_per_class_recall": mean_per_class_recall(pred, targets),
        }
