"""The manifest digest a suite pins: which samples each condition scores, as Visin computes it.

The digest is the SHA-256 of the compact, key-sorted JSON
``{"conditions": {name: sorted samples}, "version": 1}``, so the order of a split file does not
matter, and a sample added, removed, renamed or moved to another condition changes it. Samples
are whatever names a sample on the user's side; for vbstore's own manifests, the sample names
(paths relative to the data root).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import UsageError

MANIFEST_VERSION = 1


def manifest_sha256(conditions: Mapping[str, Iterable[str]]) -> str:
    """The SHA-256 hex digest of the samples under each condition name."""
    document = {
        "version": MANIFEST_VERSION,
        "conditions": {str(name): sorted(samples) for name, samples in conditions.items()},
    }
    # not canonical.dumps: Visin's client escapes non-ASCII, and the bytes must be its bytes
    text = json.dumps(document, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_split_file(path: str | Path) -> list[str]:
    """The samples a split file lists: one per line, blank lines and surrounding spaces left out.

    Raises:
        UsageError: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the split file {path}: {exc.strerror}") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_assignments(items: Iterable[str], what: str = "NAME=FILE") -> dict[str, str]:
    """``{"day": "day.txt"}`` from ``["day=day.txt"]``, refusing a bad or repeated name.

    Raises:
        UsageError: an item without ``=``, an empty side, or a name given twice.
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not (sep and name and value):
            raise UsageError(f"{item!r} is not {what}", hint=f"e.g. day=test_day.txt ({what})")
        if name in out:
            raise UsageError(f"condition {name!r} is given twice")
        out[name] = value
    return out


def manifest_from_files(splits: Mapping[str, str | Path]) -> dict[str, Any]:
    """``{"manifestSha256", "conditions": [{"name", "sampleCount"}]}`` of split files."""
    conditions = {name: read_split_file(path) for name, path in splits.items()}
    return {
        "manifestSha256": manifest_sha256(conditions),
        "conditions": [{"name": n, "sampleCount": len(s)} for n, s in conditions.items()],
    }
