"""Preprocessing configuration and the one function that applies it.

``BackboneCfg`` is frozen and serializes canonically into the backbone record, so two backbones
that see images differently never share features.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import cache
from typing import Any

from ..errors import UsageError

# Local imports: numpy, torch and PIL load when an image is preprocessed, never for a
# configuration.

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_CROPS = ("center", "squash")
_INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos")


@dataclass(frozen=True)
class BackboneCfg:
    """How an image becomes the model's input tensor.

    Attributes:
        input_size: side of the square tensor fed to the model.
        resize: shorter side after resizing, before a ``center`` crop to ``input_size``.
        crop: ``center`` (resize the shorter side, then center-crop) or ``squash`` (resize the
            whole image to ``input_size`` x ``input_size``, ignoring aspect ratio).
        mean: per-channel mean subtracted after scaling pixels to [0, 1].
        std: per-channel std divided by.
        interpolation: ``bilinear``, ``bicubic``, ``nearest`` or ``lanczos`` (PIL filters).
    """

    input_size: int = 224
    resize: int = 256
    crop: str = "center"
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    interpolation: str = "bicubic"

    def __post_init__(self) -> None:
        if self.crop not in _CROPS:
            raise ValueError(f"crop must be one of {_CROPS}, not {self.crop!r}")
        if self.interpolation not in _INTERPOLATIONS:
            raise ValueError(
                f"interpolation must be one of {_INTERPOLATIONS}, not {self.interpolation!r}"
            )
        if self.input_size < 1 or self.resize < self.input_size:
            raise ValueError(
                f"need 1 <= input_size <= resize, got {self.input_size}, {self.resize}"
            )
        # tuples, floats: so the record is canonical whatever sequence type was passed
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))

    def with_input_size(self, input_size: int | None) -> BackboneCfg:
        """The same preprocessing at another input size, keeping the resize/crop ratio."""
        if input_size is None or input_size == self.input_size:
            return self
        ratio = self.resize / self.input_size
        return replace(
            self, input_size=input_size, resize=max(input_size, math.floor(input_size * ratio))
        )

    def geometry(self, width: int,
                 height: int) -> tuple[tuple[int, int], tuple[int, int, int, int] | None]:
        """Where an image of this size goes: ``(resized (w, h), crop box or None)``.

        The one definition of the resize and crop, shared by images and dense targets, so a
        target can never be cropped differently from its image.
        """
        size = self.input_size
        if self.crop == "squash":
            return (size, size), None
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.resize, int(self.resize * long / short)
        new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
        left, top = round((new_w - size) / 2.0), round((new_h - size) / 2.0)
        return (new_w, new_h), (left, top, left + size, top + size)

    @classmethod
    def from_transform(cls, transform: Any) -> BackboneCfg:
        """The cfg a torchvision weights transform describes (``weights.transforms()``).

        torchvision's ``ImageClassification`` resizes the shorter side to ``resize_size``, then
        centre-crops ``crop_size`` and normalises: this cfg's ``center`` crop, read from its
        attributes (it has no ``input_size``). Any other callable is refused: its pixels cannot
        be keyed, so two different transforms would share features.

        Raises:
            UsageError: ``transform`` does not declare its sizes, mean, std and interpolation.
        """
        def one(name: str) -> int:
            value = getattr(transform, name)
            sizes = [value] if isinstance(value, int) else list(value)
            if len(sizes) != 1 or not isinstance(sizes[0], int):
                raise UsageError(f"{type(transform).__name__}.{name} is {value!r}, not one side",
                                 hint="pass BackboneCfg(input_size=..., resize=...)")
            return sizes[0]

        needed = ("crop_size", "resize_size", "mean", "std", "interpolation")
        missing = [name for name in needed if not hasattr(transform, name)]
        if missing:
            raise UsageError(
                f"preprocess {type(transform).__name__} is neither a BackboneCfg nor a "
                f"torchvision weights transform (it has no {', '.join(missing)})",
                hint="pass BackboneCfg(input_size=..., resize=..., mean=..., std=...) or "
                     "weights.transforms()")
        mode = transform.interpolation
        return cls(input_size=one("crop_size"), resize=one("resize_size"), crop="center",
                   mean=tuple(transform.mean), std=tuple(transform.std),
                   interpolation=str(getattr(mode, "value", mode)).lower())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for the backbone record."""
        data = asdict(self)
        data["mean"], data["std"] = list(self.mean), list(self.std)
        return data

    def __call__(self, image: Any) -> Any:
        """Alias of :func:`preprocess`, so a cfg can be a DataLoader transform."""
        return preprocess(self, image)


def preprocess(cfg: BackboneCfg, image: Any) -> Any:
    """Turn a PIL image (or HxWx3 uint8 array) into a normalized float32 CHW tensor.

    Resizing follows torchvision's ``Resize(int)`` + ``CenterCrop`` on PIL images, which is what
    timm, torchvision and open_clip evaluation transforms do. Each 8-bit value ``v`` of channel
    ``c`` becomes ``(float32(v) / 255 - mean[c]) / std[c]`` in float32: looked up in a table of
    the 256 values that formula gives (:func:`_levels`), bit for bit what computing it per pixel
    gives, in one pass instead of four.
    """
    import numpy as np
    import torch
    from PIL import Image

    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    if image.mode != "RGB":  # an RGB image's convert("RGB") is a copy of it: read it as it is
        image = image.convert("RGB")
    resample = getattr(Image.Resampling, cfg.interpolation.upper())
    new_size, box = cfg.geometry(*image.size)
    image = image.resize(new_size, resample)
    if box is not None and box != (0, 0, *new_size):  # cropping it all would only copy it
        image = image.crop(box)
    channels = np.asarray(image).transpose(2, 0, 1)  # (3, H, W) uint8, a view
    levels = _levels(cfg.mean, cfg.std)
    out = np.empty(channels.shape, dtype=np.float32)
    for c in range(3):
        np.take(levels[c], channels[c], out=out[c])
    return torch.from_numpy(out)


@cache
def _levels(mean: tuple[float, ...], std: tuple[float, ...]) -> Any:
    """``(3, 256)`` float32: what :func:`preprocess` makes of each 8-bit value, per channel,
    computed with the very operations (and dtypes) a per-pixel normalization runs."""
    import numpy as np

    values = np.arange(256, dtype=np.float32)[:, None] / 255.0
    table = (values - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    table = np.ascontiguousarray(table.T)
    table.flags.writeable = False
    return table
