"""How far an extraction is (a leaf: the local loop in ``._extract`` and the Ray driver in
``._ray`` report it, ``._executor`` hands it on, and none of them imports another for it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExtractProgress:
    """How far one extraction is, over all its workers; handed to a ``progress`` callback.

    Attributes:
        done: images whose features are stored (registered by this process).
        total: images this extraction runs through the backbone.
        seconds: since the first image was sent to a worker.
        workers: forward workers (1 for a local extraction).
    """

    done: int
    total: int
    seconds: float
    workers: int = 1

    @property
    def images_per_s(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0
