"""``get_result`` and ``get_head``: requests in, a plan, then only the missing work.

A result's derivation key is made from cheap ids only (backbone, manifests, head) plus every
setting (extractor, task params, seeds), so a cached result is found without touching features,
and therefore without importing torch. Only on a miss are features, heads and metrics computed,
each through its own derivation, so a second task on the same features runs no forward pass.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .._progress import reporting
from ..errors import BlobMissing, CorruptObject, NotReproduced, ObjectNotFound, UsageError
from ..records import ResultRecord
from ..store import Store, derivation_key
from ._cache import remote_fetch
from ._plan import Plan, plan
from ._requests import BackboneRequest, DataRef, ProbeRequest, ResultRequest, layers_arg

if TYPE_CHECKING:
    from ..records import HeadCompat

REPRODUCED_TOLERANCE = 1e-6
_T = TypeVar("_T")


@dataclass
class Result:
    """A result record and how it was obtained.

    Attributes:
        source: ``computed``, ``store`` (a cached answer of this store) or ``remote`` (a
            configured remote's binary cache answered; ``remote`` names it).
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
    # per feature set this call read (eval, train, views): its id, images extracted now and
    # rows reused from the store; empty when the result itself was found
    features: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        """Where the answer came from, in words: ``computed``, ``cached in the store`` or
        ``fetched from remote NAME``."""
        if self.source == "remote":
            return f"fetched from remote {self.remote}"
        return "cached in the store" if self.source == "store" else "computed"

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
        if self.remote is not None:
            out["remote"] = self.remote
        if self.reproduced is not None:
            out["reproduced"] = self.reproduced
        if self.features:
            out["features"] = self.features
        return out


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
) -> Result:
    """Compute what ``the_plan`` lacks and return the result (from the store when it has it).

    ``lease_timeout`` bounds the wait for another process computing this very result (0: only
    try); the features and heads below it are always waited for.

    Raises:
        UsageError: the plan was made by a dry run with a backbone never built.
        NotReproduced: ``recompute`` gave other numbers than the stored result.
        LeaseTimeout: another process still computes this result after ``lease_timeout``.
    """
    the_plan.derivation  # noqa: B018 - UsageError for a dry-run plan, before any lease
    if the_plan.cached and not recompute:  # a stored answer writes nothing, not even a lease
        return _execute(the_plan, device, progress, recompute, executor, lease_timeout)
    return _replanning(the_plan, lambda p: _execute(p, device, progress, recompute, executor,
                                                    lease_timeout))


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
                the_plan = plan(the_plan.request, the_plan.store)
        try:
            return attempt(the_plan)
        except _Collected as exc:
            raise ObjectNotFound(exc.oid, hint="a `vbstore gc` running meanwhile removed it each "
                                               "time it was made again; run this once gc is "
                                               "done (or give gc a --grace)") from None


_REPLANS = 3


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
    ids = [ref.id, ref.doc.get("weights"), the_plan.eval_m.id, the_plan.head,
           the_plan.train_m.id if the_plan.train_m is not None else None]
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
             recompute: bool, executor: Any, lease_timeout: float | None) -> Result:
    spec = the_plan.derivation  # UsageError for a dry-run plan that names no backbone
    store = the_plan.store
    if recompute:
        return _recompute(the_plan, device, progress, executor)
    if the_plan.cached:  # the plan found it: read it once (hash checked) unless it went since
        oid = the_plan.steps[-1].id
        assert oid is not None  # a stored step has its id
        try:
            record = ResultRecord.from_dict(store.read_json(oid))
        except (ObjectNotFound, CorruptObject):
            pass  # derive below recomputes it (and moves a damaged blob aside)
        else:
            return Result(oid, record, True, time.perf_counter() - the_plan.started,
                          source="store")
    answered: dict[str, str] = {}
    done: list[str] = []  # derivation keys computed by this call (features, heads, the result)
    extracted = [0]  # images this call sent through a backbone
    features: dict[str, dict[str, Any]] = {}

    def compute() -> str:
        # the compute path (heads, bootstrap, extraction) loads only on a miss: a cached
        # answer must not pay for its imports
        from ._compute import Run, compute_result

        _pin(the_plan)
        run = Run(device=device, progress=progress, executor=executor)
        try:
            with reporting(progress is True):  # head training, dense scoring: on stderr
                return compute_result(the_plan, run)
        finally:
            done.extend(run.computed)
            extracted[0] = run.extracted
            features.update(run.features)

    oid, computed = store.derive(spec, compute, fetch=remote_fetch(store, answered),
                                 timeout=lease_timeout)
    if computed:
        done.append(derivation_key(spec))
    source = "computed" if computed else ("remote" if "remote" in answered else "store")
    return Result(
        oid,
        ResultRecord.from_dict(store.read_json(oid)),
        not computed,
        time.perf_counter() - the_plan.started,
        source=source,
        remote=answered.get("remote"),
        computed=tuple(done),
        extracted=extracted[0],
        features=features,
    )


