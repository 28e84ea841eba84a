"""``hf:NAME[@revision][:config]``: a Hugging Face ``datasets`` dataset, read offline.

``NAME`` is a folder written by ``save_to_disk`` (read with ``load_from_disk``) or a Hub dataset
id read from the local ``datasets`` cache. The Hub is never contacted unless ``download`` is
asked for: offline, a dataset that is not cached fails at once with the way out, instead of
the library's retries. The image column is the first ``Image`` feature and the target the first
``ClassLabel`` (or list of them, or a caption column); ``image_column``/``label_column``
override the choice. The manifest's ``source`` records the name, config, the revision the cache
holds and the dataset's fingerprint.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import DataUnavailable, MissingDependency, UsageError, field_ref
from ._sources import Record, Source, folder_key, write_list

# Local imports: the datasets library loads when an hf: source is read.

_CAPTION_COLUMNS = ("caption", "captions", "text", "sentences", "sentence")
_SHA = re.compile(r"^[0-9a-f]{7,40}\Z")


def parse_hf(rest: str) -> tuple[str, str | None, str | None]:
    """``NAME[@revision][:config]`` → (name, revision, config).

    Raises:
        UsageError: an empty name, revision or config.
    """
    name, _, config = rest.partition(":")
    name, at, revision = name.partition("@")
    if not name or (at and not revision) or (rest.count(":") and not config):
        raise UsageError(f"bad hf: data {'hf:' + rest!r}",
                         hint="hf:NAME[@revision][:config], e.g. hf:uoft-cs/cifar10:plain_text")
    return name, revision or None, config or None


@contextlib.contextmanager
def _offline(offline: bool) -> Iterator[None]:
    """``datasets`` in offline mode: a missing dataset fails at once, without retries."""
    import datasets

    before = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = offline or before
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE = before


def _datasets():
    try:
        import datasets  # heavy (pyarrow, fsspec): only when hf: data is asked for
    except ImportError:
        raise MissingDependency("datasets", "hf") from None
    return datasets


def _load(name: str, revision: str | None, config: str | None, download: bool):
    datasets = _datasets()

    local = Path(name).expanduser()
    if local.is_dir() and any((local / f).is_file() for f in ("dataset_dict.json", "state.json")):
        if revision or config:
            raise UsageError(f"{local} was written by save_to_disk: it has no revision or config",
                             hint=f"use hf:{name}")
        return datasets.load_from_disk(str(local)), {"kind": "hf", "name": local.name}
    with _offline(not download):
        try:
            loaded = datasets.load_dataset(name, config, revision=revision)
        except (ConnectionError, FileNotFoundError) as exc:
            # a network problem (exit 6), like weights that are not cached: not a usage error
            raise DataUnavailable(
                f"hf:{name} is not in the local datasets cache ({type(exc).__name__})",
                hint=f"pass {field_ref('download')} to fetch it, or give a folder written by "
                     "save_to_disk",
            ) from None
        except ValueError as exc:  # an unknown config or split names the valid ones
            raise UsageError(f"hf:{name}: {exc}") from None
    return loaded, {"kind": "hf", "name": name, "config": config}


def _pick_split(loaded, split: str | None, name: str):
    if not hasattr(loaded, "keys"):  # a single Dataset
        return loaded
    splits = sorted(loaded.keys())
    if split is None:
        if len(splits) == 1:
            return loaded[splits[0]]
        raise UsageError(f"hf:{name} has splits ({', '.join(splits)})",
                         hint=f"choose one with {field_ref('split')}")
    if split not in loaded:
        raise UsageError(f"no split {split!r} in hf:{name}", hint=f"splits: {', '.join(splits)}")
    return loaded[split]


def _revision(dataset) -> str | None:
    """The revision the cache holds: the folder name of ``<config>/<version>/<hash>/``."""
    files = dataset.cache_files
    if not files:
        return None
    folder = Path(files[0]["filename"]).parent.name
    return folder if re.fullmatch(r"[0-9a-f]{16,64}", folder) else None


def _columns(features, image_column: str | None, label_column: str | None) -> tuple[str, str]:
    import datasets

    names = list(features)

    def check(column: str, what: str) -> str:
        if column not in features:
            raise UsageError(f"no {what} column {column!r}", hint=f"columns: {', '.join(names)}")
        return column

    if image_column is not None:
        image = check(image_column, "image")
    else:
        found = [c for c in names if isinstance(features[c], datasets.Image)]
        if not found:
            raise UsageError("no Image column in the dataset",
                             hint=f"name it with {field_ref('image_column')} (columns: "
                                  f"{', '.join(names)})")
        image = found[0]
    if label_column is not None:
        return image, check(label_column, "label")
    for test in (lambda f: isinstance(f, datasets.ClassLabel),
                 lambda f: isinstance(getattr(f, "feature", None), datasets.ClassLabel)):
        found = [c for c in names if c != image and test(features[c])]
        if found:
            return image, found[0]
    found = [c for c in names if c in _CAPTION_COLUMNS]
    if found:
        return image, found[0]
    raise UsageError("no ClassLabel or caption column in the dataset",
                     hint=f"name it with {field_ref('label_column')} (columns: {', '.join(names)})")


def _target(feature, column: str) -> tuple[str, list[str] | None]:
    """(list column, class names in index order or None) for a target feature."""
    import datasets

    inner = getattr(feature, "feature", None)
    if isinstance(feature, datasets.ClassLabel):
        return "label", list(feature.names)
    if isinstance(inner, datasets.ClassLabel):
        return "labels", list(inner.names)
    dtype = getattr(feature, "dtype", None) or getattr(inner, "dtype", None)
    if inner is not None and dtype in ("string", "large_string"):
        return "captions", None
    if dtype in ("string", "large_string"):
        return ("captions" if column in _CAPTION_COLUMNS else "label"), None
    if dtype is not None and dtype.startswith(("int", "uint")):
        return "label", None
    raise UsageError(f"the {column!r} column ({type(feature).__name__}) is no label or caption",
                     hint=f"name another with {field_ref('label_column')}")


def _value(column: str, raw: Any, names: list[str] | None) -> Any:
    if column == "label":
        return names[raw] if names is not None else str(raw)
    if column == "labels":
        return [names[i] if names is not None else str(i) for i in raw]
    return [raw] if isinstance(raw, str) else list(raw)


def open_hf(store, rest: str, split: str | None, options: dict[str, Any]) -> Source:
    """Read one split of ``hf:NAME[@revision][:config]`` into a sample list.

    Raises:
        UsageError: not cached (offline), a revision the cache does not hold, a missing split,
            no image or label column.
    """
    name, revision, config = parse_hf(rest)
    datasets = _datasets()
    loaded, record = _load(name, revision, config, bool(options.get("download")))
    dataset = _pick_split(loaded, split, name)
    held = _revision(dataset)
    if revision is not None and _SHA.match(revision) and held and not held.startswith(revision):
        raise UsageError(f"the cache holds hf:{name}@{held[:12]}, not @{revision}",
                         hint=f"pass {field_ref('download')} to fetch that revision")
    image, target = _columns(dataset.features, options.get("image_column"),
                             options.get("label_column"))
    column, names = _target(dataset.features[target], target)
    # the fingerprint names the exact table (files and transforms) without reading a row
    fingerprint = dataset._fingerprint
    key = folder_key("hf", 1, fingerprint, image, target, record["name"], config)

    def records():
        rows = dataset.select_columns([image, target]).cast_column(
            image, datasets.Image(decode=False))
        width = max(6, len(str(len(rows) - 1)))
        for index, row in enumerate(rows):
            cell = row[image]
            data = cell.get("bytes") or Path(cell["path"]).read_bytes()
            yield Record(f"{index:0{width}d}", data, _value(column, row[target], names), column)

    list_path = write_list(store, f"hf-v1-{key}", records())
    record.update({"revision": held or revision, "fingerprint": fingerprint,
                   "image_column": image, "label_column": target})
    return Source(list_path, names, {k: v for k, v in record.items() if v is not None})
