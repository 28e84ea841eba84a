"""The ``feature_rows`` index: which pack row holds an image's features under an extractor.

It lets a dataset that shares images with another reuse their features instead of running the
backbone again. A row counts only while its pack blob is present.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._base import _StoreBase

_CHUNK = 500


class FeatureRowsMixin(_StoreBase):
    """feature_rows methods of :class:`vbstore.Store`."""

    def feature_rows(self, extractor: str, images: Iterable[str]) -> dict[str, tuple[str, int]]:
        """``image id → (pack id, row)`` for the images already extracted by ``extractor``."""
        wanted = sorted(set(images))
        found: dict[str, tuple[str, int]] = {}
        present: dict[str, bool] = {}
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for image, pack, row in self.db.query(
                "SELECT image, pack, row FROM feature_rows "  # noqa: S608 - marks is a fixed "?" list
                f"WHERE extractor=? AND image IN ({marks})",
                [extractor, *chunk],
            ):
                if pack not in present:
                    present[pack] = self.has(pack)
                if present[pack]:
                    found[image] = (pack, row)
        return found

    def add_feature_rows(self, extractor: str, pack: str, images: Sequence[str]) -> None:
        """Record that row ``i`` of ``pack`` holds the features of ``images[i]``."""
        with self.db.write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO feature_rows(extractor, image, pack, row) VALUES (?,?,?,?)",
                [(extractor, image, pack, row) for row, image in enumerate(images)],
            )
