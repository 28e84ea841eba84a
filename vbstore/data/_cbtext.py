"""``cb:`` caption and compositionality sets: what CLIP_benchmark's builder reads for them.

CLIP_benchmark builds its retrieval sets (``mscoco_captions``, ``flickr30k``, ``flickr8k`` and
the multilingual ones) as image + list of captions, SugarCrepe (``sugar_crepe/<subset>``) as
image + ``[caption, negative_caption]`` and Winoground as two images + their two captions. Each
becomes a sample list with a ``captions`` column, in the layouts vbstore's text tasks read:
``zeroshot_retrieval`` (each image with its captions) and ``image_caption_selection`` (each
image with its instance's captions, its own at its place: Winoground's two images are the
samples ``NNN_0`` and ``NNN_1``).

Offline, the files CLIP_benchmark would fetch (its builders call ``wget`` or the Hub whenever
one is missing, whatever ``download`` says) are checked first, so a missing one is one line
naming the root and the file. An image is kept with its own bytes where the dataset names its
file, so the same images in a folder have the same image ids.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import UsageError, field_ref
from ._sources import Record

# CLIP_benchmark's builder names (get_dataset_default_task in its builder.py)
RETRIEVAL = ("mscoco_captions", "flickr30k", "flickr8k", "multilingual_mscoco_captions",
             "flickr30k-200", "crossmodal3600", "xtd10", "xtd200")
# the multilingual retrieval sets: their module in clip_benchmark.datasets
_MULTILINGUAL = {"multilingual_mscoco_captions": "multilingual_mscoco",
                 "flickr30k-200": "flickr30k_200", "crossmodal3600": "crossmodal3600",
                 "xtd10": "xtd10", "xtd200": "xtd200"}
_SUGAR_CREPE = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att",
                "swap_obj")
# sets whose captions exist in one language: CLIP_benchmark reads no other
_ENGLISH_ONLY = ("mscoco_captions", "winoground")


def is_text_set(name: str) -> bool:
    """Whether ``cb:NAME`` is a caption or compositionality set (captions, not classes)."""
    return name in RETRIEVAL or name == "winoground" or name.startswith("sugar_crepe")


def builder_task(name: str) -> str:
    """The task CLIP_benchmark builds ``name`` for (what decides whether it loads templates)."""
    if name in RETRIEVAL:
        return "zeroshot_retrieval"
    if is_text_set(name):
        return "image_caption_selection"
    return "zeroshot_classification"


def check_on_disk(name: str, root: Path, split: str, language: str) -> None:
    """Refuse, in one line, a text set whose files CLIP_benchmark would fetch (offline).

    Raises:
        UsageError: a language the set has no captions in, or a missing file under ``root``.
    """
    if language != "en" and (name in _ENGLISH_ONLY or name.startswith("sugar_crepe")):
        raise UsageError(f"cb:{name} has English captions only; CLIP_benchmark reads no "
                         f"{language!r} ones", hint="drop the language (@LANG, "
                                                    f"{field_ref('language')})")
    needed = _needed(name, split, language)
    missing = [path for path in needed if not (root / path).exists()]
    if missing:
        raise UsageError(f"cb:{name} ({split}) is not complete in {root}: "
                         f"{', '.join(missing)} missing",
                         hint="put CLIP_benchmark's files there (see docs/data.md), or add "
                              f"{field_ref('download')}")


def _needed(name: str, split: str, language: str) -> list[str]:
    """What CLIP_benchmark's builder fetches when it is missing, relative to the root."""
    if name == "mscoco_captions":
        folder = {"train": "train2014", "val": "val2014", "test": "val2014"}.get(split)
        return [f"{folder}/", f"coco_{split}_karpathy.json"] if folder else []
    if name in ("flickr30k", "flickr8k"):
        suffix = {"en": "karpathy", "zh": "zh"}.get(language)
        return [f"{name}_{split}_{suffix}.txt"] if suffix else []  # else the builder refuses it
    if name.startswith("sugar_crepe/"):
        subset = name.partition("/")[2]
        if split != "test" or subset not in _SUGAR_CREPE:
            return []  # the builder refuses it in its own words, before fetching anything
        return ["val2017/", f"{subset}.json"]
    if name == "winoground":  # the Hub's facebook/winoground in a datasets cache at the root
        return ["facebook___winoground/"]
    if name in _MULTILINGUAL:
        module = importlib.import_module(f"clip_benchmark.datasets.{_MULTILINGUAL[name]}")
        if language not in module.SUPPORTED_LANGUAGES:
            return []  # the builder refuses it in its own words
        return [module.OUTPUT_FILENAME_TEMPLATE.format(language)]
    return []


def text_records(dataset: Any) -> Iterator[Record]:
    """One record per image: its bytes (or pixels) and its captions (``captions`` column)."""
    import numpy as np  # only when the samples are written

    width = max(6, len(str(len(dataset) - 1)))
    for index in range(len(dataset)):
        images, captions = dataset[index]
        captions = [str(c) for c in captions]
        key = f"{index:0{width}d}"
        if isinstance(images, list):  # Winoground: two images, each with both captions
            for j, image in enumerate(images):
                yield Record(f"{key}_{j}", np.asarray(image.convert("RGB"), dtype=np.uint8),
                             captions, column="captions")
            continue
        path = _image_file(dataset, index)
        image = path.read_bytes() if path is not None else np.asarray(
            images.convert("RGB"), dtype=np.uint8)
        yield Record(key, image, captions, column="captions")


def _image_file(dataset: Any, index: int) -> Path | None:
    """The file CLIP_benchmark's dataset reads sample ``index``'s image from, when it names one
    (torchvision's CocoCaptions, its Flickr and multilingual sets, SugarCrepe)."""
    root = Path(str(getattr(dataset, "root", ".")))
    coco = getattr(dataset, "coco", None)
    if coco is not None and hasattr(dataset, "ids"):
        path = root / coco.loadImgs(dataset.ids[index])[0]["file_name"]
    elif hasattr(dataset, "ann") and hasattr(dataset, "idx_strings"):
        path = root / dataset.ann[dataset.idx_strings[index]]["filename"]
    elif isinstance(getattr(dataset, "data", None), list):
        path = root / str(dataset.data[index][0])  # an absolute path stays itself
    else:
        return None
    return path if path.is_file() else None
