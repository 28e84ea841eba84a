"""Board pages, as Visin pages a leaderboard: ``page`` and ``limit`` (at most 100) choose a
slice of the ranked rows, ``unranked_page`` one of the checkpoints that could not be ranked.

Ranks stay global (page 2 starts where page 1 stopped, ties included), and each list says
where its page sits: ``{"page", "limit", "total", "pages"}``, Visin's ``Pagination``. A local
board has no response size to respect, so asking for no page shows the whole board (Visin's
``all_pages``); the cap of 100 per page is kept so a page means the same in both tools.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..errors import UsageError
from ._board import Board

MAX_LIMIT = 100  # Visin's largest page (and its default)


def _slice(items: list[dict[str, Any]], page: int, limit: int, what: str
           ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    pages = max(1, math.ceil(len(items) / limit))
    if page > pages:
        raise UsageError(f"{what} page {page} does not exist: {len(items)} {what} make "
                         f"{pages} page{'s' if pages != 1 else ''} of {limit}",
                         hint=f"ask for a page from 1 to {pages}")
    start = (page - 1) * limit
    return items[start:start + limit], {"page": page, "limit": limit, "total": len(items),
                                        "pages": pages}


def board_page(board: Board, *, page: int | None = None, limit: int | None = None,
               unranked_page: int | None = None) -> Board:
    """One page of ``board`` (the whole board when no page is asked for).

    Raises:
        UsageError: a page below 1 or past the last, or a limit outside 1..100.
    """
    if page is None and limit is None and unranked_page is None:
        return board
    limit = MAX_LIMIT if limit is None else limit
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"--limit {limit}: a page holds 1 to {MAX_LIMIT} checkpoints",
                         hint=f"give --limit between 1 and {MAX_LIMIT}, or --all")
    for name, value in (("--page", page), ("--unranked-page", unranked_page)):
        if value is not None and value < 1:
            raise UsageError(f"{name} {value}: pages count from 1", hint=f"give {name} 1 or more")
    rows, ranked = _slice(board.rows, page or 1, limit, "ranked checkpoints")
    unranked, left_out = _slice(board.unranked, unranked_page or 1, limit, "unranked checkpoints")
    baseline = board.baseline
    if baseline is not None:  # its line shows on the page where it falls among the rows
        falls = next((i for i, row in enumerate(board.rows) if not row.get("beats_baseline")),
                     len(board.rows))
        start = (ranked["page"] - 1) * limit
        if not (start <= falls < start + limit
                or (falls == len(board.rows) and start + limit >= len(board.rows))):
            baseline = None
    return replace(board, rows=rows, unranked=unranked, baseline=baseline,
                   pagination={"ranked": ranked, "unranked": left_out})


def page_notes(board: Board) -> list[str]:
    """Visin's notes under a paged board: ``ranked checkpoints: page 1 of 3 (100 of 250
    shown)``, for each list that has more than one page."""
    out = []
    for what, shown in (("ranked", board.rows), ("unranked", board.unranked)):
        where = (board.pagination or {}).get(what)
        if where and where["pages"] > 1:
            out.append(f"({what} checkpoints: page {where['page']} of {where['pages']} "
                       f"({len(shown)} of {where['total']} shown))")
    return out
