"""Evaluations: one checkpoint's results on one suite version, judged and kept.

An evaluation is a content-addressed ``evaluation`` artifact (schemas/evaluation.schema.json)
plus a row in the registry's ``evaluations`` table, which is what leaderboards read. Recording
the same evidence again returns the stored evaluation with its first recording time.

Visin's run metadata (docs/suites.md, "Run metadata"):

- ``project`` and ``run`` (``{"id", "epoch"}``: the training run and epoch the checkpoint came
  from) are in the document, when given: they are what the uploader states about the
  evaluation, they travel with it on push and pull, and a retry that states them differently is
  a different evaluation. Given nowhere, they are absent, so every earlier id stays.
- ``uuid`` is the upload's name, not content: the registry maps it to the evaluation it first
  named (``evaluation_uuids``). The same evaluation again under it returns the stored one; a
  different one is refused (:class:`~vbstore.errors.UuidConflict`). The same evaluation under a
  second uuid is still one evaluation (one attempt): content addressing decides identity.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .._fields import options_of
from ..canonical import digest, dumps
from ..errors import UsageError, UuidConflict
from ..interop import WeightsIdentity
from ..records import (
    EvaluationRecord,
    ManifestRecord,
    ResultRecord,
    SuiteRecord,
    WeightsRecord,
)
from ..store import VERIFIED_COLUMNS, Store, remember_verified, verified_claims
from ._judge import judge_pulled
from ._manifest import manifest_sha256
from ._settings import PARAMS, content_sha256, settings_of, variant_key
from ._suite import Suite, get_suite, normalize, protocol_digest
from ._verdict import check_scores, evidence_of, judge, per_class


@dataclass(frozen=True)
class Evaluation:
    """A recorded (or, with ``dry_run``, only judged) evaluation.

    Attributes:
        doc: The evaluation document as stored; ``record`` reads it typed.
    """

    id: str | None
    doc: dict[str, Any]
    recorded: float | None
    new: bool

    @cached_property
    def record(self) -> EvaluationRecord:
        return EvaluationRecord.from_dict(self.doc)

    @property
    def verdict(self) -> dict[str, Any]:
        return self.record.verdict

    @property
    def ranked(self) -> bool:
        return self.record.ranked

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "recorded": self.recorded,
            "new": self.new,
            "stored": self.id is not None,
            **{k: v for k, v in self.doc.items() if k != "kind"},
        }


@dataclass(frozen=True)
class EvaluationFields:
    """What :func:`build` makes an evaluation of: the evidence and Visin's run metadata.

    ``results`` is Visin's condition → class → metric structure (``{"day": {"overall":
    {"top1": 0.9}}}``); ``checkpoint`` has ``id``, ``label`` and ``weights``. ``settings``
    are the comparability settings (vbstore.suites._settings; None when not known),
    ``classes`` Visin's ``{"scored", "ignored"}``, ``supersedes`` the evaluation this one
    corrects; ``project``, ``run`` and ``epoch`` Visin's run metadata (module docstring).
    """

    checkpoint: Mapping[str, str]
    results: Mapping[str, Any]
    sample_counts: Mapping[str, int]
    data: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None
    evaluator: Mapping[str, Any] | None = None
    comparable: bool = True
    sources: Mapping[str, Any] | None = None
    promoted_from: str | None = None
    settings: Mapping[str, Any] | None = None
    classes: Mapping[str, Any] | None = None
    supersedes: str | None = None
    project: str | None = None
    run: str | None = None
    epoch: int | None = None


def build(suite: Suite, **fields: Any) -> dict[str, Any]:
    """An evaluation document with its evidence level and verdict; ``fields`` are those of
    :class:`EvaluationFields`.

    Raises:
        TypeError: a keyword that is no field of :class:`EvaluationFields`, or a required one
            left out.
        InvalidScores: a score that is not finite, or a suite metric outside its ``range``
            (the rule a pulled evaluation meets too: ``._verdict.score_problems``).
    """
    f: EvaluationFields = options_of(EvaluationFields, fields, "build")
    doc: dict[str, Any] = {
        "kind": "evaluation",
        "suite": suite.ref,
        "suite_id": suite.id,
        "protocol_digest": suite.digest,
        "checkpoint": dict(f.checkpoint),
        "results": json.loads(json.dumps(f.results)),
        "sample_counts": dict(f.sample_counts),
        "data": dict(f.data) if f.data else None,
        "protocol": dict(f.protocol) if f.protocol else None,
        "evaluator": dict(f.evaluator) if f.evaluator else None,
        "comparable": f.comparable,
        "sources": dict(f.sources or {}),
    }
    check_scores(suite, doc["results"])
    if f.promoted_from:
        doc["promoted_from"] = f.promoted_from
    if f.settings is not None:
        doc["settings"] = json.loads(json.dumps(f.settings))
    if f.classes:
        doc["classes"] = {k: [str(c) for c in f.classes.get(k) or []]
                          for k in ("scored", "ignored")}
    if f.supersedes:
        doc["supersedes"] = f.supersedes
    with_run_metadata(doc, project=f.project, run=f.run, epoch=f.epoch)
    doc["evidence"], doc["missing"] = evidence_of(doc)
    doc["verdict"] = judge(suite, doc)
    return doc


@dataclass(frozen=True)
class RunMetadata:
    """Visin's run metadata of an upload (module docstring): ``project``, ``run`` and
    ``epoch`` go in the evaluation document, ``uuid`` (the upload's name) in the registry."""

    project: str | None = None
    run: str | None = None
    epoch: int | None = None
    uuid: str | None = None


def with_run_metadata(doc: dict[str, Any], *, project: str | None = None,
                      run: str | None = None, epoch: int | None = None) -> dict[str, Any]:
    """``doc`` with Visin's ``project`` and ``run`` (``{"id", "epoch"}``) set where given.

    Raises:
        UsageError: an empty project or run, or a negative epoch.
    """
    if project is not None:
        if not project.strip():
            raise UsageError("--project is empty", hint="name the project, or leave it out")
        doc["project"] = project
    if epoch is not None and (isinstance(epoch, bool) or epoch < 0):
        raise UsageError(f"--epoch {epoch} is not an epoch", hint="give an integer >= 0")
    if run is not None and not run.strip():
        raise UsageError("--run is empty", hint="give the training run's id, or leave it out")
    source = {k: v for k, v in (("id", run), ("epoch", epoch)) if v is not None}
    if source:
        doc["run"] = source
    return doc


# the registry migration that added ``evaluations.project`` and ``evaluation_uuids``: a
# read-only store made before it has no projects and no uuids
UPLOADS_FROM = 10


def uuid_names(store: Store, uuid: str) -> str | None:
    """The evaluation upload ``uuid`` named, or None."""
    if store.db.version < UPLOADS_FROM:
        return None
    row = store.db.one("SELECT id FROM evaluation_uuids WHERE uuid=?", (uuid,))
    return row[0] if row else None


def record(
    store: Store, doc: dict[str, Any], *, dry_run: bool = False, recorded: float | None = None,
    uuid: str | None = None,
) -> Evaluation:
    """Store the evaluation and index it for leaderboards; with ``dry_run`` store nothing.

    ``recorded`` overrides the recording time (a reproducible reference registry needs that).
    ``uuid`` names this upload (Visin's): the evaluation it named before is returned when it
    is this one.

    Raises:
        UuidConflict: ``uuid`` names another evaluation already (nothing is stored).
    """
    replaced = _check_supersedes(store, doc)
    if uuid is not None and not uuid.strip():
        raise UsageError("--uuid is empty", hint="give the upload's id, or leave it out")
    if dry_run:  # a check names no upload (Visin's dry run sends no uuid)
        return Evaluation(None, doc, None, False)
    if uuid is not None:
        stored = uuid_names(store, uuid)
        if stored is not None and stored != digest(dumps({**doc, "kind": "evaluation"})):
            raise UuidConflict(uuid, stored)
    typed = EvaluationRecord.from_dict(doc)
    edges: dict[str, str | list[str]] = {"suite": typed.suite_id}
    sources = [
        v for v in (typed.sources or {}).values()
        if isinstance(v, str) and len(v) == 64 and store.has(v)
    ]
    if sources:
        edges["result"] = sources
    oid = store.put_json(doc, "evaluation", edges=edges)
    when = time.time() if recorded is None else recorded
    with store.db.write() as conn:
        inserted = index_evaluation(conn, oid, typed, when)
        when = conn.execute("SELECT recorded FROM evaluations WHERE id=?", (oid,)).fetchone()[0]
        if replaced is not None:
            supersede(conn, replaced, oid)
        if uuid is not None:
            # the check above ran outside this transaction: a racing upload under the same
            # uuid keeps its row, and this one is refused as a conflict
            conn.execute("INSERT OR IGNORE INTO evaluation_uuids(uuid, id, recorded) "
                         "VALUES (?,?,?)", (uuid, oid, time.time()))
            named = conn.execute("SELECT id FROM evaluation_uuids WHERE uuid=?",
                                 (uuid,)).fetchone()[0]
            if named != oid:
                raise UuidConflict(uuid, named)
    return Evaluation(oid, doc, when, bool(inserted))


def _check_supersedes(store: Store, doc: dict[str, Any]) -> str | None:
    """The stored evaluation ``doc`` corrects (Visin's ``supersedes``): same suite version,
    same checkpoint.

    Raises:
        ObjectNotFound: no such object.
        UsageError: not an evaluation, or of another suite or checkpoint.
    """
    ref = doc.get("supersedes")
    if not ref:
        return None
    old = open_evaluation(store, ref)
    if old.record.suite != doc["suite"] or old.record.checkpoint["id"] != doc["checkpoint"]["id"]:
        raise UsageError(
            f"evaluation {old.id[:12] if old.id else ref} is {old.record.checkpoint['label']} on "
            f"{old.record.suite}: a correction replaces an evaluation of the same checkpoint on "
            "the same suite version",
            hint="name an evaluation of this checkpoint on this suite (vbstore evaluations)",
        )
    doc["supersedes"] = old.id  # the full id, whatever prefix was given
    return old.id


# the registry migration that added ``evaluations.variant`` and ``superseded_by``: a read-only
# store made before it is read as having no variants and no corrections
VARIANTS_FROM = 7


def supersede(conn, old: str, new: str) -> None:
    """``old`` leaves the ranking (even when ``new`` cannot be ranked yet) and stays stored as an
    attempt."""
    if old != new:
        conn.execute("UPDATE evaluations SET superseded_by=?, ranked=0 WHERE id=?", (new, old))


def index_evaluation(conn, oid: str, evaluation: EvaluationRecord, when: float) -> bool:
    """Add a stored evaluation to the leaderboard index (once); return whether it was new.

    ``ranked`` there means it ranks now: its verdict ranks it and no correction replaced it.
    """
    checkpoint, verdict = evaluation.checkpoint, evaluation.verdict
    project = evaluation.extra.get("project")
    # what the blob says, for boards to compare its row with (the verified-scores cache):
    # ``evaluation`` is the stored blob's document, judged by the caller
    claims = verified_claims({"suite": evaluation.suite, "checkpoint": checkpoint,
                              "verdict": verdict, "evidence": evaluation.evidence})
    remember_verified(conn, [(oid, claims)])
    scores = claims[VERIFIED_COLUMNS.index("scores")]
    return bool(conn.execute(
        "INSERT OR IGNORE INTO evaluations(id, suite, checkpoint, label, weights, state, "
        "ranked, evidence, recorded, scores, reasons, variant, project) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            oid,
            evaluation.suite,
            checkpoint["id"],
            checkpoint["label"],
            checkpoint["weights"],
            evaluation.state,
            int(evaluation.ranked),
            evaluation.evidence,
            when,
            scores,
            json.dumps(evaluation.reasons),
            variant_key(verdict.get("variant") or {}),
            project if isinstance(project, str) else None,
        ),
    ).rowcount)


