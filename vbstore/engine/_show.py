"""A dataset as a task reads it, before any training: its images beside their targets.

VisBench's ``show``: a target that drifts from its image (a mask of another image, a depth map in
the wrong unit, a box off by the crop) fails silently, as a mediocre number; one picture shows
it. No backbone, no feature, no head: each image goes through the resize and centre crop a
``size`` px input would get (VisBench's ``--image-size``), and its target through the same
geometry, decoded and checked exactly as a task reads it (its hash against the manifest).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..backbones import BackboneCfg
from ..data import get_target_kind, list_split, read_verified, store_listing
from ..errors import UsageError, field_ref
from ..tasks import get_task
from ._plan import data_options_for
from ._targets import check_targets


@dataclass
class Frame:
    """One sample as drawn: its images and, for a dense kind, its target.

    Attributes:
        name: The sample's name in the manifest.
        images: (H, W, 3) float32 RGB in [0, 1]: the image (a triplet's three, a pair's two).
        target: The target as drawn (``kind``), or None (a label, in ``caption``).
        kind: ``labels`` (class indices, -1 ignored), ``scalar``, ``rgb``, ``boxes`` ((n, 6)
            rows ``x0, y0, x1, y1, class, difficult``) or ``none``.
        caption: A label, class names or votes, in words.
    """

    name: str
    images: list[np.ndarray]
    target: np.ndarray | None = None
    kind: str = "none"
    caption: str = ""


@dataclass
class DataView:
    """What ``vbstore show DATA --task T`` draws: frames, the class names, the manifest."""

    task: str
    manifest: str
    samples: int
    frames: list[Frame]
    class_names: list[str] = field(default_factory=list)


class _Reader:
    """A :class:`vbstore.data.TargetReader` over a manifest and a fixed resize and crop."""

    def __init__(self, manifest: Any, size: int, scale: float | None) -> None:
        self.manifest, self.scale = manifest, scale
        self._cfg = BackboneCfg(input_size=size, resize=size, interpolation="bilinear")
        self.cache: dict[Any, Any] = {}
        self.dropped: dict[int, int] = {}

    @property
    def geometry(self):
        return self._cfg.geometry

    def read(self, path: Path, expected: str) -> bytes:
        return read_verified(path, expected)

    def _open(self, position: int) -> Any:
        from PIL import Image  # decoding images only when a picture is asked for

        sample = self.manifest.samples[position]
        return Image.open(io.BytesIO(self.read(self.manifest.image_path(position),
                                               sample["image"])))

    def target_file(self, position: int) -> tuple[Path, str, tuple[int, int]]:
        sample = self.manifest.samples[position]
        if "target" not in sample:
            raise UsageError(f"sample {sample['name']} has no target file",
                             hint=f"name the target folder with {field_ref('target')} (dense "
                                  "layouts)")
        with self._open(position) as image:
            size = image.size
        return self.manifest.target_path(position), sample["target"], size

    def image(self, position: int) -> np.ndarray:
        """(3, H, W) float32 in [0, 1]: the image resized and cropped, not normalised."""
        with self._open(position) as image:
            x = self._cfg(image).numpy()
        mean = np.asarray(self._cfg.mean, np.float32)[:, None, None]
        std = np.asarray(self._cfg.std, np.float32)[:, None, None]
        return np.clip(x * std + mean, 0.0, 1.0)


def show_data(store, data: Any, task: str, *, split: str | None = None,
              limit: int | None = None, data_options: Mapping[str, Any] | None = None,
              frames: int = 4, start: int = 0, size: int = 224,
              params: Mapping[str, Any] | None = None) -> DataView:
    """The first ``frames`` samples from ``start`` of ``data`` as ``task`` reads them, with their
    targets, ready to draw (:func:`vbstore.plots.draw_data_grid`).

    Raises:
        UsageError: data whose targets are not the task's kind (refused as ``run`` refuses
            them), a bad ``frames``/``start``/``size``.
        BadInput: unreadable files, a target that is not its manifest's bytes.
    """
    if frames < 1 or start < 0 or size < 16:
        raise UsageError(f"frames must be >= 1, start >= 0 and size >= 16, got {frames}, "
                         f"{start}, {size}")
    spec = get_task(task)
    resolved = spec.resolve_params(params or {})
    options = data_options_for(spec, data_options or {}, data)
    listing = list_split(store, data, split=split, limit=limit, **options)
    check_targets(spec, listing.targets, field_ref("data"))
    manifest = store_listing(store, listing)
    if start >= len(manifest):
        raise UsageError(f"--start {start} is past the split's {len(manifest)} samples")
    kind = get_target_kind(spec.target_kind)
    scale = (data_options or {}).get("target_scale", resolved.get("target_scale")) or \
        listing.targets.options.get("target_scale")
    reader = _Reader(manifest, size, scale)
    names = manifest.classes
    positions = range(start, min(len(manifest), start + frames))
    out: list[Frame] = []
    rows = next((k for k in ("triplets", "pairs") if manifest.doc.get(k)), None)
    if rows is not None:  # images named by rows of the manifest: drawn row by row
        out = _tuples(reader, manifest, rows, start, frames)
    else:
        for position in positions:
            image = reader.image(position).transpose(1, 2, 0)
            name = manifest.samples[position]["name"]
            how = kind.drawn
            if not how:  # a label per image (or the image alone): the label as a caption
                out.append(Frame(name, [image], caption=_label(manifest, position)))
                continue
            assert kind.read is not None  # a kind drawn beside its image is per pixel
            target = np.asarray(kind.read(reader, position))
            out.append(Frame(name, [image], _drawn(target, how, resolved), how))
    return DataView(task, manifest.id, len(manifest), out, names)


def _drawn(target: np.ndarray, how: str, params: Mapping[str, Any]) -> np.ndarray:
    if how == "boxes":
        return target[:, :6].astype(np.float32)
    if how == "rgb":  # normals: (n + 1) / 2, black where no normal
        valid = np.abs(target).sum(0, keepdims=True) > 0
        return ((target + 1) / 2 * valid).transpose(1, 2, 0).astype(np.float32)
    target = target[0] if target.ndim == 3 and target.shape[0] == 1 else target
    if how == "labels":
        ignore = params.get("ignore_index")
        return np.where(target == ignore, -1, target).astype(np.float32) if ignore is not None \
            else target.astype(np.float32)
    return target.astype(np.float32)


def _label(manifest: Any, position: int) -> str:
    sample = manifest.samples[position]
    classes = manifest.classes
    if "labels" in sample:
        return ", ".join(classes[i] for i in sample["labels"])
    if "label" in sample and classes:
        return classes[sample["label"]]
    return str(sample.get("caption") or sample.get("captions") or "")


def _tuples(reader: _Reader, manifest: Any, kind: str, start: int, frames: int) -> list[Frame]:
    """Triplets (reference, left, right, with the votes) or pairs (two views), by row."""
    rows = manifest.doc.get(kind) or []
    if start >= len(rows):
        raise UsageError(f"--start {start} is past the split's {len(rows)} {kind}")
    out = []
    for row in rows[start:start + frames]:
        count = 3 if kind == "triplets" else 2
        images = [reader.image(int(i)).transpose(1, 2, 0) for i in row[:count]]
        name = manifest.samples[int(row[0])]["name"]
        caption = (f"votes left {int(row[3])}, right {int(row[4])}" if kind == "triplets"
                   else "a, b")
        out.append(Frame(name, images, caption=caption))
    return out
