"""The gate (vbstore/records/gate.py): every derivation op and every artifact kind declares its
check, so the next kind cannot arrive unchecked; an op with no check is never an answer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from vbstore.records import StoreReader, answer_differences
from vbstore.records.gate import ARRIVALS, QUESTIONS, resolve
from vbstore.store import KINDS, Store, derivation_spec

PACKAGE = Path(__file__).resolve().parents[2] / "vbstore"


def _ops_in_code() -> set[str]:
    """Every op the package makes a derivation spec of: ``derivation_spec("op", ...)``."""
    ops = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "derivation_spec" \
                    and node.args:
                first = node.args[0]
                assert isinstance(first, ast.Constant), \
                    f"{path}: derivation_spec with a computed op: name it, and declare it"
                ops.add(first.value)
    return ops


def test_the_scan_finds_the_ops_the_engine_makes():
    # a scan that found nothing would pass the next test whatever the table says
    assert {"result", "featureset", "head", "prefix", "finetune", "text-embeddings",
            "captions", "warp_views", "backbone"} <= _ops_in_code()


def test_every_derivation_op_declares_its_question():
    undeclared = sorted(_ops_in_code() - set(QUESTIONS))
    assert not undeclared, f"ops without a check in vbstore.records.gate.QUESTIONS: {undeclared}"
    for question in QUESTIONS.values():
        assert question.makes in KINDS, question
        assert callable(question.check)
        assert question.declares


def test_every_artifact_kind_declares_how_it_is_checked_on_arrival():
    assert set(ARRIVALS) == {*KINDS, "board"}, "a kind without a row in ARRIVALS"
    for kind, arrival in ARRIVALS.items():
        ways = [w for w in (arrival.check, arrival.judge, arrival.alone) if w]
        assert len(ways) == 1, f"{kind}: declare one of check, judge, alone"
        for named in (arrival.check, arrival.judge, arrival.named):
            if isinstance(named, str):
                assert callable(resolve(named)), f"{kind}: {named} is not a function"


@pytest.mark.parametrize("kind", ["evaluation", "board"])
def test_shared_boards_point_at_the_judge_of_their_own_path(kind):
    assert ARRIVALS[kind].judge is not None
    assert callable(resolve(ARRIVALS[kind].judge))


def test_an_op_that_declares_no_question_is_never_an_answer(tmp_path):
    store = Store(tmp_path / "s")
    oid = store.put_bytes(b"anything", "blob")
    differ = answer_differences(derivation_spec("made-up", 1, {}, {}), oid, StoreReader(store))
    assert differ
    assert "lineage only" in differ[0]
