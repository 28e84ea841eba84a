"""What gc, fsck and a registry rebuild report.

Apart from the code that fills them so that opening a store does not create their classes: the
report types load when a report is made (their dataclasses cost ~1.5 ms of every command).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._ids import hex_id


@dataclass
class GcReport:
    """What one gc run removed (or would remove, with ``dry_run``).

    The removed objects are kept as the registry rows gc read anyway; ``removed`` makes a dict
    per object from them when asked, so a caller of a gc of millions of objects that wants only
    the totals (``removed_count``, ``removed_bytes``, ``removed_by_kind``) never pays for them.
    """

    dry_run: bool
    evicted: list[dict[str, Any]] = field(default_factory=list)
    kept: int = 0
    warnings: list[str] = field(default_factory=list)
    # (registry id, kind, bytes freed: 0 if it was evicted before) of each removed object
    _rows: list[tuple] = field(default_factory=list, init=False, repr=False)
    # (name, bytes) of each temp file a dead writer left in tmp/
    _temps: list[tuple[str, int]] = field(default_factory=list, init=False, repr=False)

    @property
    def temp_removed(self) -> list[str]:
        """The temp files of dead writers removed from ``tmp/`` (partial writes)."""
        return [name for name, _ in self._temps]

    @property
    def removed(self) -> list[dict[str, Any]]:
        """Each removed object as ``{"id", "kind", "size"}`` (size 0 if it was evicted before)."""
        return [{"id": hex_id(key), "kind": kind, "size": size} for key, kind, size in self._rows]

    @property
    def removed_count(self) -> int:
        return len(self._rows)

    @property
    def removed_bytes(self) -> int:
        return sum(size for _, _, size in self._rows)

    @property
    def removed_by_kind(self) -> dict[str, dict[str, int]]:
        """``kind → {"count", "bytes"}`` of the removed objects."""
        kinds: dict[str, dict[str, int]] = {}
        for _, kind, size in self._rows:
            entry = kinds.setdefault(kind, {"count": 0, "bytes": 0})
            entry["count"] += 1
            entry["bytes"] += size
        return dict(sorted(kinds.items()))

    @property
    def freed_bytes(self) -> int:
        return (self.removed_bytes + sum(o["size"] for o in self.evicted)
                + sum(size for _, size in self._temps))

    def as_dict(self, itemize: bool = True) -> dict[str, Any]:
        """The report as JSON; without ``itemize``, the totals only (no ``removed`` list)."""
        return {"dry_run": self.dry_run, **({"removed": self.removed} if itemize else {}),
                "removed_count": self.removed_count, "removed_by_kind": self.removed_by_kind,
                "evicted": self.evicted, "kept": self.kept, "freed_bytes": self.freed_bytes,
                "temp_removed": self.temp_removed, "warnings": self.warnings}


@dataclass
class FsckReport:
    """The findings of one fsck run."""

    checked: int = 0
    bytes: int = 0
    corrupt: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    dangling_edges: list[dict[str, str]] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    revived: list[str] = field(default_factory=list)
    temp_removed: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    refetched: list[str] = field(default_factory=list)
    registry_errors: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)
    modes_fixed: list[str] = field(default_factory=list)
    locks_removed: list[str] = field(default_factory=list)
    # registry rows that disagree with their blobs: {"table", "key", "id", "why"}
    mismatched: list[dict[str, Any]] = field(default_factory=list)
    # evaluation blobs stored whole that the leaderboard index does not list (a killed board
    # pull's); ``indexed``: those a repair indexed
    unindexed: list[str] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)
    # the disk was full: the check is whole, but verification times and adopted rows were
    # not recorded
    unrecorded: bool = False
    seconds: float = 0.0

    @property
    def faults(self) -> int:
        return (len(self.corrupt) + len(self.missing) + len(self.dangling_edges)
                + len(self.registry_errors) + len(self.unsafe) + len(self.mismatched)
                + len(self.unindexed))

    @property
    def clean(self) -> bool:
        return self.faults == 0

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data.update(faults=self.faults, clean=self.clean)
        return data


@dataclass
class RebuildReport:
    """What a registry rebuild recovered, and where the damaged file went."""

    kept_aside: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    edges: int = 0
    feature_rows: int = 0
    # packs whose rows no featureset vouches for: not indexed (see _rebuild._vouched_rows)
    packs_not_indexed: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    lost: tuple[str, ...] = ("refs", "aliases", "derivations", "file_state", "leases")

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "objects": sum(self.kinds.values()), "lost": list(self.lost)}