def stored_result(the_plan: Plan) -> Result | None:
    """The result of ``the_plan`` when this store already has it, else None (nothing computed,
    no remote asked, torch not imported)."""
    store = the_plan.store
    oid = store.lookup(derivation_key(the_plan.derivation))
    if oid is None:
        return None
    return Result(oid, ResultRecord.from_dict(store.read_json(oid)), True,
                  time.perf_counter() - the_plan.started, source="store")


def _recompute(the_plan: Plan, device: str | None, progress: bool | Callable[..., Any],
               executor: Any) -> Result:
    """Compute the result afresh (heads retrained, features reused) and compare with the stored one.

    Raises:
        NotReproduced: a metric moved by more than ``REPRODUCED_TOLERANCE``; the new result is
            stored and the derivation points at it, so nothing is lost.
    """
    from ._compute import Run, compute_result  # the compute path: see execute

    store, spec = the_plan.store, the_plan.derivation
    key = derivation_key(spec)
    previous = store.lookup(key)
    run = Run(device=device, progress=progress, executor=executor)
    with store.lease(key, inputs=list(spec["inputs"].values())), reporting(progress is True):
        oid = compute_result(the_plan, run, fresh_heads=True)
        store.record(spec, oid)
        run.computed.append(key)
    record = ResultRecord.from_dict(store.read_json(oid))
    comparison = None
    if previous is not None:
        old = store.read_json(previous)["metrics"]
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
                  computed=tuple(run.computed), extracted=run.extracted)


def result_request(
    backbone: Any,
    task: str,
    data: Any,
    train_data: Any = None,
    *,
    params: Mapping[str, Any] | None = None,
    split: str | None = None,
    train_split: str | None = None,
    limit: int | None = None,
    train_limit: int | None = None,
    seed: int = 0,
    seeds: int = 1,
    head: str | None = None,
    strict: bool = True,
    weights: str = "default",
    backbone_seed: int | None = None,
    input_size: int | None = None,
    layers: Sequence[int] | None = None,
    precision: str = "fp32",
    data_options: Mapping[str, Any] | None = None,
) -> ResultRequest:
    """The :class:`ResultRequest` of ``get_result``'s arguments (the CLI builds the same)."""
    options = data_options or {}
    return ResultRequest(
        BackboneRequest(
            backbone,
            weights=weights,
            seed=backbone_seed,
            input_size=input_size,
            layers=layers_arg(layers),
            precision=precision,
        ),
        ProbeRequest(task, params=params or {}, seed=seed, seeds=seeds, head=head, strict=strict),
        DataRef(data, split=split, limit=limit, options=options),
        DataRef(train_data, split=train_split, limit=train_limit, options=options)
        if train_data is not None
        else None,
    )