def reindex(store: Store) -> dict[str, int]:
    """Rebuild the suite and evaluation indexes from their blobs (after a registry rebuild).

    An evaluation's recording time is then its blob's creation time, which keeps the order of
    attempts a leaderboard ranks by. One that :func:`._judge.judge_pulled` refuses (a blob a
    plain pull brought in, never judged) stays unindexed, as ``fsck --repair`` leaves it.
    """

    suites, evaluations = 0, 0
    with store.db.write() as conn:
        for info in store.ls("suite"):
            suite = SuiteRecord.from_dict(normalize(store.read_json(info.id)))
            suites += conn.execute(
                "INSERT OR IGNORE INTO suites(slug, version, id, protocol_digest, created) "
                "VALUES (?,?,?,?,?)", (suite.slug, suite.version, info.id,
                                       protocol_digest(suite.protocol), info.created),
            ).rowcount
        found = {info.id: (EvaluationRecord.from_dict(store.read_json(info.id)), info.created)
                 for info in store.ls("evaluation")}
        # a pulled evaluation judged again here is ranked as its copy, never beside it
        replaced = {r.extra.get("rejudged_from") for r, _ in found.values()}
        corrections = []
        refused = {oid for oid, (typed, _) in found.items()
                   if oid not in replaced and judge_pulled(store, typed.to_dict())}
        for oid, (typed, created) in found.items():
            if oid in refused:
                continue
            if oid not in replaced:
                evaluations += index_evaluation(conn, oid, typed, created)
            if typed.extra.get("supersedes"):
                corrections.append((typed.extra["supersedes"], oid))
        for old, new in corrections:  # once every evaluation is indexed, whatever the order
            supersede(conn, old, new)
    return {"suites": suites, "evaluations": evaluations}


