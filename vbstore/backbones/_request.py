"""What a source's build function receives (a leaf: ``._build`` makes one, every adapter reads
it, and neither imports the other)."""

from __future__ import annotations

from dataclasses import dataclass

from ._spec import BackboneSpec
from ._weights import WeightsChoice


@dataclass(frozen=True)
class BuildRequest:
    """Everything a source's build function receives.

    Attributes:
        spec: the parsed spec.
        weights: the classified weights choice (tag merged from ``@TAG`` and ``weights=``).
        input_size: an input size overriding the model's default, or None.
        use_projection: open_clip only: pool to the projected (joint-space) embedding.
    """

    spec: BackboneSpec
    weights: WeightsChoice
    input_size: int | None = None
    use_projection: bool = False
