"""The linear probes' recipe (:mod:`._linear`'s docstring says it whole): the pieces its numpy
and torch implementations share, its constants, its draws and its schedule. numpy only.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

Loss = Literal["cross_entropy", "binary_cross_entropy"]

# A feature whose train std is below this is treated as constant: dividing by ~0 would turn
# float noise into huge inputs.
MIN_STD = 1e-6
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8  # AdamW's defaults
HEAD_KEYS = ("weight", "bias", "mean", "std")


class Draws:
    """The recipe's random draws, in the order it takes them, from one PCG64 bit generator
    seeded by the run's seed. Written out from the raw 64-bit draws (a bit generator's stream is
    fixed across numpy releases; its ``Generator`` methods' need not be)."""

    def __init__(self, seed: int) -> None:
        self._bits = np.random.PCG64(seed)

    def uniform(self, shape: tuple[int, ...]) -> np.ndarray:
        """float64 in [0, 1): the top 53 bits of each draw, as numpy's ``Generator.random``."""
        raw = self._bits.random_raw(math.prod(shape))
        return ((raw >> np.uint64(11)) * 2.0**-53).reshape(shape)

    def weight(self, n_out: int, dim: int) -> np.ndarray:
        """(K, C) float32 initial weights, uniform in +-1/sqrt(C) as ``torch.nn.Linear``."""
        return ((self.uniform((n_out, dim)) * 2 - 1) / math.sqrt(dim)).astype(np.float32)

    def order(self, n: int) -> np.ndarray:
        """An epoch's minibatch order: a permutation of ``n`` rows (int64)."""
        return np.argsort(self._bits.random_raw(n), kind="stable")


def rate(lr: float, step: int, total: int) -> float:
    """The learning rate of step ``step`` (from 0) of ``total``: a cosine from ``lr`` to 0."""
    return lr * 0.5 * (1.0 + math.cos(math.pi * step / total))