def open_evaluation(store: Store, ref: str) -> Evaluation:
    """A stored evaluation by id, prefix or ref.

    Raises:
        ObjectNotFound: no such object.
        UsageError: the object is not an evaluation.
    """
    oid = store.resolve(ref)
    kind = store.info(oid).kind
    if kind != "evaluation":
        raise UsageError(
            f"{oid[:12]} is a {kind}, not an evaluation",
            hint="evaluate a result first: vbstore evaluate RESULT --suite SLUG@V",
        )
    row = store.db.one("SELECT recorded FROM evaluations WHERE id=?", (oid,))
    return Evaluation(oid, store.read_json(oid), row[0] if row else None, False)


def list_evaluations(
    store: Store, suite: str | None = None, state: str | None = None,
    project: str | None = None,
) -> list[dict[str, Any]]:
    """Evaluation rows (newest first), optionally of one suite ref, one verdict state and one
    project."""
    superseded_by = "superseded_by" if store.db.version >= VARIANTS_FROM else "NULL"
    sql = (  # the f-string adds a column name or NULL
        "SELECT id, suite, checkpoint, label, weights, state, ranked, evidence, recorded, reasons, "  # noqa: S608
        f"{superseded_by} FROM evaluations"
    )
    where, params = [], []
    if suite is not None:
        where.append("suite=?")
        params.append(get_suite(store, suite).ref)
    if state is not None:
        where.append("state=?")
        params.append(state)
    if project is not None:
        where.append("project=?" if store.db.version >= UPLOADS_FROM else "0")
        params += [project] if store.db.version >= UPLOADS_FROM else []
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = store.db.query(sql + " ORDER BY recorded DESC, id", params)
    keys = (
        "id",
        "suite",
        "checkpoint",
        "label",
        "weights",
        "state",
        "ranked",
        "evidence",
        "recorded",
    )
    return [
        {**dict(zip(keys, r[:9], strict=True)), "ranked": bool(r[6]), "reasons": json.loads(r[9]),
         "superseded_by": r[10]}
        for r in rows
    ]


