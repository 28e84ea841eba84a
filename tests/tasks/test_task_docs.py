"""docs/tasks.md carries tables generated from the task declarations; they must not drift.

To regenerate after changing a declaration: ``python tests/tasks/test_task_docs.py`` prints
every table; paste each where the test says it is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vbstore.tasks import Param, Task, get_task, list_tasks

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tasks.md"
NOTICE = ROOT / "NOTICE"


def _bounds(spec: Param) -> str:
    parts = []
    if spec.minimum is not None:
        parts.append(f">= {spec.minimum:g}")
    if spec.above is not None:
        parts.append(f"> {spec.above:g}")
    if spec.maximum is not None:
        parts.append(f"<= {spec.maximum:g}")
    if spec.choices is not None:
        parts.append(", ".join(f"`{c}`" for c in spec.choices))
    if spec.file is not None:
        parts.append(", ".join([f"`{n}`" for n in spec.file.names if n] + ["a file"]))
    return "; ".join(parts) or "any"


def summary_table() -> str:
    rows = [
        "| task | level | kind | needs text | op_version | headline |",
        "|---|---|---|---|---|---|",
    ]
    for name in list_tasks():
        t = get_task(name)
        kind = "trains a head" if t.trains_head else "zero-shot"
        text = "yes" if t.needs_text else "no"
        rows.append(f"| `{name}` | {t.level} | {kind} | {text} | {t.op_version} | `{t.headline}` |")
    return "\n".join(rows)


def task_tables(task: Task) -> str:
    lines = []
    if task.params:
        lines += ["| parameter | default | allowed | meaning |", "|---|---|---|---|"]
        for key, spec in sorted(task.params.items()):
            lines.append(f"| `{key}` | `{spec.default!r}` | {_bounds(spec)} | {spec.help} |")
    else:
        lines.append("No parameters.")
    lines += ["", "| metric | better | meaning |", "|---|---|---|"]
    for metric in task.metrics:
        star = " (headline)" if metric.name == task.headline else ""
        lines.append(f"| `{metric.name}`{star} | {metric.direction} | {metric.description} |")
    for metric in task.train_metrics:
        lines.append(f"| `{metric.name}` (train) | {metric.direction} | {metric.description} |")
    return "\n".join(lines)


def test_summary_table_is_current():
    assert summary_table() in DOC.read_text(), "regenerate the summary table in docs/tasks.md"


@pytest.mark.parametrize("name", list_tasks())
def test_task_tables_are_current(name):
    text = DOC.read_text()
    assert f"## `{name}`" in text, f"docs/tasks.md has no section for {name}"
    assert task_tables(get_task(name)) in text, f"regenerate the tables of {name} in docs/tasks.md"


def test_notice_cites_the_protocols():
    text = NOTICE.read_text()
    for source in ("DINOv2", "CLIP_benchmark", "scikit-learn", "Apache-2.0", "MIT", "BSD-3-Clause"):
        assert source in text


if __name__ == "__main__":
    print(summary_table(), end="\n\n")
    for task_name in list_tasks():
        print(f"## `{task_name}`\n\n{task_tables(get_task(task_name))}\n")
