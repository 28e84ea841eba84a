"""What an extractor is: the backbone plus every setting that changes the numbers it produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .. import canonical
from ..errors import UsageError, field_ref

# Bump when the features produced for the same backbone and settings would change.
OP_VERSION = 1
MODES = ("pooled", "dense", "both")
PRECISIONS = ("fp32", "bf16")
DENSE_DTYPES = ("float16", "float32", "bfloat16")


@dataclass(frozen=True)
class ExtractorParams:
    """Settings of one feature extraction (all of them are in the extractor key).

    Attributes:
        layers: block indices as the user gave them (negative counts from the end).
        pooling: ``cls``, ``mean``, ``gap`` or ``none``; None means the backbone's default,
            resolved before keys are made.
        mode: which features to keep: ``pooled`` vectors, ``dense`` maps, or ``both``.
        precision: ``fp32`` or ``bf16`` compute (bf16 changes the numbers).
        dense_dtype: storage dtype of dense maps (float16 unless asked otherwise).
        input_size: override of the backbone's input resolution, else None.
    """

    layers: tuple[int, ...] = (-1,)
    pooling: str | None = None
    mode: str = "pooled"
    precision: str = "fp32"
    dense_dtype: str = "float16"
    input_size: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"unknown feature mode {self.mode!r}",
                             hint=f"use one of: {', '.join(MODES)}")
        if self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r}", hint="use fp32 or bf16")
        if self.dense_dtype not in DENSE_DTYPES:
            raise UsageError(f"unknown dense dtype {self.dense_dtype!r}",
                             hint=f"use one of: {', '.join(DENSE_DTYPES)}")
        if not self.layers:
            raise UsageError("no layers requested", hint=f"pass {field_ref('layers')} -1 for "
                                                         "the last block")
        if self.mode == "pooled" and self.pooling == "none":
            raise UsageError("pooling none keeps no pooled vector",
                             hint=f"use {field_ref('mode')} dense or another pooling")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["layers"] = list(self.layers)
        if self.mode == "pooled":  # dense storage does not apply: keep it out of the key
            data.pop("dense_dtype")
        if self.precision == "bf16":  # bf16 weights (an earlier build used autocast)
            data["bf16"] = "weights"
        return data


def extractor_doc(backbone_id: str, params: ExtractorParams) -> dict[str, Any]:
    """The canonical description of an extractor; its hash is the extractor key."""
    if params.pooling is None:
        raise ValueError("resolve the pooling before making an extractor key")
    return {"op": "extract", "op_version": OP_VERSION, "backbone": backbone_id, **params.to_dict()}


def extractor_key(backbone_id: str, params: ExtractorParams) -> str:
    """The id under which an image's features are shared across datasets."""
    return canonical.key_of(extractor_doc(backbone_id, params))
