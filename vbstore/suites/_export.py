"""Boards as text, Markdown, CSV and a bar chart; evaluations as Visin results files."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ._board import Board
from ._evaluate import Evaluation
from ._pages import page_notes

# Local imports: matplotlib loads when a board is plotted.

FORMATS = ("text", "md", "csv", "json")


def _num(value: float) -> str:
    return f"{value:.4f}"


def board_text(board: Board) -> str:
    """Visin's layout: a header, one line per ranked checkpoint, then what could not be ranked."""
    headline = board.suite.headline
    better = "higher" if headline["direction"] == "max" else "lower"
    pool = "observed evaluations" if board.observed_only else "evaluations"
    if board.project is not None:
        pool += f" in project {board.project}"
    pages = board.pagination or {}
    ranked = pages.get("ranked", {}).get("total", len(board.rows))
    unranked = pages.get("unranked", {}).get("total", len(board.unranked))
    lines = [
        f"{board.suite.ref}  {headline['key']} ({better} is better); "
        f"{ranked} ranked of {ranked + unranked} checkpoints, "
        f"{board.evaluations} {pool}"
    ]
    base = board.baseline
    for row in board.rows:
        if base is not None and not row["beats_baseline"]:
            lines.append(_baseline_line(base))
            base = None
        lines.append(
            f"{row['rank']:>4}  {row['label']:<32} {_num(row['headline'])}  "
            f"weakest {row['weakest']} {_num(row['weakest_value'])}  gap {_num(row['gap'])}  "
            f"{row['weights']} weights, {row['evidence']}  {row['attempts']} attempt"
            f"{'s' if row['attempts'] != 1 else ''}"
            + ("  ~ interval overlaps the row above" if row.get("overlaps_above") else "")
        )
    if base is not None:
        lines.append(_baseline_line(base))
    for item in board.unranked:
        lines.append(
            f"  not ranked  {item['label']} ({item['checkpoint'][:16]})  "
            f"{item['state']}: {', '.join(item['reasons'])}"
        )
    if any(row.get("overlaps_above") for row in board.rows):
        lines.append("~ its 95% interval over eval samples overlaps the row's above: their "
                     "order is not established on this data")
    if board.reorders:
        lines.append(f"ordered differently by: {', '.join(board.reorders)}")
    lines += page_notes(board)
    return "\n".join(lines)


def _baseline_line(base: dict[str, Any]) -> str:
    """The trivial predictor's row, placed where it ranks (rows below it do not beat it)."""
    return (f"{'--':>4}  {'baseline':<32} {_num(base['headline'])}  "
            f"{base['predictor']} (the trivial predictor on this data)")


def _header(board: Board) -> list[str]:
    return [
        "rank",
        "checkpoint",
        "weights",
        "evidence",
        board.suite.headline["key"],
        *(c["name"] for c in board.suite.conditions),
        "weakest",
        "gap",
        "attempts",
    ]


def _rows(board: Board) -> list[tuple[Any, ...]]:
    # a row's conditions are in the suite's order (see leaderboard)
    return [
        (
            r["rank"],
            r["label"],
            r["weights"],
            r["evidence"],
            r["headline"],
            *r["conditions"].values(),
            r["weakest"],
            r["gap"],
            r["attempts"],
        )
        for r in board.rows
    ]


def board_markdown(board: Board) -> str:
    """A Markdown table of the ranked rows, then a list of the checkpoints not ranked."""
    header = _header(board)
    headline = board.suite.headline
    lines = [
        f"**{board.suite.ref}** — {board.suite.name}; ranked by `{headline['key']}` "
        f"({'higher' if headline['direction'] == 'max' else 'lower'} is better)",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    # one format for every row: a ranked row has every condition (a number) by its verdict
    conditions = len(board.suite.conditions)
    line = "| %s | %s | %s | %s | %.4f | " + "%.4f | " * conditions + "%s | %.4f | %s |"
    lines += [line % row for row in _rows(board)]
    if not board.rows:
        lines.append("| " + " | ".join(["—"] * len(header)) + " |")
    if board.baseline is not None:  # the trivial predictor, for scale
        base = board.baseline
        lines.append(f"| — | baseline: {base['predictor']} | | | {base['headline']:.4f} | "
                     + "".join(f"{v:.4f} | " for v in base["conditions"].values()) + "| | |")
    for item in board.unranked:
        lines.append(
            f"\n- not ranked: {item['label']} ({item['weights']} weights) — "
            f"{item['state']}: {', '.join(item['reasons'])}"
        )
    return "\n".join(lines) + "\n"


def board_csv(board: Board) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_header(board))
    writer.writerows(_rows(board))
    return out.getvalue()


def board_plot(board: Board, path: str | Path) -> Path:
    """A bar chart of the headline with a marker per condition (needs matplotlib).

    Raises:
        UsageError: matplotlib is not installed, or nothing is ranked.
    """
    try:
        import matplotlib  # optional, and heavy: only a plot needs it

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(
            "a leaderboard plot needs matplotlib", hint="pip install 'vbstore[plot]'"
        ) from None
    if not board.rows:
        raise UsageError(f"{board.suite.ref} has no ranked checkpoint to plot")
    labels = [f"{r['rank']}. {r['label']}" for r in board.rows]
    figure, axes = plt.subplots(figsize=(max(4.0, 1.2 * len(labels)), 3.5))
    xs = range(len(labels))
    axes.bar(xs, [r["headline"] for r in board.rows], color="#8fb3d9", label="overall")
    markers = "os^vD<>"
    for i, condition in enumerate(c["name"] for c in board.suite.conditions):
        axes.scatter(
            xs,
            [r["conditions"].get(condition) for r in board.rows],
            marker=markers[i % 7],
            zorder=3,
            label=condition,
        )
    axes.set_xticks(list(xs), labels, rotation=20, ha="right")
    axes.set_ylabel(board.suite.headline["key"])
    axes.set_title(board.suite.ref)
    axes.legend(fontsize="small")
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


def visin_results(evaluation: Evaluation) -> dict[str, Any]:
    """The condition → class → metric results file ``visin evaluate`` accepts."""
    return evaluation.record.results
