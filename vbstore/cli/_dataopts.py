"""The dataset-layout flags shared by every command that reads data."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .._fields import FIELDS
from ._fields import field_option

_PATH_OPTIONS = ("stems", "train_stems", "classes", "dataset_root", "splits",
                 "custom_template_file", "custom_classname_file")
# a stems list found nowhere under the working directory is read under --data (VisBench's
# `--data VOCdevkit/VOC2012 --stems ImageSets/Segmentation/val.txt`); a CLIP_benchmark file
# that is not here is one it ships (cupl_prompts.json), which it finds itself
_UNDER_DATA = ("stems", "train_stems", "custom_template_file", "custom_classname_file")
_NAMES = tuple(row.name for row in FIELDS.values() if row.within == "data_options")


# one instance of each path type for every command these flags go on: click translates a path
# type's labels when one is made (a gettext lookup each, ~0.1 ms; 21 of them on a cached `get`)
_EXISTING_FILE = click.Path(exists=True, dir_okay=False)
_FILE = click.Path(dir_okay=False)
_FOLDER = click.Path(file_okay=False)


def data_layout_options(func: Callable) -> Callable:
    """Add the layout flags (the table's ``data_options`` rows); the command receives them
    gathered as ``data_options``."""
    # the path flags' click types: relative paths are resolved below
    types = {"stems": _FILE, "train_stems": _FILE, "classes": _EXISTING_FILE,
             "splits": _EXISTING_FILE, "dataset_root": _FOLDER}
    options = [field_option(name, **({"type": types[name]} if name in types else {}))
               for name in _NAMES]

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
