"""When a pool of threads pays for itself, judged by timing the first items of the work.

PIL, blake3 and numpy release the GIL around each call, so threads overlap on large images. On
small ones (a 32-px PNG decodes in ~40 µs) each item is a handful of short calls, and two or
more threads spend more than the work itself taking the GIL from each other: on 2 cores, 2-3x
the CPU and more wall than one thread (docs/scale.md, "One thread for small images"). A caller
times its first items on one thread and keeps to one where :func:`fast` says so.
"""

from __future__ import annotations

from collections.abc import Sequence

# Where one thread and a pool crossed on the machine measured (2 cores), as the probe's median
# (the first items, timed): hashing and checking a file for a manifest (32-px PNGs ~60 µs: one
# thread 2.3x less wall; 64-px ~145 µs: the pool 10 % less), and loading an image for
# extraction, whose main thread also runs the forward (32-px PNGs 170-230 µs: one thread 1.35x
# less wall, 1.5x less CPU; 64-px ~270 µs: as fast, less CPU; 128-px ~600 µs and 224-px JPEGs
# ~710 µs: two threads 1.4-1.6x less wall)
HASH_FAST_SECONDS = 100e-6
DECODE_FAST_SECONDS = 400e-6


def fast(seconds: Sequence[float], limit: float) -> bool:
    """Whether the median of ``seconds`` (wall per item, timed on one thread) is under
    ``limit``: work too small for threads to win. The median, so the first item's imports and
    warm-up do not count."""
    return bool(seconds) and sorted(seconds)[len(seconds) // 2] < limit
