"""The gate: what every artifact that enters a store from outside claims, and how it is checked.

A number crosses stores four ways: a pull, an import, a remote's binary-cache answer, a shared
board. Each used to check what it brought in its own place; this module is the one place that
knows, per kind, what an artifact claims to answer and how to verify it against what the store
already holds. Two tables, one row per kind, each row declaring its check where the kind is
declared (a test walks both and fails on a kind without one):

- :data:`QUESTIONS`, per derivation op: the artifact kind its output is and the check of a
  recorded answer against the spec it is filed under (:mod:`.answer`'s checks). An answer is
  served, recorded from a remote or kept by ``fsck`` only when its output declares the question
  asked (:func:`check_answer`); an op with no row has no check, so its outputs are carried for
  lineage only and never served as an answer.
- :data:`ARRIVALS`, per artifact kind (``vbstore.store.KINDS``, and the ``board`` listing): what
  a blob of that kind must agree with once every blob of a transfer is staged, before any enters
  the store (``remotes.install`` runs it on every pull and cache answer), or which function
  judges it on its own path (a board's evaluations; ``staged`` runs the same judge on one that
  arrives by a plain pull instead), or why its own shape is all it claims (its schema or
  safetensors header, checked blob by blob as it arrives); and, where a use sees more than an
  arrival can, the check at first use of one from outside (``used``: a prefix's activations).

A check named ``"module:function"`` lives above the records layer (a head's, a board's) and is
imported when first used, as the task registry finds a built-in's module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import MisfiledAnswer, VbstoreError
from . import answer
from .answer import StoreReader

AnswerCheck = Callable[[Mapping[str, Any], str, StoreReader], list[str]]
ArrivalCheck = Callable[[StoreReader, str], list[str]]


@dataclass(frozen=True)
class Question:
    """A derivation op: the kind its output is, what that output declares, and its check.

    Attributes:
        op: The op a derivation spec names (``derivation_spec(op, ...)``).
        makes: The artifact kind of its output (``captions`` makes a ``blob``).
        check: ``check(spec, output, reader)``: what the output declares that the spec does
            not ask (empty: it answers it).
        declares: What the output declares, in words (docs/formats.md).
    """

    op: str
    makes: str
    check: AnswerCheck
    declares: str


@dataclass(frozen=True)
class Arrival:
    """What an artifact kind arriving from outside must agree with.

    Exactly one way is declared: ``check`` (``check(reader, oid)``: the contradictions with
    what is staged or stored; a ``"module:function"`` string is imported on first use),
    ``judge`` (the ``"module:function"`` that judges it on its own path), or ``alone`` (why
    its own schema or header, checked as each blob arrives, is all it claims). ``named``: the
    ``"module:function"`` (``named(store, oid)``) a pull runs before an object of this kind gets
    a local name, unless the caller checks it itself (a head's compatibility check, an
    evaluation's indexing). ``staged``: for a kind judged on its own path, the
    ``"module:function"`` (``staged(reader, oid)``, as ``check``) that runs the same judge on
    one arriving by a plain pull or a cache answer instead, from the transfer's staged files.
    ``used``: the ``"module:function"`` that checks, once, at its first use, what only a
    computation can see of one that came from outside by any path (a prefix's activations
    through the frozen blocks: the engine runs it with the plan in hand).
    """

    kind: str
    check: ArrivalCheck | str | None = None
    judge: str | None = None
    alone: str | None = None
    named: str | None = None
    staged: str | None = None
    used: str | None = None


QUESTIONS: dict[str, Question] = {q.op: q for q in (
    Question("backbone", "backbone", answer._backbone,
             "its source and architecture"),
    Question("featureset", "featureset", answer._featureset,
             "its backbone, manifest and extractor, and row by row the image of each row"),
    Question("head", "head", answer._head,
             "its task, parameters, seed, extractor, backbone and train data"),
    Question("result", "result", answer._result,
             "its task, parameters, seeds, extractor, inputs and data"),
    Question("warp_views", "manifest", answer._views,
             "a manifest with as many samples as its source"),
    Question("captions", "blob", answer._captions,
             "the backbone, manifest and decoding that wrote its captions"),
    Question("prefix", "prefix", answer._prefix,
             "its backbone, blocks and manifest, and row by row the image each row holds"),
    Question("finetune", "head", answer._finetune,
             "its task, parameters, seed, blocks, backbone lr and train data; its fine-tuned "
             "weights name the same parent"),
    Question("text-embeddings", "tensors", answer._text,
             "the backbone and the digest and count of the texts it embeds"),
)}

# one row per artifact kind of vbstore.store.KINDS, and the board listing
ARRIVALS: dict[str, Arrival] = {a.kind: a for a in (
    Arrival("weights", alone="a weights record names tensors by hash and answers no question"),
    Arrival("backbone", alone="served only as the answer of op backbone, checked there"),
    Arrival("manifest", alone="its files are hashed against it when read"),
    Arrival("featureset", alone="served only as the answer of op featureset, checked there "
                                "row by row"),
    Arrival("result", alone="served only as the answer of op result, checked there"),
    Arrival("suite", alone="a protocol: it claims no number"),
    # a plain pull of an evaluation ref is judged as a board pull judges each of its
    # evaluations, then indexed (or re-judged) as they are: never a blob no board ranks
    Arrival("evaluation", judge="vbstore.suites._judge:judge_pulled",
            staged="vbstore.suites._share:judge_staged",
            named="vbstore.suites._share:index_pulled"),
    Arrival("board", judge="vbstore.remotes._boards:parse_board"),
    Arrival("pack", alone="its header names the extractor and image of each row; a featureset "
                          "is checked against it"),
    Arrival("head", check="vbstore.heads._share:arrival_problems",
            named="vbstore.heads._share:refuse_unfit"),
    Arrival("tensors", alone="served only as the answer of op text-embeddings, checked there, "
                             "or as a result's input named by its hash (load_clfs classifiers)"),
    # its header's image ids at arrival; its activations (first, middle and last rows run again
    # through the frozen blocks) when first used, however it came: cache answer or pull
    Arrival("prefix", check=lambda reader, oid: _prefix_arrival(reader, oid),
            used="vbstore.engine._finetune_compute:rows_agree"),
    Arrival("finetuned", check=lambda reader, oid: _finetuned_arrival(reader, oid)),
    Arrival("blob", alone="raw bytes claim nothing; served only as the answer of op captions"),
)}


def question(op: str) -> Question | None:
    """The declared question of derivation ``op`` (None: carried for lineage only)."""
    return QUESTIONS.get(op)


def makes(op: str) -> str | None:
    """The artifact kind an ``op``'s output is (None: an op with no declared question)."""
    declared = QUESTIONS.get(op)
    return declared.makes if declared is not None else None


def check_answer(spec: Mapping[str, Any], output: str, reader: StoreReader,
                 source: str | Callable[[], str]) -> None:
    """Refuse ``output`` as the answer of ``spec`` when it declares another question.

    ``source`` names where the answer came from (a callable: asked only for the error).

    Raises:
        MisfiledAnswer: naming ``source`` and what differs.
    """
    try:
        differences = answer_differences(spec, output, reader)
    except (VbstoreError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        differences = [f"it cannot be read as a {spec.get('op')} ({exc})"]
    if differences:
        raise MisfiledAnswer(output, source() if callable(source) else source, differences)


def answer_differences(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    """What ``output`` declares that ``spec`` does not ask (empty: it answers it); an op with
    no declared question is never an answer."""
    declared = QUESTIONS.get(spec["op"])
    if declared is None:
        return [f"op {spec['op']!r} declares no question to check: carried for lineage only"]
    return declared.check(spec, output, reader)


def arrival_problems(kind: str, oid: str, reader: StoreReader) -> list[str]:
    """How an arriving ``oid`` of ``kind`` contradicts what is staged or stored with it
    (empty for a kind whose own shape is all it claims); a kind judged on its own path is
    judged here by its ``staged`` judge."""
    declared = ARRIVALS.get(kind)
    check = None if declared is None else declared.check or declared.staged
    if check is None:
        return []
    try:
        return resolve(check)(reader, oid)
    except (VbstoreError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return [f"it cannot be read as a {kind} ({exc})"]


def check_named(kind: str, store: Any, oid: str) -> None:
    """Run the check ``kind`` declares before a pulled object gets a local name (a head's
    compatibility check); nothing for a kind that declares none.

    Raises:
        VbstoreError: the kind's own refusal (``HeadMismatch`` for a head).
    """
    declared = ARRIVALS.get(kind)
    if declared is not None and declared.named is not None:
        resolve(declared.named)(store, oid)


def resolve(check: Any) -> Any:
    """A check itself, or the function a ``"module:function"`` string names."""
    if not isinstance(check, str):
        return check
    module, _, name = check.partition(":")
    return getattr(importlib.import_module(module), name)


def _prefix_arrival(reader: StoreReader, oid: str) -> list[str]:
    header, meta = answer._tensors_header(reader, oid)
    manifest = meta.get("manifest")
    if not isinstance(manifest, str) or not reader.present(manifest):
        return answer.prefix_rows_differences(header, None)
    return answer.prefix_rows_differences(
        header, [s["image"] for s in reader.json(manifest)["samples"]])


def _finetuned_arrival(reader: StoreReader, oid: str) -> list[str]:
    # fine-tuned weights name their parent: its backbone record must name the same weights
    meta = answer._tensors_header(reader, oid)[1]
    backbone, weights = meta.get("backbone"), meta.get("weights")
    if not isinstance(backbone, str) or not isinstance(weights, str):
        return ["it names no parent backbone and weights"]
    if reader.present(backbone) and reader.json(backbone).get("weights") != weights:
        return [f"it names backbone {backbone[:12]}, whose weights are not {weights[:12]}"]
    return []
