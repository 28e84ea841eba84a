"""Images decoded once per request: the manifest's check keeps them, extraction takes them.

A cold ``get`` used to decode every image twice in one process: the manifest's check decodes
it fully (a corrupt file is refused before anything is stored), then extraction reads, hashes
and decodes it again. Within :func:`decode_once` (opened by the engine around one request's
plan and execution), the check keeps the RGB image it made from bytes it has just hashed,
under their BLAKE3; extraction's ``decode_image`` takes it when the manifest names that hash,
and reads, hashes and decodes nothing. The pixels are exactly those of bytes whose hash is the
manifest's, so features are still filed under the bytes they were made of.

What is kept, and for how long:

- only a full decode of bytes read once for hashing and checking (a file under 1 MiB; a JPEG
  is checked at 1/8 scale, which is not the image extraction reads, so it is never kept);
- up to :func:`budget` bytes of decoded pixels (``VBSTORE_DECODED_MIB``, default 256 MiB; 0
  keeps none), filled until full, not evicted: extraction reads in the order the manifest was
  hashed, so an LRU or FIFO would drop exactly the images that come next. An image taken gives
  its room back;
- until the outermost scope closes (also on an error): a long-lived process keeps no image
  beyond the request that decoded it.

The scope is the process's, behind one lock, so the manifest's hashing threads and
extraction's decode threads share it (two requests running at once in one process share its
budget, and the images go when the last of them ends). A forked process (a DataLoader worker)
starts with none open and decodes as before, as does a Ray actor in its own process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import UsageError

BUDGET_MIB = 256
BUDGET_ENV = "VBSTORE_DECODED_MIB"
# what Pillow holds per pixel of an RGB image (a padded 32-bit word)
RGB_BYTES = 4

_lock = threading.Lock()
_depth = 0  # scopes open in this process (a request's inside another's, or beside it)
_room = 0  # bytes of pixels still allowed
_images: dict[str, Any] = {}  # BLAKE3 of the bytes -> the RGB PIL image decoded from them


def budget() -> int:
    """Bytes of decoded pixels a scope may keep: ``VBSTORE_DECODED_MIB`` MiB, else 256 MiB.

    Raises:
        UsageError: the variable is not a whole number of MiB, 0 or more.
    """
    text = os.environ.get(BUDGET_ENV)
    if text is None:
        return BUDGET_MIB << 20
    try:
        mib = int(text)
    except ValueError:
        mib = -1
    if mib < 0:
        raise UsageError(f"{BUDGET_ENV}={text!r} is not a number of MiB",
                         hint=f"unset it (default {BUDGET_MIB}), or give e.g. 512 (0: keep none)")
    return mib << 20


@contextmanager
def decode_once() -> Iterator[None]:
    """Within: images the manifest's check decodes fully are kept for extraction (see the
    module's docstring); every kept image is dropped when the outermost scope closes.

    Raises:
        UsageError: ``VBSTORE_DECODED_MIB`` is not a number of MiB (on entry).
    """
    global _depth, _room
    room = budget()
    with _lock:
        if _depth == 0:
            _room = room
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth = max(0, _depth - 1)  # a forked child leaving its parent's scope: none
            if _depth == 0:
                _images.clear()
                _room = 0


def room_for(pixels: int) -> bool:
    """Whether an image of ``pixels`` pixels would be kept now: the check converts it to RGB
    only then (a hint read without the lock; :func:`keep_decoded` decides)."""
    return pixels * RGB_BYTES <= _room


def _size(image: Any) -> int:
    return image.width * image.height * RGB_BYTES


def _pop(digest: str) -> Any | None:
    """The image kept under ``digest``, removed and its room given back (the lock held)."""
    global _room
    image = _images.pop(digest, None)
    if image is not None:
        _room += _size(image)
    return image


def keep_decoded(digest: str, image: Any) -> bool:
    """Keep ``image`` (RGB, decoded from bytes whose BLAKE3 is ``digest``) while a scope is
    open and it fits; whether it was kept."""
    global _room
    size = _size(image)
    with _lock:
        if _depth == 0 or size > _room or digest in _images:
            return False
        _images[digest] = image
        _room -= size
        return True


def take_decoded(digest: str) -> Any | None:
    """The RGB image kept under ``digest``, removed (each is read once), or None."""
    if not _images:  # no scope, or nothing kept: no lock per image
        return None
    with _lock:
        return _pop(digest)


def is_kept(digest: str) -> bool:
    """Whether an image is kept under ``digest`` now (a hint, read without the lock)."""
    return digest in _images


def discard_decoded(digests: Iterable[str]) -> None:
    """Drop the images kept under ``digests`` (those no extraction here will take: rows already
    stored, or an extraction in other processes), giving their room back."""
    if not _images:
        return
    with _lock:
        for digest in digests:
            _pop(digest)


def kept_count() -> int:
    """How many images are kept now (for tests and benchmarks)."""
    return len(_images)


def _forked() -> None:
    # a forked child (a DataLoader worker) shares no scope with its parent: it starts with none
    # open and a fresh lock (the parent's could have been held by another thread at the fork)
    # the parent's images are left as they are, not freed: freeing them would write to (and so
    # copy) every page they sit on, in each child
    global _lock, _depth, _room, _images
    _lock, _depth, _room, _images = threading.Lock(), 0, 0, {}


os.register_at_fork(after_in_child=_forked)
