"""CLIP_benchmark's collections and ``--task auto``, as facts of its 1.6.2 release.

Its ``--dataset`` takes a collection name (``vtab``, ``vtab+``, ``imagenet_robustness``,
``retrieval``, ``sugar_crepe``) for a list of datasets, its ``--pretrained_model`` a model
collection (``openai``, ``openclip_base``, ``openclip_multilingual``, ``openclip_all``), and its
``--task auto`` picks each dataset's task. The names are reproduced here as facts (a test
compares them with CLIP_benchmark's own in its process); no code is copied.
"""

from __future__ import annotations

from ..errors import UsageError

# CLIP_benchmark 1.6.2's dataset collections (clip_benchmark/datasets/builder.py,
# `dataset_collection`) and model collections (clip_benchmark/model_collection.py), as facts
_VTAB = ("vtab/caltech101", "vtab/cifar100", "vtab/clevr_count_all",
         "vtab/clevr_closest_object_distance", "vtab/diabetic_retinopathy", "vtab/dmlab",
         "vtab/dsprites_label_orientation", "vtab/dsprites_label_x_position", "vtab/dtd",
         "vtab/eurosat", "vtab/kitti_closest_vehicle_distance", "vtab/flowers", "vtab/pets",
         "vtab/pcam", "vtab/resisc45", "vtab/smallnorb_label_azimuth",
         "vtab/smallnorb_label_elevation")
DATASET_COLLECTIONS: dict[str, tuple[str, ...]] = {
    "vtab": (*_VTAB, "sun397", "vtab/svhn"),
    "vtab+": ("imagenet1k", "imagenetv2", "imagenet_sketch", "imagenet-a", "imagenet-r",
              "objectnet", "fer2013", "voc2007", "voc2007_multilabel", "sun397", "cars",
              "fgvc_aircraft", "mnist", "stl10", "gtsrb", "country211", "renderedsst2",
              "vtab/caltech101", "vtab/cifar10", *_VTAB[1:], "vtab/svhn"),
    "retrieval": ("mscoco_captions", "flickr8k", "flickr30k"),
    "imagenet_robustness": ("imagenetv2", "imagenet_sketch", "imagenet-a", "imagenet-r",
                            "objectnet"),
    "sugar_crepe": tuple(f"sugar_crepe/{n}" for n in (
        "add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att",
        "swap_obj")),
}
MODEL_COLLECTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "openai": (("ViT-B-32", "openai"), ("ViT-B-16", "openai"), ("ViT-L-14", "openai"),
               ("ViT-L-14-336", "openai")),
    "openclip_base": (("ViT-B-32-quickgelu", "laion400m_e32"), ("ViT-B-32", "laion2b_e16"),
                      ("ViT-B-32", "laion2b_s34b_b79k"), ("ViT-B-16", "laion400m_e32"),
                      ("ViT-B-16-plus-240", "laion400m_e32"), ("ViT-L-14", "laion400m_e32"),
                      ("ViT-L-14", "laion2b_s32b_b82k"), ("ViT-H-14", "laion2b_s32b_b79k"),
                      ("ViT-g-14", "laion2b_s12b_b42k")),
    "openclip_multilingual": (("xlm-roberta-base-ViT-B-32", "laion5b_s13b_b90k"),
                              ("xlm-roberta-large-ViT-H-14", "frozen_laion5b_s13b_b90k")),
}
# CLIP_benchmark's last collection: every (model, tag) the installed open_clip lists
OPENCLIP_ALL = "openclip_all"
# what `--task auto` runs (CLIP_benchmark's get_dataset_default_task); a multi-label set is
# vbstore's zeroshot_multilabel, where CLIP_benchmark runs it under zeroshot_classification
_RETRIEVAL_SETS = ("flickr30k", "flickr8k", "mscoco_captions", "multilingual_mscoco_captions",
                   "flickr30k-200", "crossmodal3600", "xtd10", "xtd200")


def clip_benchmark_task(data: str) -> str:
    """The task CLIP_benchmark's ``--task auto`` runs on a dataset (``cb:NAME``, ``wds/NAME``
    or a bare name): retrieval on caption sets, caption selection on compositionality sets,
    zero-shot classification otherwise (``zeroshot_multilabel`` on a multi-label set)."""
    name = data.removeprefix("cb:").partition("@")[0].removeprefix("wds/")
    if name in _RETRIEVAL_SETS:
        return "zeroshot_retrieval"
    if name.startswith("sugar_crepe") or name == "winoground":
        return "image_caption_selection"
    if name.endswith("_multilabel"):
        return "zeroshot_multilabel"
    return "zeroshot_classification"


def clip_benchmark_models(name: str) -> list[str]:
    """The open_clip specs of a CLIP_benchmark model collection (``openai``, ``openclip_base``,
    ``openclip_multilingual``, ``openclip_all``: every pretrained tag the installed open_clip
    lists).

    Raises:
        UsageError: not a collection name.
    """
    if name == OPENCLIP_ALL:
        try:
            import open_clip  # heavy (torch): only for this collection
        except ImportError:
            raise UsageError("openclip_all lists what the installed open_clip has, and it is "
                             "not installed", hint="pip install 'vbstore[clip]'") from None
        pairs: tuple[tuple[str, str], ...] = tuple(open_clip.list_pretrained())
    elif name in MODEL_COLLECTIONS:
        pairs = MODEL_COLLECTIONS[name]
    else:
        raise UsageError(f"{name!r} is neither a file nor a CLIP_benchmark model collection",
                         hint="one of " + ", ".join([*MODEL_COLLECTIONS, OPENCLIP_ALL])
                         + ", or a file of MODEL,PRETRAINED lines")
    return [f"open_clip:{model}@{tag}" for model, tag in pairs]
