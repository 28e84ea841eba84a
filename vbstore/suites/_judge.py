"""Judging an evaluation that arrived from outside: what it claims, checked against this store.

An evaluation's verdict and evidence level are pure functions of its document
(:mod:`._verdict`), so a pulled one is simply judged again (:func:`rejudge`). What a document
cannot prove by itself is checked against what this store already holds
(:func:`judge_pulled`): the scores of the results it names, the evaluation it corrects, the
evaluation it claims to be a promoted copy of. Every score that enters, by ``evaluate``,
``import results`` or a pull, passes :func:`._verdict.score_problems`: finite, and inside its suite
metric's ``range``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from ..errors import SchemaError, SuiteNotFound, VbstoreError
from ..records import EvaluationRecord, ResultRecord
from ..store import Store
from ._suite import Suite, get_suite
from ._verdict import evidence_of, judge, per_class, score_problems, short_repr

REJUDGED = "rejudged_from"  # the edge (and field) from a re-judged copy to the remote's original
# what a promoted copy carries over from its origin unchanged (``promote`` changes only the
# suite, the checkpoint's label and the sample counts the maintainer vouches for)
PROMOTED_SAME = ("results", "data", "protocol", "evaluator", "comparable", "sources", "settings",
                 "classes")

EVALUATION_BYTES = 1 << 20  # a larger plain blob is not read as an evaluation (its kind's cap)
Lookup = Callable[[str], "dict[str, Any] | None"]
Finder = Callable[[str], "EvaluationRecord | None"]
# the parts of an evaluation its record holds as fields; any other part is in its ``extra``
_FIELDS = frozenset(f.name for f in fields(EvaluationRecord)) - {"extra"}


def judge_pulled(store: Store, evaluation: Mapping[str, Any], *, suite: Suite | None = None,
                 lookup: Lookup | None = None) -> list[str]:
    """What keeps ``evaluation`` (a document that came from outside) out of this store; empty
    when it may enter. :func:`rejudge` then says what it is ranked as.

    Checked: it is of ``suite`` (by default the suite it names, which must be here); its scores
    (:func:`score_problems`); every result it names that this store holds has exactly the
    scores it carries; the evaluation it ``supersedes`` is of the same checkpoint on the same
    suite version; the evaluation it claims promotion from exists and it is a copy of it.
    ``lookup(id)`` finds an evaluation document arriving along with this one (a board's
    others); evaluations this store holds are found without it.
    """
    pulled = EvaluationRecord.from_dict(evaluation)
    try:
        named = get_suite(store, pulled.suite) if suite is None else suite
    except SuiteNotFound:
        return [f"its suite {pulled.suite} is not in this store"]
    if pulled.suite != named.ref or pulled.suite_id != named.id:
        return [f"it is an evaluation of {pulled.suite} ({str(pulled.suite_id)[:12]}), not of "
                f"{named.ref} ({named.id[:12]})"]
    problems = score_problems(named, pulled.results)
    problems += _result_problems(store, pulled)
    find = _finder(store, lookup)
    old = pulled.extra.get("supersedes")
    if old is not None:
        replaced = find(old) if isinstance(old, str) else None
        if replaced is None:
            problems.append(f"it corrects evaluation {str(old)[:12]}, which is neither on the "
                            "board nor in this store")
        elif (replaced.suite, replaced.checkpoint["id"]) != (
                pulled.suite, pulled.checkpoint["id"]):
            problems.append(
                f"it corrects evaluation {old[:12]} of {replaced.checkpoint['id']} on "
                f"{replaced.suite}, but a correction replaces an evaluation of the same "
                f"checkpoint ({pulled.checkpoint['id']}) on the same suite version")
    origin = pulled.extra.get("promoted_from")
    if origin is not None:
        was = find(origin) if isinstance(origin, str) else None
        if was is None:
            problems.append(f"it claims promotion from {str(origin)[:12]}, which is neither on "
                            "the board nor in this store")
        else:
            problems += _copy_problems(pulled, was, origin)
    return problems


def rejudge(suite: Suite, doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """None when ``doc``'s own verdict and evidence are what this store judges them to be; else
    the re-judged copy of it, which names the original under ``rejudged_from``."""
    claimed = EvaluationRecord.from_dict(doc)
    evidence, missing = evidence_of(dict(doc))
    verdict = judge(suite, dict(doc))
    if (claimed.evidence, claimed.missing, claimed.verdict) == (evidence, missing, verdict):
        return None
    return {**doc, "evidence": evidence, "missing": missing, "verdict": verdict}


def _finder(store: Store, lookup: Lookup | None) -> Finder:
    """Find an evaluation by id: arriving along (``lookup``), else held by this store; None
    when neither has an evaluation of that id."""
    def find(oid: str) -> EvaluationRecord | None:
        found = lookup(oid) if lookup is not None else None
        if found is not None:
            return _evaluation(found)
        if len(oid) != 64 or not store.has(oid):
            return None
        try:
            # a re-judged original is kept as a plain blob: it is still that evaluation
            info = store.info(oid)
            if info.kind not in ("evaluation", "blob") or info.size > EVALUATION_BYTES:
                return None
            held = _evaluation(store.read_json(oid))
        except (VbstoreError, ValueError):
            return None
        return held if held is not None and held.extra.get("kind") == "evaluation" else None

    return find


def _evaluation(doc: Any) -> EvaluationRecord | None:
    """The record of ``doc``; None when it is not a document an evaluation record reads."""
    if not isinstance(doc, dict):
        return None
    try:
        return EvaluationRecord.from_dict(doc)
    except SchemaError:
        return None


def _part(evaluation: EvaluationRecord, name: str) -> Any:
    """The top-level part ``name`` of ``evaluation``'s document (None: it has none)."""
    return getattr(evaluation, name) if name in _FIELDS else evaluation.extra.get(name)


def _result_problems(store: Store, evaluation: EvaluationRecord) -> list[str]:
    """A named result this store holds whose scores differ from what ``evaluation`` carries."""
    problems = []
    for condition, oid in (evaluation.sources or {}).items():
        if not (isinstance(oid, str) and len(oid) == 64 and store.has(oid)):
            continue
        try:
            if store.info(oid).kind != "result":
                continue
            metrics = ResultRecord.from_dict(store.read_json(oid)).metrics
        except (VbstoreError, ValueError, KeyError, TypeError):
            continue  # not a result this store can read: nothing to compare with
        want = per_class(metrics)
        results = evaluation.results
        have = (results.get(condition) or {}) if isinstance(results, Mapping) else {}
        for name, block in want.items():
            for key, value in block.items():
                got = (have.get(name) or {}).get(key) if isinstance(have, Mapping) else None
                if got != value:
                    where = condition if name == "overall" else f"{condition}/{name}"
                    problems.append(f"its {where} {key} is {short_repr(got)} but result {oid[:12]} "
                                    f"in this store says {short_repr(value)}")
    return problems


def _copy_problems(evaluation: EvaluationRecord, origin: EvaluationRecord, oid: str
                   ) -> list[str]:
    """Where a claimed promoted copy differs from the evaluation it names as its origin."""
    differ = [(f"checkpoint {part}", evaluation.checkpoint.get(part), origin.checkpoint.get(part))
              for part in ("id", "weights")]
    differ += [(name, _part(evaluation, name), _part(origin, name)) for name in PROMOTED_SAME]
    return [f"it claims promotion from {oid[:12]} but its {name} is {short_repr(mine)} where the "
            f"origin's is {short_repr(theirs)}" for name, mine, theirs in differ if mine != theirs]
