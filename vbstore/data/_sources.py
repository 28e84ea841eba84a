"""Datasets where they already live: ``hf:``, ``torchvision:`` and ``wds:`` sources.

Each source is read once into a JSONL sample list under ``<store>/datasets/<kind>-v1-<key>/``
(``samples.jsonl`` + ``images/``) and loaded as a ``list`` manifest from there. Encoded images
(a ``datasets`` Image column, the members of a tar shard) are written with their own bytes, so
a manifest hashes exactly the bytes the source holds; only pixel arrays (CIFAR's batches, MNIST)
are encoded, as vbstore's deterministic PNG. The same images reached through a folder, a saved
``datasets`` dataset or a tar shard therefore have the same image ids and share their features.

The folder key is cheap to compute without reading a pixel (a dataset fingerprint, or the
(size, mtime) of the source's files), so a second read goes straight to the written list.
The manifest records where it came from under ``source`` (name, config, pinned revision).
"""

from __future__ import annotations

import io
import json
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from ..errors import BadInput, UsageError, field_ref
from ._files import IMAGE_EXTENSIONS
from ._packaged import once
from ._png import png_bytes

# Local imports: PIL, numpy and tarfile load when a source's files are written; _hf and _tvdata
# build on this module (an import cycle) and load with their source.

# the kinds, their options and which reader opens each: ._source_kinds
_FORMATS = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp", "BMP": ".bmp", "GIF": ".gif",
            "TIFF": ".tif", "PPM": ".ppm"}
_KEY = re.compile(r"^[A-Za-z0-9_.\-/]+\Z")


@dataclass(frozen=True)
class Source:
    """A source read into a sample list: the list file, its class order and provenance."""

    list_path: Path
    classes: list[str] | None
    record: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Record:
    """One sample as a source yields it: a key, encoded bytes or a uint8 array, its target."""

    key: str
    image: bytes | Any
    value: Any
    column: str = "label"  # or labels, captions


def folder_key(*parts: Any) -> str:
    """The name of a source's folder under ``<store>/datasets``: a hash of what identifies it."""
    return blake3.blake3(repr(parts).encode()).hexdigest()[:24]


def file_states(paths: Iterable[Path]) -> list[tuple[str, int, int]]:
    """(name, size, mtime_ns) of each file: a cheap key for "these files, unchanged"."""
    states = []
    for path in paths:
        st = path.stat()
        states.append((path.name, st.st_size, st.st_mtime_ns))
    return states


def write_list(store, name: str, records: Iterable[Record]) -> Path:
    """``<store>/datasets/<name>/samples.jsonl`` with its images, written once; its path.

    ``records`` is consumed only when the folder does not exist yet. A mix of columns
    (labels and captions) is left for the list reader to refuse.
    """

    def write(tmp: Path) -> None:
        lines, seen = [], set()
        for record in records:
            key = record.key
            if not _KEY.match(key) or ".." in key.split("/") or key.startswith("/"):
                raise BadInput("sample keys that are no safe file name",
                               [(key, "use letters, digits, _ . - and /")])
            data = record.image
            if isinstance(data, bytes):
                ext = _extension(data)
                if ext is None:  # a format vbstore does not read: keep its pixels, as a PNG
                    data, ext = _reencode(data), ".png"
            else:
                data, ext = png_bytes(data), ".png"
            rel = f"images/{key}{ext}"
            if rel in seen:
                raise BadInput("duplicate sample keys", [(key, "appears twice")])
            seen.add(rel)
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            lines.append(json.dumps({"image": rel, record.column: record.value}, sort_keys=True,
                                    ensure_ascii=False))
        if not lines:
            raise BadInput("empty sources", [(name, "no samples")])
        (tmp / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    return once(store.root / "datasets" / name, write) / "samples.jsonl"


def _extension(data: bytes) -> str | None:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            return _FORMATS.get(image.format or "")
    except Exception:  # PIL raises many types; the manifest's decode check names the file
        return ".bin"


def _reencode(data: bytes) -> bytes:
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return png_bytes(np.asarray(image.convert("RGB")))


# ---- WebDataset tar shards ------------------------------------------------------------------


def _shards(root: Path, split: str | None) -> tuple[list[Path], Path]:
    """The tar shards of ``split`` and the folder holding ``classnames.txt``, if any."""
    if root.is_file():
        return [root], root.parent
    if not root.is_dir():
        raise UsageError(f"no such file or folder: {root}",
                         hint="wds: takes a .tar shard or a folder of shards")
    base = root / split if split is not None else root
    if split is not None and not base.is_dir():
        found = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise UsageError(f"no split {split!r} in {root}",
                         hint=f"splits found: {', '.join(found)}" if found
                         else f"omit {field_ref('split')}")
    shards = sorted(base.glob("*.tar"))
    if not shards:
        splits = sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.tar")))
        if split is None and splits:
            raise UsageError(f"{root} has splits ({', '.join(splits)})",
                             hint=f"choose one with {field_ref('split')}")
        raise UsageError(f"no .tar shards in {base}",
                         hint="WebDataset shards are <root>/<split>/*.tar")
    return shards, root


def _class_names(folders: Sequence[Path]) -> list[str] | None:
    for folder in folders:
        path = folder / "classnames.txt"
        if path.is_file():
            return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
                    if line.strip()]
    return None