def get_result(
    backbone: Any,
    task: str,
    data: Any,
    train_data: Any = None,
    *,
    params: Mapping[str, Any] | None = None,
    store: Store | None = None,
    split: str | None = None,
    train_split: str | None = None,
    limit: int | None = None,
    train_limit: int | None = None,
    seed: int = 0,
    seeds: int = 1,
    recompute: bool = False,
    head: str | None = None,
    strict: bool = True,
    weights: str = "default",
    backbone_seed: int | None = None,
    input_size: int | None = None,
    layers: Sequence[int] | None = None,
    precision: str = "fp32",
    device: str | None = None,
    progress: bool | Callable[..., Any] = True,
    data_options: Mapping[str, Any] | None = None,
    executor: Any = None,
) -> Result:
    """A probe's metrics for ``backbone`` on ``data``, computing only what the store lacks.

    Task parameters go in ``params``; every other keyword is the engine's own, so the two can
    never be confused. ``executor`` extracts missing features elsewhere (Ray; see
    docs/features.md); the result is the same as a local run's.

    ```python
    r = vbstore.get_result("torchvision:resnet18", "knn", "data/", split="val",
                           train_data="data/", train_split="train", params={"k": 10})
    r.metrics["top1"]; r.from_cache
    ```

    Raises:
        UsageError: training data given to a zero-shot task, or missing for a trained one; an
            unknown or invalid task parameter.
        UnknownTask, UnknownBackbone, WeightsUnavailable, BadInput, HeadMismatch: from below.
        NotReproduced: ``recompute`` gave other numbers than the stored result.
    """
    request = result_request(
        backbone,
        task,
        data,
        train_data,
        params=params,
        split=split,
        train_split=train_split,
        limit=limit,
        train_limit=train_limit,
        seed=seed,
        seeds=seeds,
        head=head,
        strict=strict,
        weights=weights,
        backbone_seed=backbone_seed,
        input_size=input_size,
        layers=layers,
        precision=precision,
        data_options=data_options,
    )
    return execute(
        plan(request, store),
        device=device,
        progress=progress,
        recompute=recompute,
        executor=executor,
    )


def get_head(
    backbone: Any,
    task: str,
    train_data: Any,
    *,
    params: Mapping[str, Any] | None = None,
    store: Store | None = None,
    train_split: str | None = None,
    train_limit: int | None = None,
    seed: int = 0,
    weights: str = "default",
    backbone_seed: int | None = None,
    input_size: int | None = None,
    layers: Sequence[int] | None = None,
    precision: str = "fp32",
    device: str | None = None,
    progress: bool | Callable[..., Any] = True,
    data_options: Mapping[str, Any] | None = None,
    executor: Any = None,
) -> HeadResult:
    """The probe head of ``task`` trained on ``train_data`` features: from the store, a remote,
    or trained now.

    Raises:
        UsageError: the task is zero-shot (it has no head).
    """
    request = (
        result_request(
            backbone,
            task,
            train_data,
            train_data,
            params=params,
            split=train_split,
            train_split=train_split,
            limit=train_limit,
            train_limit=train_limit,
            seed=seed,
            weights=weights,
            backbone_seed=backbone_seed,
            input_size=input_size,
            layers=layers,
            precision=precision,
            data_options=data_options,
        )
        if _trains(task)
        else None
    )
    if request is None:
        raise UsageError(
            f"task {task!r} is zero-shot and has no head", hint="use `vbstore get result` for it"
        )
    # the compute path: see execute
    from ..heads import head_record
    from ..records import HeadCompat
    from ._compute import Feed, Run, featureset, train_head

    try:
        the_plan = plan(request, store)
    except UsageError as exc:  # the train data stands on the eval side too: name its own flag
        exc.hint = re.sub(r"(?<![\w-])--split\b", "--train-split", exc.hint)
        raise
    answered: dict[str, str] = {}

    def attempt(the_plan: Plan) -> tuple[Plan, str, bool]:
        _pin(the_plan)
        run = Run(device=device, progress=progress, executor=executor)
        train = Feed(
            the_plan, run, featureset(the_plan, run, the_plan.train_m, "train"), the_plan.train_m
        )
        with reporting(progress is True):
            return (the_plan, *train_head(the_plan, run, train, seed, answered=answered))

    the_plan, oid, trained = _replanning(the_plan, attempt)
    return HeadResult(
        oid,
        HeadCompat.from_dict(head_record(the_plan.store, oid)),
        not trained,
        time.perf_counter() - the_plan.started,
        source="computed" if trained else ("remote" if "remote" in answered else "store"),
        remote=answered.get("remote"),
    )


def _trains(task: str) -> bool:
    return ProbeRequest(task).spec.trains_head
