"""Listing dataset files and checking that freshly seen ones decode.

The checks run inside ``store.file_states.hash``, i.e. only on files whose (inode, size,
mtime, ctime) state is not cached yet, so a folder is decoded once, when first seen.
"""

from __future__ import annotations

import csv
import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..canonical import digest
from ..errors import BadInput, UsageError
from ._decoded import keep_decoded, room_for

# Local imports: PIL and numpy load when a file is hashed for the first time and decoded to check
# it; a folder already seen decodes nothing.

# Decoded pixels an image may have (width x height), below Pillow's own decompression-bomb
# warning (about 89 Mpx): a small file can claim a huge canvas and take gigabytes to decode.
MAX_IMAGE_PIXELS = 64 * 1024 * 1024
PIXELS_ENV = "VBSTORE_MAX_IMAGE_PIXELS"

# torchvision's ImageFolder extensions plus .gif; case-insensitive.
IMAGE_EXTENSIONS = frozenset(
    {".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".pbm", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
)


def is_image(name: str) -> bool:
    """Whether a file name has an image extension vbstore reads."""
    # rfind, not os.path.splitext: this runs once per file of every dataset read (walk_files
    # has the same test written out in its loop)
    dot = name.rfind(".")
    return dot > 0 and name[dot:].lower() in IMAGE_EXTENSIONS


def is_hidden(name: str) -> bool:
    # .DS_Store, ._resource forks, editor droppings, our own temp folders
    return name.startswith(".")


def walk_files(top: Path, images_only: bool = True) -> Iterator[str]:
    """Relative POSIX paths of the files under ``top``, recursively, hidden ones skipped.

    Args:
        top: The folder to walk.
        images_only: Yield only files with an image extension.
    """
    stack = [""]
    while stack:
        rel = stack.pop()
        prefix = f"{rel}/" if rel else ""
        with os.scandir(top / rel if rel else top) as it:
            # once per file of every dataset read, on every cached `get`: is_hidden and is_image
            # written out (their calls were a third of a 10k-image listing)
            for entry in it:
                name = entry.name
                if name[0] == ".":
                    continue
                if entry.is_dir():
                    stack.append(prefix + name)
                elif not images_only:
                    yield prefix + name
                else:
                    dot = name.rfind(".")
                    if dot > 0 and name[dot:].lower() in IMAGE_EXTENSIONS:
                        yield prefix + name


def subdirs(top: Path) -> list[str]:
    """Sorted names of the visible folders directly under ``top``."""
    with os.scandir(top) as it:
        return sorted(e.name for e in it if e.is_dir() and not is_hidden(e.name))


def loose_images(top: Path) -> list[str]:
    """Sorted names of the image files directly under ``top``."""
    with os.scandir(top) as it:
        return sorted(
            e.name for e in it if e.is_file() and not is_hidden(e.name) and is_image(e.name)
        )


def check_image(path: Path, data: bytes | None = None, data_hash: str | None = None
                ) -> str | None:
    """Decode an image fully; return what is wrong with it, or None.

    ``load()`` rather than ``verify()``: verify only walks the chunk structure and lets a
    truncated JPEG through, which would then fail in the middle of an extraction. JPEGs are
    decoded at reduced scale, which still reads all their data. ``data``: the file's bytes, when
    the caller has read them already (decoded from memory, the file is not opened again), and
    ``data_hash`` their BLAKE3: an image decoded fully from them is kept for extraction while a
    request's scope is open (:mod:`vbstore.data._decoded`).
    """
    import io

    from PIL import Image, UnidentifiedImageError

    cap = max_image_pixels()
    try:
        # reads the header only
        with Image.open(path if data is None else io.BytesIO(data)) as image:
            if image.width * image.height > cap:
                return (f"{image.width} x {image.height} = {image.width * image.height} pixels, "
                        f"over the cap of {cap} (set {PIXELS_ENV} to allow more)")
            full = image.format != "JPEG"
            if not full:
                # decode at 1/8 scale: every entropy-coded byte is still read (so truncation and
                # corruption show), but most of the inverse DCT is skipped
                image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
            # only the pixels of the very bytes hashed (a file checked from its path could have
            # changed since), and only while a request's scope has room
            if full and data is not None and data_hash is not None \
                    and room_for(image.width * image.height):
                _keep(data_hash, image)
    except UnidentifiedImageError:  # its message names the buffer, not the file: named here
        return f"not a readable image (UnidentifiedImageError: cannot identify image file " \
               f"{str(path)!r})"
    except Exception as exc:  # PIL raises many types (OSError, SyntaxError, ValueError...)
        return f"not a readable image ({type(exc).__name__}: {exc})"
    return None


def _keep(data_hash: str, image: Any) -> None:
    try:
        # what extraction's decode_image makes of the same bytes: convert("RGB") of the image
        # as opened (convert loads it first, so a loaded image converts to the same pixels)
        rgb = image.convert("RGB")
    except Exception:  # extraction decodes it itself, and names what is wrong
        return
    keep_decoded(data_hash, rgb)


def max_image_pixels() -> int:
    """The decoded-pixel cap: ``VBSTORE_MAX_IMAGE_PIXELS``, else :data:`MAX_IMAGE_PIXELS`.

    Raises:
        UsageError: the variable is not a positive integer.
    """
    text = os.environ.get(PIXELS_ENV)
    if text is None:
        return MAX_IMAGE_PIXELS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise UsageError(f"{PIXELS_ENV}={text!r} is not a positive number of pixels",
                         hint=f"unset it (default {MAX_IMAGE_PIXELS}) or give e.g. 100000000")
    return value


def check_target(path: Path, data: bytes | None = None, data_hash: str | None = None
                 ) -> str | None:
    """Decode a target file when its format is one vbstore reads (images, .npy); ``data``: its
    bytes, when read already. ``data_hash`` is not used: extraction reads no target, so none is
    kept decoded."""
    if is_image(path.name):
        return check_image(path, data)
    if path.suffix.lower() == ".npy":
        import numpy as np

        try:
            np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception as exc:  # a bad header raises ValueError, a short file OSError
            return f"not a readable .npy array ({type(exc).__name__}: {exc})"
    return None


def unreadable(paths: list[str], what: str) -> BadInput:
    """The :class:`BadInput` for files that cannot be opened, listing every one of them.

    Only called after a read failed, so the happy path never pays for an extra open per file.
    """
    problems = []
    for path in paths:
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            problems.append((str(path), exc.strerror or str(exc)))
    return BadInput(what, problems or [(str(paths[0]), "unreadable")])


def name_hash(name: str) -> str:
    """BLAKE3 of a sample key's UTF-8 bytes: a stable rank (``--limit`` keeps the lowest).

    Hashing the name rather than taking a prefix of the sorted names spreads a limited split
    over the whole folder (not only the first sequences or cities of a dataset).
    """
    return digest(name.encode("utf-8"))


def relative_image(value: str | None, column: str, empty: str = "") -> str:
    """A table cell naming an image relative to the table, normalised.

    Args:
        empty: what the message adds when the cell is empty (e.g. ": a pair needs two views").

    Raises:
        ValueError: an empty cell, an absolute path, or a name without an image extension.
    """
    value = (value or "").strip()
    if not value:
        raise ValueError(f"empty {column}{empty}")
    if posixpath.isabs(value) or (len(value) > 1 and value[1] == ":"):
        raise ValueError(f"{column} {value!r} is absolute; write it relative to the table")
    if not is_image(value):
        raise ValueError(f"{column} {value!r} is not an image file name")
    value = posixpath.normpath(value)
    if value == ".." or value.startswith("../"):
        raise ValueError(f"{column} {value!r} leads out of the table's folder; name files "
                         "inside it")
    return value


class Within:
    """Paths a list names under its data folder, refused when they lead out of it: a ``..``
    step, an absolute path, or a symlink on the way that points elsewhere (a list names files
    of its own dataset only). Each folder is resolved once, so a long list costs one ``lstat``
    per file.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._real = os.path.realpath(root).rstrip(os.sep)
        self._dirs: dict[str, bool] = {}

    def _inside(self, real: str) -> bool:
        return real == self._real or real.startswith(self._real + os.sep)

    def __call__(self, name: str) -> Path:
        """``root / name``.

        Raises:
            ValueError: naming the path and why.
        """
        parts = name.replace("\\", "/").split("/")
        if ".." in parts or posixpath.isabs(name) or (len(name) > 1 and name[1] == ":"):
            raise ValueError(f"{name!r} leads out of the data folder (.. or absolute); name "
                             "files inside it")
        path = self.root / name
        folder = str(path.parent)
        if folder not in self._dirs:
            self._dirs[folder] = self._inside(os.path.realpath(folder))
        if not self._dirs[folder] or (path.is_symlink()
                                      and not self._inside(os.path.realpath(path))):
            raise ValueError(f"{name!r} is a link out of the data folder {self.root}; copy the "
                             "file in, or point the data at a folder that holds both")
        return path


# C0 and C1 control characters (NUL, tab, newline, DEL...): never part of a class name; other
# unprintable characters (a no-break space, a zero-width joiner in Persian) are
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def links_out(root: str, names: Sequence[str], within: str | None = None
              ) -> list[tuple[str, str]]:
    """``(path, why)`` for each of ``names`` (relative to ``root``) that leads out of ``within``
    (default ``root``): a symlinked file, or one in a symlinked folder, that resolves outside
    it. A dangling link is left to the hashing, which names it missing. Each folder is resolved
    and listed once (a listing says which entries are links without a call per file), so only a
    link costs a ``realpath``."""
    within = root if within is None else within
    real = os.path.realpath(within).rstrip(os.sep)

    def inside(path: str) -> bool:
        return path == real or path.startswith(real + os.sep)

    folders: dict[str, tuple[bool, frozenset[str]]] = {}
    out = []
    for name in names:  # POSIX names relative to root, as manifests hold them
        sub, _, base = name.rpartition("/")
        if sub not in folders:
            folder = os.path.join(root, sub) if sub else root
            try:
                with os.scandir(folder) as entries:
                    links = frozenset(e.name for e in entries if e.is_symlink())
            except OSError:  # a missing folder: the hashing names its files
                links = frozenset()
            folders[sub] = inside(os.path.realpath(folder)), links
        folder_inside, links = folders[sub]
        if folder_inside and base not in links:
            continue  # nearly every file: no call at all
        path = os.path.join(root, name)
        if not folder_inside or (os.path.exists(path) and not inside(os.path.realpath(path))):
            out.append((path, f"links to {os.path.realpath(path)}, outside {within}"))
    return out


def check_class_names(classes: Sequence[str], where: str) -> None:
    """Refuse class names holding control characters (a NUL, a newline): they cannot be shown,
    written to a CSV or matched by a prompt, and no dataset means them.

    Raises:
        BadInput: naming each such class and ``where`` it came from.
    """
    bad = [(where, f"class name {name!r} holds a control character") for name in classes
           if CONTROL.search(str(name))]
    if bad:
        raise BadInput("class names with control characters", bad,
                       hint="rename those classes; nothing was written")


def check_unique_ids(rows: Sequence[Sequence[Any]], path: Path, what: str) -> None:
    """Refuse a table whose rows (id first) repeat an id, naming the first that repeats.

    Raises:
        BadInput: ``"<what> with repeated ids"``, with the table and the id.
    """
    seen: set = set()
    for row in rows:
        if row[0] in seen:
            raise BadInput(f"{what} with repeated ids", [(str(path), f"id {row[0]!r} repeats")])
        seen.add(row[0])


def read_table(path: Path, what: str, required: Sequence[str], optional: str
               ) -> list[dict[str, str]]:
    """The rows of the CSV table ``path`` (a BOM allowed), its header checked for ``required``.

    Raises:
        BadInput: the table is unreadable, empty, lacks a required column, or has a row csv
            cannot read (a cell over csv's 128 KiB field limit, a stray quote), naming
            ``file:line``; ``what`` names the kind of table ("pose", "triplet") and
            ``optional`` its optional columns.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"unreadable {what} tables", [(str(path), str(exc))]) from None
    if not text.strip():
        raise BadInput(f"empty {what} tables", [(str(path), "no header, no rows")])
    reader = csv.DictReader(text.splitlines())
    try:
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise BadInput(f"{what} tables with missing columns",
                           [(str(path), f"no {', '.join(missing)} column")],
                           hint=f"columns: {', '.join(required)}, optionally {optional}")
        return list(reader)
    except csv.Error as exc:  # raised before the line it is reading is counted
        why = str(exc)
        if "field larger than field limit" in why:
            why = f"a cell is longer than {csv.field_size_limit() // 1024} KiB"
        raise BadInput(f"malformed {what} tables", [(f"{path}:{reader.line_num + 1}", why)],
                       hint="fix the row; cells are short paths, numbers and names") from None
