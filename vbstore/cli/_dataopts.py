"""The dataset-layout flags shared by every command that reads data."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

# vbstore.data.LAYOUTS, without importing it
LAYOUTS = ("image_folder", "dense", "stems", "list", "triplets", "pairs", "images", "spair",
           "voc", "coco", "nyu", "taskonomy", "navi")
_PATH_OPTIONS = ("stems", "train_stems", "classes", "dataset_root", "splits",
                 "custom_template_file", "custom_classname_file")
# a stems list found nowhere under the working directory is read under --data (VisBench's
# `--data VOCdevkit/VOC2012 --stems ImageSets/Segmentation/val.txt`); a CLIP_benchmark file
# that is not here is one it ships (cupl_prompts.json), which it finds itself
_UNDER_DATA = ("stems", "train_stems", "custom_template_file", "custom_classname_file")
_NAMES = ("layout", "stems", "train_stems", "image_dir", "target_dir", "target", "target_type",
          "classes", "dataset_root", "download", "image_column", "label_column", "splits",
          "min_votes", "custom_template_file", "custom_classname_file", "partners", "max_angle",
          "pair_seed", "stride")


# one instance of each path type for every command these flags go on: click translates a path
# type's labels when one is made (a gettext lookup each, ~0.1 ms; 21 of them on a cached `get`)
_EXISTING_FILE = click.Path(exists=True, dir_okay=False)
_FILE = click.Path(dir_okay=False)
_FOLDER = click.Path(file_okay=False)


def data_layout_options(func: Callable) -> Callable:
    """Add the layout flags; the command receives them gathered as ``data_options``."""
    options = [
        click.option("--layout", type=click.Choice(LAYOUTS), default=None,
                     help="Override layout detection."),
        click.option("--stems", type=_FILE, default=None,
                     help="Official list of sample stems, one per line (VOC style); a path "
                          "under the working directory, else under --data."),
        click.option("--train-stems", type=_FILE, default=None,
                     help="Stems list of the train split (used instead of --stems there; "
                          "the training split when no --train-split is given)."),
        click.option("--image-dir", default=None,
                     help="Image folder of a stems layout (default JPEGImages)."),
        click.option("--target-dir", default=None,
                     help="Target folder of a stems layout (default SegmentationClass)."),
        click.option("--target", default=None,
                     help="Target folder of a dense split with several (masks, depth...)."),
        click.option("--target-type", default=None,
                     help="Record this target type instead of the folder name."),
        click.option("--classes", type=_EXISTING_FILE, default=None,
                     help="Class names, one per line, in index order: of a sample list, or "
                     "of box annotations (default: the VOC classes, or classes.txt)."),
        click.option("--splits", type=_EXISTING_FILE, default=None,
                     help="Taskonomy split CSV: building,train,val,test rows of 0/1."),
        click.option("--dataset-root", type=_FOLDER, default=None,
                     help="Folder torchvision:NAME reads its files from; for cb:NAME also a "
                          "URL or a {dataset_cleaned} template (CLIP_benchmark's)."),
        click.option("--custom-template-file", default=None,
                     help="cb: data: CLIP_benchmark's per-dataset templates JSON (its "
                          "--custom_template_file; cupl_prompts.json: its CuPL prompts)."),
        click.option("--custom-classname-file", default=None,
                     help="cb: data: CLIP_benchmark's per-dataset class names JSON (its "
                          "--custom_classname_file)."),
        click.option("--download", is_flag=True, default=None,
                     help="Let hf: and torchvision: data fetch what is not on this machine."),
        click.option("--image-column", default=None,
                     help="The image column of hf: data (default: detected)."),
        click.option("--label-column", default=None,
                     help="The label or caption column of hf: data (default: detected)."),
        click.option("--min-votes", type=click.IntRange(min=0), default=None,
                     help="2AFC triplets: keep those with at least this many votes "
                          "(default 6, VisBench's --min-votes)."),
        # VisBench's NAVI pair draw (docs/data.md); given, it replaces the reader's own pairs
        click.option("--partners", type=click.IntRange(min=1), default=None,
                     help="NAVI: partners drawn per train anchor (VisBench's draw; default 1)."),
        click.option("--max-angle", type=click.FloatRange(min=0.0, max=180.0, min_open=True),
                     default=None,
                     help="NAVI: largest rotation a pair may span, degrees (VisBench's; 120)."),
        click.option("--pair-seed", type=click.IntRange(min=0), default=None,
                     help="NAVI: seeds VisBench's partner draw (default 8)."),
        click.option("--stride", type=click.IntRange(min=1), default=None,
                     help="NAVI: keep every Nth anchor of VisBench's draw (default 1)."),
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gathered = {name: kwargs.pop(name) for name in _NAMES}
        for name in _PATH_OPTIONS:  # relative to the working directory, not to the data
            path = gathered[name]
            if path is not None and "://" in path:  # a URL root (CLIP_benchmark's wds)
                continue
            if path is not None and (name not in _UNDER_DATA or Path(path).exists()):
                gathered[name] = str(Path(path).resolve())
        kwargs["data_options"] = {k: v for k, v in gathered.items() if v is not None}
        return func(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``("k=20", "temperature=0.1", "normalize=true")`` → typed task parameters."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--param")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw  # a bare word is a string
        params[key.replace("-", "_")] = value
    return params
