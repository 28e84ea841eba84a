"""Slices of rows that keep a (rows x columns) block of scores under a size: what every ranking
task holds in memory at once. Torch-free, so the numpy scorers (``._rows``) share it."""

from __future__ import annotations

from collections.abc import Iterator

# Elements of a (rows x columns) score block held at once: 2**24 float32 is 64 MiB, so a
# 1.28M-image kNN bank or a 25k-caption gallery is scored in slices, not all in memory.
BLOCK_ELEMENTS = 1 << 24


def row_blocks(n_rows: int, n_cols: int, elements: int | None = None) -> Iterator[slice]:
    """Slices of rows such that a (rows, n_cols) block stays under ``elements`` (default
    :data:`BLOCK_ELEMENTS`, read at call time)."""
    limit = BLOCK_ELEMENTS if elements is None else elements
    step = max(1, limit // max(1, n_cols))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))
