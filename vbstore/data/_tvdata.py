"""``torchvision:NAME``: a torchvision dataset class over files under ``--dataset-root``.

Nothing is downloaded unless ``download`` is asked for; missing files fail at once with the
way out. Datasets that hold pixel arrays (CIFAR-10/100, MNIST and its kin, SVHN) are written
as vbstore's deterministic PNG; others are read item by item and their pixels encoded the same
way. ``split`` maps to the class's ``train=`` (train/test) or ``split=`` argument.
"""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path
from typing import Any

from ..errors import UsageError, field_ref
from ._sources import Record, Source, file_states, folder_key, write_list


def _dataset_class(name: str):
    import torchvision.datasets as tvd  # heavy (torch): only when torchvision data is asked for

    cls = getattr(tvd, name, None)
    if not (inspect.isclass(cls) and issubclass(cls, tvd.VisionDataset)):
        known = [n for n in dir(tvd) if inspect.isclass(getattr(tvd, n))
                 and issubclass(getattr(tvd, n), tvd.VisionDataset)]
        close = [n for n in known if n.lower() == name.lower()] or difflib.get_close_matches(
            name, known, n=1, cutoff=0.4)
        raise UsageError(f"torchvision has no dataset {name!r}",
                         hint=f"did you mean torchvision:{close[0]}?" if close
                         else f"e.g. torchvision:{', torchvision:'.join(sorted(known)[:5])}")
    return cls


def _arguments(cls, name: str, split: str | None, download: bool) -> dict[str, Any]:
    params = inspect.signature(cls.__init__).parameters
    kwargs: dict[str, Any] = {}
    if "train" in params:
        if split not in ("train", "test"):
            raise UsageError(f"torchvision:{name} has the splits train and test",
                             hint=f"choose one with {field_ref('split')}")
        kwargs["train"] = split == "train"
    elif "split" in params:
        if split is None:
            raise UsageError(f"torchvision:{name} needs a split", hint="choose one with "
                                                                       f"{field_ref('split')}")
        kwargs["split"] = split
    if "download" in params:
        kwargs["download"] = download
    return kwargs


def _files_folder(dataset) -> Path:
    """The folder the dataset reads, for a cheap unchanged-files key."""
    root = Path(dataset.root)
    for attr in ("base_folder", "raw_folder"):
        value = getattr(dataset, attr, None)
        if isinstance(value, str) and (root / value).is_dir():
            return root / value
    return root


def _images(dataset):
    """Yield (uint8 pixel array, class index) per sample."""
    # numpy: only when a torchvision dataset is converted
    import numpy as np

    data = getattr(dataset, "data", None)
    targets = getattr(dataset, "targets", None)
    if targets is None:
        targets = getattr(dataset, "labels", None)
    if data is not None and targets is not None and getattr(data, "ndim", 0) in (3, 4):
        pixels = np.asarray(data)
        if pixels.ndim == 4 and pixels.shape[1] in (1, 3) and pixels.shape[3] not in (1, 3):
            pixels = pixels.transpose(0, 2, 3, 1)  # SVHN stores (N, C, H, W)
        if pixels.ndim == 4 and pixels.shape[3] == 1:
            pixels = pixels[..., 0]
        for array, target in zip(pixels, np.asarray(targets).tolist(), strict=True):
            yield np.ascontiguousarray(array, dtype=np.uint8), int(target)
        return
    for index in range(len(dataset)):
        image, target = dataset[index]
        mode = "L" if image.mode in ("1", "L", "I", "I;16", "F") else "RGB"
        yield np.asarray(image.convert(mode), dtype=np.uint8), int(target)


def open_torchvision(store, name: str, split: str | None, options: dict[str, Any]) -> Source:
    """Read one split of ``torchvision:NAME`` from ``options["dataset_root"]``.

    Raises:
        UsageError: no dataset root, an unknown dataset or split, files missing (and no
            ``download``).
    """
    cls = _dataset_class(name)  # first: a misspelt name is named before the root is asked for
    root = options.get("dataset_root")
    if root is None:
        raise UsageError(f"torchvision:{name} reads its files from a dataset root",
                         hint=f"pass {field_ref('dataset_root', 'DIR')} (add "
                              f"{field_ref('download')} to fetch them there)")
    download = bool(options.get("download"))
    kwargs = _arguments(cls, name, split, download)
    try:
        dataset = cls(str(Path(root).expanduser()), **kwargs)
    except RuntimeError as exc:  # torchvision's "Dataset not found or corrupted"
        raise UsageError(f"torchvision:{name} is not in {root} ({exc})",
                         hint=f"point {field_ref('dataset_root')} at the folder that holds it, "
                         f"or add {field_ref('download')}") from None
    folder = _files_folder(dataset)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    key = folder_key("torchvision", 1, name, split, file_states(files))
    classes = [str(c) for c in getattr(dataset, "classes", [])] or None

    def records():
        width = max(6, len(str(len(dataset) - 1)))
        for index, (pixels, target) in enumerate(_images(dataset)):
            label = classes[target] if classes is not None else str(target)
            yield Record(f"{index:0{width}d}", pixels, label)

    list_path = write_list(store, f"torchvision-v1-{key}", records())
    return Source(list_path, classes, {"kind": "torchvision", "name": name})
