"""Typed records: one frozen dataclass per JSON document kind the engine writes and reads.

Every reader (CLI, exports, lineage, remotes) goes through these instead of indexing raw dicts,
so a field is named in one place. Each record round-trips: ``Record.from_dict(d).to_dict() == d``
for every document its schema accepts, unknown fields included (kept in ``extra``), so records
written by an older or newer vbstore read back unchanged.
"""

from .head import CHECKED, HeadCompat
from .result import ResultRecord

__all__ = ["CHECKED", "HeadCompat", "ResultRecord"]