# ---- evidence from vbstore's own results ---------------------------------------------------


def from_results(store: Store, suite: Suite, results: Mapping[str, str]) -> dict[str, Any]:
    """An *observed* evaluation from stored result records, one per condition.

    vbstore computed them, so data (the condition samples' manifest digest), protocol (task and
    params) and evaluator (vbstore's version) are all known.

    Raises:
        UsageError: a condition the suite does not have, an object that is not a result, or
            results of different weights.
    """
    names = [c["name"] for c in suite.conditions]
    unknown = sorted(set(results) - set(names))
    if unknown:
        raise UsageError(
            f"{suite.ref} has no condition {unknown[0]!r}",
            hint=f"its conditions: {', '.join(names)}",
        )
    records: dict[str, tuple[str, ResultRecord]] = {}
    for condition, ref in results.items():
        oid = store.resolve(ref)
        kind = store.info(oid).kind
        if kind != "result":
            raise UsageError(f"{oid[:12]} is a {kind}, not a result")
        records[condition] = (oid, ResultRecord.from_dict(store.read_json(oid)))
    checkpoints = {_checkpoint(store, r)["id"] for _, r in records.values()}
    if len(checkpoints) > 1:
        raise UsageError(
            "these results come from different weights; one evaluation is one checkpoint",
            hint="evaluate each backbone's results separately",
        )
    first = next(iter(records.values()))[1]
    manifests = {
        c: (r.eval_data.get("split"), ManifestRecord.from_dict(store.read_json(
            r.eval_data["manifest"])))
        for c, (_, r) in records.items()
    }
    samples = {c: [s["name"] for s in m.samples] for c, (_, m) in manifests.items()}
    params = [r.params for _, r in records.values()]
    tasks = {r.task for _, r in records.values()}
    settings = _one_setting(store, records)
    classes = next((m.classes for _, m in manifests.values() if m.classes), None)
    return build(
        suite,
        checkpoint=_checkpoint(store, first),
        results={c: per_class(r.metrics) for c, (_, r) in records.items()},
        sample_counts={c: len(s) for c, s in samples.items()},
        # vbstore's manifests are external data to Visin: its names digest, and what the
        # samples are (data(content)) where the suite pins that too
        data={"kind": "external", "manifestSha256": manifest_sha256(samples),
              "contentSha256": content_sha256(manifests)},
        protocol={
            "task": first.task if len(tasks) == 1 else ",".join(sorted(tasks)),
            "params": params[0] if all(p == params[0] for p in params) else {},
        },
        evaluator={"package": "vbstore", "version": (first.versions or {}).get("vbstore", "")},
        comparable=all(r.is_comparable for _, r in records.values()),
        sources={c: oid for c, (oid, _) in records.items()},
        settings=settings,
        classes={"scored": classes, "ignored": []} if classes else None,
    )


