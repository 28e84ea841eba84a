"""``get_result`` and ``get_head``: requests in, a plan, then only the missing work.

A result's derivation key is made from cheap ids only (backbone, manifests, head) plus every
setting (extractor, task params, seeds), so a cached result is found without touching features,
and therefore without importing torch. Only on a miss are features, heads and metrics computed,
each through its own derivation, so a second task on the same features runs no forward pass.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .._fields import options_of, split_keywords
from .._progress import about, reporting
from ..data import decode_once
from ..errors import (
    BlobMissing,
    CorruptObject,
    NotReproduced,
    ObjectNotFound,
    UsageError,
    field_ref,
)
from ..records import ResultRecord
from ..store import Made, Store
from ..tasks import get_task
from ._cache import Derived, answer_check, derive
from ._getfeatures import FeatureResult, execute_features, plan_features
from ._language import with_language
from ._options import BackboneOptions, HeadOptions, ResultOptions, RunOptions
from ._plan import Plan, plan, plan_head
from ._requests import (
    BackboneRequest,
    DataRef,
    FeaturesRequest,
    HeadRequest,
    ProbeRequest,
    ResultRequest,
    check_val_split,
    layers_arg,
)
from ._run import Run

if TYPE_CHECKING:
    from ..records import HeadCompat
    from ..store import RunInfo

REPRODUCED_TOLERANCE = 1e-6
_T = TypeVar("_T")


@dataclass
class Result:
    """A result record and how it was obtained.

    Attributes:
        source: ``computed``, ``store`` (a cached answer of this store) or ``remote`` (a
            configured remote's binary cache answered; ``remote`` names it).
        recorded: For a cached answer, where its derivation record came from: ``computed``
            (here), ``remote NAME`` (a binary cache answered it before), ``pulled from NAME``;
            None when it was recorded before vbstore kept that.
    """

    id: str
    record: ResultRecord
    from_cache: bool
    seconds: float
    reproduced: dict[str, Any] | None = None
    source: str = "computed"
    remote: str | None = None
    computed: tuple[str, ...] = ()
    extracted: int = 0
    recorded: str | None = None
    run: RunInfo | None = None
    # per feature set this call read (eval, train, views): its id, images extracted now and
    # rows reused from the store; empty when the result itself was found
    features: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        """Where the answer came from, in words: ``computed``, ``cached in the store`` (with
        where the store had it from, when not computed here) or ``fetched from remote NAME``."""
        if self.source == "remote":
            return f"fetched from remote {self.remote}"
        if self.source != "store":
            return "computed"
        return cached_words(self.recorded)

    @property
    def metrics(self) -> dict[str, Any]:
        return self.record.metrics

    def as_dict(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "from_cache": self.from_cache,
            "source": self.source,
            "seconds": round(self.seconds, 4),
            "record": self.record.to_dict(),
        }
        if self.run is not None:  # when, where and how long it was computed (the run log)
            out["run"] = self.run.as_dict()
        if self.remote is not None:
            out["remote"] = self.remote
        if self.recorded not in (None, "computed"):
            out["recorded"] = self.recorded
        if self.reproduced is not None:
            out["reproduced"] = self.reproduced
        if self.features:
            out["features"] = self.features
        return out


def cached_words(recorded: str | None) -> str:
    """``cached in the store``, saying where the store had the answer from when it was not
    computed here (``remote team`` → fetched from remote team; ``pulled from team``)."""
    if recorded in (None, "computed"):
        return "cached in the store"
    assert recorded is not None
    said = f"fetched from {recorded}" if recorded.startswith("remote ") else recorded
    return f"cached in the store ({said})"


@dataclass
class HeadResult:
    """A stored head, its compatibility record, and how it was obtained."""

    id: str
    record: HeadCompat
    from_cache: bool
    seconds: float
    source: str = "computed"
    remote: str | None = None

    @property
    def where(self) -> str:
        """``trained``, ``cached in the store`` or ``fetched from remote NAME``."""
        if self.source == "remote":
            return f"fetched from remote {self.remote}"
        return "cached in the store" if self.source == "store" else "trained"

    def as_dict(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "from_cache": self.from_cache,
            "source": self.source,
            "seconds": round(self.seconds, 4),
            "record": self.record.to_dict(),
        }
        if self.remote is not None:
            out["remote"] = self.remote
        return out


def execute(
    the_plan: Plan,
    *,
    device: str | None = None,
    progress: bool | Callable[..., Any] = True,
    recompute: bool = False,
    executor: Any = None,
    lease_timeout: float | None = None,
    batch_size: int = 32,
) -> Result:
    """Compute what ``the_plan`` lacks and return the result (from the store when it has it).

    ``lease_timeout`` bounds the wait for another process computing this very result (0: only
    try); the features and heads below it are always waited for. ``batch_size`` is the
    extraction batch (images per forward pass): no id depends on it (the head's training batch
    is the task parameter ``batch_size``).

    Raises:
        UsageError: the plan was made by a dry run with a backbone never built.
        NotReproduced: ``recompute`` gave other numbers than the stored result.
        LeaseTimeout: another process still computes this result after ``lease_timeout``.
        StoreReadOnly: the request has notes and the store is read-only (before computing).
    """
    the_plan.derivation  # noqa: B018 - UsageError for a dry-run plan, before any lease
    request = the_plan.request
    if isinstance(request, ResultRequest) and request.notes:
        the_plan.store.notes.check()  # asked for, so refused before computing, never dropped
    if the_plan.cached and not recompute:  # a stored answer writes nothing, not even a lease
        result = _execute(the_plan, device, progress, recompute, executor, lease_timeout,
                          batch_size)
    else:
        result = _replanning(the_plan, lambda p: _execute(p, device, progress, recompute,
                                                          executor, lease_timeout, batch_size))
    if isinstance(request, ResultRequest) and request.notes:
        # the registry's, never the document's: a cached answer takes them too
        the_plan.store.notes.add(result.id, request.notes)
    return result


def _replanning(the_plan: Plan, attempt: Callable[[Plan], _T]) -> _T:
    """``attempt(the_plan)`` under a lease of the whole run, planning again (at most
    ``_REPLANS`` times) when what the plan resolved was collected before it was kept.

    Raises:
        ObjectNotFound: a gc took the plan's inputs every time they were made again.
    """
    with _running(the_plan):
        for _attempt in range(_REPLANS):
            try:
                return attempt(the_plan)
            except _Collected:
                # A gc that began before this run's lease removed what the plan resolved
                # (backbone, weights, manifests): nothing recorded uses it yet, and it was older
                # than the gc's grace (`--grace 0`). Planning again makes it again, under the
                # same ids, and the run's lease keeps it from any later gc.
                the_plan = _plan_again(the_plan)
        try:
            return attempt(the_plan)
        except _Collected as exc:
            raise ObjectNotFound(exc.oid, hint="a `vbstore gc` running meanwhile removed it each "
                                               "time it was made again; run this once gc is "
                                               "done (or give gc a --grace)") from None


_REPLANS = 3


def _plan_again(the_plan: Plan) -> Plan:
    request = the_plan.request
    if isinstance(request, HeadRequest):
        return plan_head(request, the_plan.store)
    return plan(request, the_plan.store)


@contextmanager
def _running(the_plan: Plan) -> Iterator[None]:
    """Hold a lease of this run from the plan's start until the result is recorded.

    gc keeps every object created or used since the oldest live lease began: with this one
    dated back to the plan, what the plan made or touched (backbone, weights, manifests) is kept
    however short gc's grace, although nothing recorded uses it before the result is.
    """
    store = the_plan.store
    if store.read_only:  # computes nothing, so nothing to keep
        yield
        return
    key = f"run-{os.getpid()}-{os.urandom(8).hex()}"  # one per run: threads must not wait
    try:
        with store.lease(key, since=the_plan.begun):
            yield
    finally:
        (store.root / "locks" / f"{key}.lock").unlink(missing_ok=True)


class _Collected(Exception):  # a signal between execute and its compute, not a user error
    """An input the plan resolved was collected before the result's lease kept it."""

    def __init__(self, oid: str) -> None:
        super().__init__(oid)
        self.oid = oid


def _pin(the_plan: Plan) -> None:
    """Mark the plan's inputs used now, then check they are all still there.

    Runs under the result's lease, which keeps them from every gc that starts from now on; the
    touch makes a gc already sweeping spare them (it re-checks ``last_used`` under its lock),
    or, when its delete landed first, the check below finds them gone.

    Raises:
        _Collected: one of them was collected: plan again.
        BlobMissing: one of them is registered but its blob is gone (not a gc's doing).
    """
    store, ref = the_plan.store, the_plan.backbone
    ids = [ref.id, ref.doc.get("weights"), the_plan.head,
           *(m.id for m in (the_plan.eval_m, the_plan.train_m) if m is not None)]
    ids = [oid for oid in ids if isinstance(oid, str)]
    store.touch(ids)
    for oid in ids:
        try:
            store.path(oid)
        except BlobMissing:  # its row stands: lost from objects/, not collected (fsck --repair)
            raise
        except ObjectNotFound:  # row and blob gone: a gc collected it
            raise _Collected(oid) from None


def _execute(the_plan: Plan, device: str | None, progress: bool | Callable[..., Any],
             recompute: bool, executor: Any, lease_timeout: float | None,
             batch_size: int = 32) -> Result:
    spec = the_plan.derivation  # UsageError for a dry-run plan that names no backbone
    store = the_plan.store
    if recompute:
        return _recompute(the_plan, device, progress, executor, batch_size)
    key = the_plan.key  # made once, by the plan
    if the_plan.cached:  # the plan found it: read it once (hash checked) unless it went since
        oid = the_plan.steps[-1].id
        assert oid is not None  # a stored step has its id
        try:
            doc = store.read_json(oid)
        except (ObjectNotFound, CorruptObject):
            pass  # derive below recomputes it (and moves a damaged blob aside)
        else:
            # the record must answer this question (a row pointed elsewhere must not): a
            # comparison of fields already read, nothing more is read
            answer_check(store, spec, {oid: doc})(oid, lambda: store.source(key))
            return Result(oid, ResultRecord.from_dict(doc), True,
                          time.perf_counter() - the_plan.started, source="store",
                          recorded=store.origin(key), run=store.runs.last(oid))
    run = Run(device=device, progress=progress, executor=executor, batch_size=batch_size)

    def compute() -> Made[ResultRecord]:
        # the compute path (heads, bootstrap, extraction) loads only on a miss: a cached
        # answer, here or on a remote, must not pay for its imports
        from ._compute import compute_result

        _pin(the_plan)
        # head training, dense scoring: on stderr, each line naming the backbone
        with reporting(progress is True), about(the_plan.request.backbone.label):
            return compute_result(the_plan, run)

    derived = derive(store, spec, compute, key=key, timeout=lease_timeout)
    computed = [*run.computed, *([key] if derived.computed else [])]
    # computed here: the record just stored, as computed (not read back); else the stored one
    record = (derived.made if derived.computed
              else ResultRecord.from_dict(store.read_json(derived.id)))
    return Result(
        derived.id,
        record,
        not derived.computed,
        time.perf_counter() - the_plan.started,
        source=derived.source,
        remote=derived.remote,
        computed=tuple(computed),
        extracted=run.extracted,
        recorded=store.origin(key) if derived.source == "store" else None,
        run=store.runs.last(derived.id),
        features=dict(run.features),
    )


def stored_result(the_plan: Plan) -> Result | None:
    """The result of ``the_plan`` when this store already has it, else None (nothing computed,
    no remote asked, torch not imported)."""
    store, spec, key = the_plan.store, the_plan.derivation, the_plan.key
    oid = store.lookup(key)
    if oid is None:
        return None
    doc = store.read_json(oid)
    answer_check(store, spec, {oid: doc})(oid, lambda: store.source(key))
    return Result(oid, ResultRecord.from_dict(doc), True,
                  time.perf_counter() - the_plan.started, source="store",
                  recorded=store.origin(key), run=store.runs.last(oid))


def _recompute(the_plan: Plan, device: str | None, progress: bool | Callable[..., Any],
               executor: Any, batch_size: int = 32) -> Result:
    """Compute the result afresh (heads retrained, features reused) and compare with the stored one.

    Raises:
        NotReproduced: a metric moved by more than ``REPRODUCED_TOLERANCE``; the new result is
            stored and the derivation points at it, so nothing is lost.
    """
    from ._compute import compute_result  # the compute path: see execute

    store, spec, key = the_plan.store, the_plan.derivation, the_plan.key
    previous = store.lookup(key)
    run = Run(device=device, progress=progress, executor=executor, batch_size=batch_size)
    with store.lease(key, inputs=list(spec["inputs"].values())), reporting(progress is True), \
            about(the_plan.request.backbone.label):
        oid, record = compute_result(the_plan, run, fresh_heads=True)
        store.record(spec, oid, key=key)
        run.computed.append(key)
    comparison = None
    if previous is not None:
        old = ResultRecord.from_dict(store.read_json(previous)).metrics  # current names
        diffs = {
            k: abs(float(record.metrics[k]) - float(old[k]))
            for k in record.metrics
            if k in old and isinstance(old[k], (int, float))
        }
        worst = max(diffs.values(), default=0.0)
        comparison = {
            "previous": previous,
            "max_abs_diff": worst,
            "reproduced": worst <= REPRODUCED_TOLERANCE,
        }
        if not comparison["reproduced"]:
            raise NotReproduced(previous, oid, worst)
    return Result(oid, record, False, time.perf_counter() - the_plan.started, comparison,
                  computed=tuple(run.computed), extracted=run.extracted,
                  run=store.runs.last(oid))


def result_request(backbone: Any, task: str, data: Any, train_data: Any = None,
                   **options: Any) -> ResultRequest:
    """The :class:`ResultRequest` of ``get_result``'s arguments (the CLI builds the same);
    ``options`` are :class:`ResultOptions`' fields.

    As in VisBench, a trained task given ``train_stems`` and no ``train_data`` trains on
    ``data``: the stems list names the training split in the same folder. ``language``
    (CLIP_benchmark's ``--language``) is the language of ``cb:`` data and of a zero-shot task's
    prompts (see :func:`with_language`); ``cb:NAME@LANG`` data states it too.

    Raises:
        TypeError: a keyword that is no field of :class:`ResultOptions`.
    """
    o: ResultOptions = options_of(ResultOptions, options, "result_request")
    data_options = o.data_options or {}
    if train_data is None and o.head is None and data_options.get("train_stems") is not None:
        train_data = get_task(task).shape_spec.train_input(data)  # None for a zero-shot task
    params, data, train_data = with_language(get_task(task), o.params or {}, data, train_data,
                                             o.language)
    probe = ProbeRequest(task, params=params or {}, seed=o.seed, seeds=o.seeds, head=o.head,
                         strict=o.strict, finetune_blocks=o.finetune_blocks,
                         backbone_lr=o.backbone_lr)
    if o.val_split is not None:  # a split of the training data: refused without it
        check_val_split(probe, train_data is not None)
    return ResultRequest(
        backbone_request(backbone, o),
        probe,
        DataRef(data, split=o.split, limit=o.limit, options=data_options),
        DataRef(train_data, split=o.train_split, limit=o.train_limit, options=data_options)
        if train_data is not None
        else None,
        notes=o.notes,
        val=DataRef(train_data, split=o.val_split, options=data_options)
        if o.val_split is not None and train_data is not None
        else None,
    )


def backbone_request(backbone: Any, o: BackboneOptions) -> BackboneRequest:
    """The :class:`BackboneRequest` of ``backbone`` seen as ``o`` says."""
    return BackboneRequest(backbone, weights=o.weights, seed=o.backbone_seed,
                           input_size=o.input_size, layers=layers_arg(o.layers),
                           pooling=o.pooling, precision=o.precision)


@overload
def get(request: ResultRequest, *, store: Store | None = None, device: str | None = None,
        progress: bool | Callable[..., Any] = True, recompute: bool = False,
        executor: Any = None, batch_size: int = 32) -> Result: ...
@overload
def get(request: FeaturesRequest, *, store: Store | None = None, device: str | None = None,
        progress: bool | Callable[..., Any] = True, recompute: bool = False,
        executor: Any = None, batch_size: int = 32) -> FeatureResult: ...
@overload
def get(request: HeadRequest, *, store: Store | None = None, device: str | None = None,
        progress: bool | Callable[..., Any] = True, recompute: bool = False,
        executor: Any = None, batch_size: int = 32) -> HeadResult: ...


def get(request: ResultRequest | HeadRequest | FeaturesRequest, *, store: Store | None = None,
        device: str | None = None, progress: bool | Callable[..., Any] = True,
        recompute: bool = False, executor: Any = None,
        batch_size: int = 32) -> Result | HeadResult | FeatureResult:
    """What ``request`` asks for, computing only what the store lacks: request, plan, execute.

    ```python
    request = ResultRequest(BackboneRequest("test_vit", weights="random"),
                            ProbeRequest("knn", params={"k": 10}),
                            DataRef("shapes", split="val"), DataRef("shapes", split="train"))
    vbstore.get(request).metrics["top1"]
    ```

    ``get_result``, ``get_head`` and ``get_features`` build these requests from keywords.

    Raises:
        UsageError: ``recompute`` for a head or features (each is a derivation: recompute
            the result that reads it).
        The errors of :func:`plan` and :func:`execute`.
    """
    if isinstance(request, (HeadRequest, FeaturesRequest)) and recompute:
        what = "a head" if isinstance(request, HeadRequest) else "a featureset"
        raise UsageError(f"{what} is not recomputed on its own",
                         hint=f"recompute a result that reads it ({field_ref('recompute')})")
    # each image the plan's manifests decode is decoded once, kept for extraction until this
    # request ends
    with decode_once():
        if isinstance(request, FeaturesRequest):
            return execute_features(plan_features(request, store), device=device,
                                    progress=progress, executor=executor, batch_size=batch_size)
        if isinstance(request, HeadRequest):
            return execute_head(plan_head(request, store), device=device, progress=progress,
                                executor=executor, batch_size=batch_size)
        return execute(plan(request, store), device=device, progress=progress,
                       recompute=recompute, executor=executor, batch_size=batch_size)


def get_result(backbone: Any, task: str, data: Any, train_data: Any = None,
               **options: Any) -> Result:
    """A probe's metrics for ``backbone`` on ``data``, computing only what the store lacks.

    ``options`` are the fields of :class:`ResultOptions` (what is asked) and of
    :class:`RunOptions` (how it runs: ``store``, ``device``, ``progress``, ``recompute``,
    ``executor``, ``batch_size``), each the keyword of one row of the request table
    (``vbstore._fields``). Task parameters go in ``params``; every other keyword is the
    engine's own, so the two can never be confused. ``executor`` extracts missing features
    elsewhere (Ray; see docs/features.md); the result is the same as a local run's.
    ``pooling`` overrides the pooled vector the task reads (``cls``, ``mean``, ``gap``: a new
    feature set unless it is the default); ``batch_size`` is the extraction batch and changes
    no id. ``notes``: free text attached to the result in the registry (``store.notes``; no
    part of its id, so a stored result takes them without computing again; a read-only store
    refuses them with ``StoreReadOnly`` before anything is computed). ``finetune_blocks=N``
    trains the backbone's last N blocks with the head (``backbone_lr``: their learning rate;
    see docs/finetune.md), a measurement kept apart from the frozen probe's. ``language``:
    CLIP_benchmark's ``--language``, of ``cb:`` data and of a zero-shot task's prompts.

    ```python
    r = vbstore.get_result("torchvision:resnet18", "knn", "data/", split="val",
                           train_data="data/", train_split="train", params={"k": 10})
    r.metrics["top1"]; r.from_cache
    ```

    Raises:
        TypeError: a keyword that is no field of either.
        UsageError: training data given to a zero-shot task, or missing for a trained one; an
            unknown or invalid task parameter.
        UnknownTask, UnknownBackbone, WeightsUnavailable, BadInput, HeadMismatch: from below.
        NotReproduced: ``recompute`` gave other numbers than the stored result.
    """
    asked, how = split_keywords(options, ResultOptions, RunOptions)
    run: RunOptions = options_of(RunOptions, how, "get_result")
    return get(result_request(backbone, task, data, train_data, **asked), **run.keywords())


def get_head(backbone: Any, task: str, train_data: Any, **options: Any) -> HeadResult:
    """The probe head of ``task`` trained on ``train_data`` features: from the store, a remote,
    or trained now (with ``finetune_blocks``, trained with the backbone's last blocks, its
    record naming the fine-tuned weights). ``pooling`` and ``batch_size`` mean what they mean
    for :func:`get_result`: a pooling equal to the one the task reads without it is the same
    head, and the extraction batch changes no id.

    ``options`` are the fields of :class:`HeadOptions` and :class:`RunOptions` but
    ``recompute``.

    Raises:
        TypeError: a keyword that is no field of either.
        UsageError: the task is zero-shot (it has no head).
    """
    asked, how = split_keywords(options, HeadOptions, RunOptions)
    o: HeadOptions = options_of(HeadOptions, asked, "get_head")
    run: RunOptions = options_of(RunOptions, how, "get_head")
    request = HeadRequest(
        backbone_request(backbone, o),
        ProbeRequest(task, params=o.params or {}, seed=o.seed, finetune_blocks=o.finetune_blocks,
                     backbone_lr=o.backbone_lr),
        DataRef(train_data, split=o.train_split, limit=o.train_limit,
                options=o.data_options or {}),
    )
    return get(request, **run.keywords(recompute=run.recompute))


def execute_head(the_plan: Plan, *, device: str | None = None,
                 progress: bool | Callable[..., Any] = True, executor: Any = None,
                 batch_size: int = 32) -> HeadResult:
    """Train (or fetch) the head a :func:`plan_head` plan names: its steps are walked, so the
    features (or the prefix, fine-tuning) it is fit on are made first when missing."""
    # the compute path: see execute
    from ..heads import head_compat

    def attempt(the_plan: Plan) -> tuple[Plan, Derived]:
        _pin(the_plan)
        run = Run(device=device, progress=progress, executor=executor, batch_size=batch_size)
        with reporting(progress is True), about(the_plan.request.backbone.label):
            the_plan.walk(run)
        last = the_plan.steps[-1]  # the head's step: its output is the head, as derived
        return the_plan, run.made[(last.op, last.role)]

    the_plan, head = _replanning(the_plan, attempt)
    return HeadResult(
        head.id,
        # trained: as made (a fine-tuned head is read back: its derivation keeps no record)
        head.made if head.computed and head.made is not None
        else head_compat(the_plan.store, head.id),
        not head.computed,
        time.perf_counter() - the_plan.started,
        source=head.source,
        remote=head.remote,
    )