def _tar_samples(shards: list[Path]) -> dict[str, dict[str, bytes]]:
    """Members of every shard grouped by WebDataset key (the path up to the first dot)."""
    import tarfile

    samples: dict[str, dict[str, bytes]] = {}
    for shard in shards:
        try:
            with tarfile.open(shard) as tar:
                members: dict[str, dict[str, bytes]] = {}
                for member in tar:
                    if not member.isfile():
                        continue
                    folder, base = posixpath.split(member.name)
                    stem, dot, ext = base.partition(".")
                    if not dot or stem.startswith("_"):
                        continue
                    handle = tar.extractfile(member)
                    members.setdefault(posixpath.join(folder, stem), {})[ext.lower()] = (
                        handle.read() if handle else b"")
        except (OSError, tarfile.TarError) as exc:
            raise BadInput("unreadable tar shards", [(str(shard), str(exc))]) from None
        for key, parts in members.items():
            if key in samples:
                raise BadInput("duplicate sample keys",
                               [(f"{shard}:{key}", "the key is in an earlier shard too")])
            samples[key] = parts
    return samples


def open_wds(store, rest: str, split: str | None) -> Source:
    """``wds:PATH``: tar shards read into a sample list (``._sources_builtin``)."""
    root = Path(rest).expanduser().resolve()
    shards, top = _shards(root, split)
    names = _class_names([shards[0].parent, top])
    key = folder_key("wds", 1, split, file_states(shards),
                     None if names is None else tuple(names))

    def records() -> Iterable[Record]:  # read only when the list is not written yet
        samples = _tar_samples(shards)
        problems = []
        for sample_key in sorted(samples):
            parts = samples[sample_key]
            image = next((parts[e] for e in sorted(parts) if f".{e}" in IMAGE_EXTENSIONS), None)
            text = parts.get("txt", b"").decode("utf-8").strip()
            if image is None:
                problems.append((sample_key, f"no image member (has {', '.join(sorted(parts))})"))
            elif "cls" in parts:
                yield Record(sample_key, image, _cls_name(parts["cls"], names, sample_key))
            elif text:
                yield Record(sample_key, image, [text], column="captions")
            else:
                problems.append((sample_key, "no .cls and no .txt member"))
        if problems:
            raise BadInput("incomplete WebDataset samples", problems,
                           hint="each sample needs an image and a .cls (or .txt) member")

    list_path = write_list(store, f"wds-v1-{key}", records())
    classes = names
    if classes is None:
        rows = [json.loads(line) for line in list_path.read_text(encoding="utf-8").splitlines()]
        used = {row["label"] for row in rows if "label" in row}
        classes = sorted(used, key=lambda c: (len(c), c)) or None  # numeric order for indices
    record = {"kind": "wds", "name": root.name, "shards": [s.name for s in shards]}
    return Source(list_path, classes, record)


def _cls_name(raw: bytes, names: list[str] | None, key: str) -> str:
    text = raw.decode("utf-8").strip()
    try:
        index = int(text)
    except ValueError:
        raise BadInput("bad .cls members", [(key, f"{text!r} is not a class index")]) from None
    if names is None:
        return str(index)
    if not 0 <= index < len(names):
        raise BadInput("class indices outside classnames.txt",
                       [(key, f"{index} with {len(names)} class names")])
    return names[index]