def _one_setting(store: Store, records: Mapping[str, tuple[str, ResultRecord]]
                 ) -> dict[str, Any]:
    """The settings every condition's result shares.

    Raises:
        UsageError: the conditions were computed with different settings.
    """
    each = {c: settings_of(store, r) for c, (_, r) in records.items()}
    first = next(iter(each.values()))
    for condition, settings in each.items():
        differ = sorted(k for k in first if k != PARAMS and settings.get(k) != first[k])
        if differ:
            raise UsageError(
                f"condition {condition!r} was computed with other settings ({', '.join(differ)})"
                ": one evaluation is one configuration",
                hint="compute every condition with the same settings (get result --suite does)",
            )
    return first


def match_conditions(store: Store, suite: Suite, results: list[str]) -> dict[str, str]:
    """Each result under the condition its eval split names (``NAME=RESULT`` names it explicitly).

    A suite with one condition takes one plain result. Raises UsageError when a result's split
    matches no condition.
    """
    out: dict[str, str] = {}
    by_split = {suite.split_of(c["name"]): c["name"] for c in suite.conditions}
    for item in results:
        name, sep, ref = item.partition("=")
        if not sep:
            ref = item
            split = ResultRecord.from_dict(store.read_json(store.resolve(ref))).eval_data.get(
                "split")
            if split in by_split:
                name = by_split[split]
            elif len(suite.conditions) == 1 and len(results) == 1:
                name = suite.conditions[0]["name"]
            else:
                raise UsageError(
                    f"result {ref} (split {split!r}) matches no condition of {suite.ref}",
                    hint="name it: CONDITION=RESULT",
                )
        if name in out:
            raise UsageError(f"condition {name!r} is given twice")
        out[name] = ref
    return out


def _checkpoint(store: Store, record: ResultRecord) -> dict[str, str]:
    weights_id = record.inputs.get("weights")
    identity, label = weights_id, record.spec
    if weights_id and store.has(weights_id):
        weights = WeightsRecord.from_dict(store.read_json(weights_id))
        known = WeightsIdentity.of(record, weights)
        if known is not None:  # what a CLIP_benchmark export's `vbstore` field reads back as
            return known.checkpoint()
        identity = weights.tensor_hash
        if weights.origin == "random" and weights.seed is not None:
            label += f" seed={weights.seed}"  # two random inits are two checkpoints
    return {
        "id": identity or "unknown",
        "label": label,
        "weights": record.weights_kind or "unknown",
    }


# ---- the engine's side: a suite's conditions as separate results ----------------------------


def conditions_to_compute(suite: Suite) -> list[tuple[str, str]]:
    """``(condition, split)`` pairs: where ``get result --suite`` finds each condition's samples.

    A condition without ``split`` is read from the split of its own name.
    """
    return [(c["name"], suite.split_of(c["name"])) for c in suite.conditions]


def evaluate_with(
    store: Store, suite: Suite, compute: Callable[[str, str], str], *, dry_run: bool = False
) -> Evaluation:
    """Compute every condition with ``compute(condition, split_or_list) -> result id``, then judge.

    This is the hook the engine calls for ``get result --suite``: the engine computes one result
    per condition (each on its own sub-manifest), the suite aggregates them.
    """
    results = {name: compute(name, split) for name, split in conditions_to_compute(suite)}
    return record(store, from_results(store, suite, results), dry_run=dry_run)
