"""Plan, then execute: a request becomes derivation steps before anything is computed.

``plan(request)`` resolves every id it can without torch (backbone alias, manifests, derivation
keys) and says, step by step, whether the output is already stored, on a remote's binary cache,
or to be computed, with the forward passes and training epochs that would cost.
``execute(plan)`` then walks the plan's steps in order (``Step.make``: each made from the store,
or computed when missing, through the store's derivations) and the plan's runner scores the
result from what they made.

A backbone the store has never seen cannot be named without building the model (its weights
identity is the hash of its tensors), so a dry run says so and stops short of torch: every step
below it is then necessarily to compute.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..data import Listing, get_target_kind, list_split, store_listing
from ..errors import UsageError, VbstoreError, field_ref
from ..features import OP_VERSION as FEATURES_VERSION
from ..features import ExtractorParams
from ..store import Store, derivation_key, derivation_spec
from ..tasks import Task
from ._backbone import BackboneRef, find_backbone, resolve_backbone
from ._cache import remote_has
from ._datachecks import check_against_data
from ._finetune import FINETUNE_RUNNER, check_backbone_blocks, check_finetune, given_finetune
from ._finetune_specs import FINETUNE_OP_VERSION, finetune_head_spec
from ._planned import Plan
from ._requests import HeadRequest, ResultRequest, store_param_files
from ._runners import Runner, make_featureset, runner_for
from ._scored import StepContext
from ._steps import Step, featureset_step, head_spec
from ._targets import check_data_options, check_targets, data_options, explain_mismatch

__all__ = ["Plan", "Step", "head_spec", "plan", "plan_head", "result_spec"]

RECORD_VERSION = 2  # 2: records carry warnings (same train and eval data)


def _default_pooling(task: Task, ref: BackboneRef) -> str:
    """The pooling ``task`` reads from ``ref`` when the request names none."""
    return ref.default_pooling if task.pooling == "default" else task.pooling


def named_pooling(task: Task, request: ResultRequest | HeadRequest, ref: BackboneRef
                  ) -> str | None:
    """The pooling the request named, None when it names none or the one ``task`` reads
    without it: a setting equal to its default is the same identity as leaving it out (as
    :meth:`BackboneRef.keyed_input_size`)."""
    named = request.backbone.pooling
    return None if named == _default_pooling(task, ref) else named


def extractor_for(task: Task, request: ResultRequest | HeadRequest, ref: BackboneRef
                  ) -> ExtractorParams:
    """The feature settings a task reads, from the backbone request and its resolved backbone."""
    pooling = request.backbone.pooling or _default_pooling(task, ref)
    return ExtractorParams(
        layers=request.backbone.layers,
        pooling=pooling,
        mode=task.feature_mode,
        precision=request.backbone.precision,
        input_size=ref.keyed_input_size(request.backbone.input_size),
    )


def data_options_for(task: Task, options: Mapping[str, Any], source: Any = None) -> dict[str, Any]:
    """The layout options ``task`` reads data with: its target kind's defaults (a task whose
    targets come from the pixels reads a dense folder's images alone unless told otherwise; a
    pair task reads ``pairs.csv``, or a NAVI tree), without the kind's data options
    (``target_scale``...), which describe the targets, not the layout."""
    kind = get_target_kind(task.target_kind)
    out = {k: v for k, v in options.items() if k not in kind.option_names()}
    return kind.layout_options(out, source)


def _listing(store, ref, flag: str, task: Task) -> Listing:
    """``ref``'s split listed and its targets checked against ``task``; nothing stored yet."""
    options = data_options_for(task, ref.options, ref.source)
    data_flag = field_ref("data") if flag == field_ref("split") else field_ref("train_data")
    split = ref.split
    if split is None and flag != field_ref("split") and options.get("train_stems") is not None:
        split = "train"  # --train-stems names the training split (VisBench's --train-split train)
    try:
        listing = list_split(store, ref.source, split=split, limit=ref.limit, **options)
    except UsageError as exc:
        if flag != field_ref("split"):  # name the field this data came with
            exc.refer_hint(field_ref("split"), flag)
        raise
    check_targets(task, listing.targets, data_flag)
    return listing


def backbone_of(store, request: ResultRequest | HeadRequest, task: Task, *, build: bool
                ) -> BackboneRef | None:
    """The backbone of a request; with ``build`` off, None when only building could name it."""
    b = request.backbone
    find = resolve_backbone if build else find_backbone
    return find(store, b.spec, weights=b.weights, seed=b.seed, input_size=b.input_size,
                use_projection=runner_for(task).embedding, touch=False)


def result_spec(
    plan_task: Task,
    task_params,
    ref_id: str,
    eval_id: str,
    train_id: str | None,
    head: str | None,
    seeds: list[int],
    extractor: ExtractorParams | None,
    strict: bool,
    finetune: dict[str, Any] | None = None,
    *,
    pooling_requested: str | None = None,
) -> dict[str, Any]:
    """The result's derivation spec: cheap ids and every setting, so a hit needs no features.

    ``pooling_requested`` (a pooling the request named other than the one the task reads without
    it: see :func:`named_pooling`) and
    ``finetune`` join the key only when given, so the keys of requests without them (a frozen
    probe's among them) are as they were: the record carries them, and one key has one record.
    A request's notes are no part of it: they are the registry's (``store.notes.add``)."""
    inputs = {"backbone": ref_id, "eval_manifest": eval_id}
    if train_id is not None:
        inputs["train_manifest"] = train_id
    if head is not None:
        inputs["head"] = head
    return derivation_spec(
        "result",
        plan_task.op_version,
        inputs,
        {
            "task": plan_task.name,
            "task_params": plan_task.keyed_params(task_params),
            "seeds": seeds,
            # a shape that reads no features (generate) keys no extractor
            **({"extractor": extractor.to_dict(), "features_op_version": FEATURES_VERSION}
               if extractor is not None else {}),
            "record_version": RECORD_VERSION,
            **({"strict": strict} if head else {}),
            **({"pooling_requested": pooling_requested} if pooling_requested else {}),
            # the fine-tuning recipe's version: a result made under another is not this one
            **({"finetune": finetune, "finetune_op_version": FINETUNE_OP_VERSION}
               if finetune else {}),
        },
    )


def _result_extractor(task: Task, request: ResultRequest, ref: BackboneRef
                      ) -> ExtractorParams | None:
    """The feature settings a result reads: None for a shape that reads no features."""
    return task.shape_spec.features_input(extractor_for(task, request, ref))


def _request_spec(task: Task, task_params: dict[str, Any], request: ResultRequest,
                  ref: BackboneRef, eval_id: str, train_id: str | None, head: str | None,
                  finetune: dict[str, Any] | None) -> dict[str, Any]:
    """The result spec of ``request`` (every key it names: the one source for the blocks check
    before anything is stored and the plan's own lookup, so both hit or miss together)."""
    return result_spec(task, task_params, ref.id, eval_id, train_id, head,
                       request.probe.seed_list, _result_extractor(task, request, ref),
                       request.probe.strict, finetune,
                       pooling_requested=named_pooling(task, request, ref))


def _stored_already(store, request: ResultRequest, task: Task, task_params: dict[str, Any],
                    eval_l: Listing, train_l: Listing | None, head: str | None,
                    finetune: dict[str, Any] | None) -> tuple[BackboneRef | None, bool]:
    """The backbone as the store knows it (None: only building could name it) and whether the
    result is stored, found without storing a manifest or building a model."""
    ref = backbone_of(store, request, task, build=False)
    if ref is None:  # a backbone never seen has no result: no file is hashed for it
        return ref, False
    ids = [store_listing(store, listing, touch=False, write=False).id if listing else None
           for listing in (eval_l, train_l)]
    if ids[0] is None:
        return ref, False
    spec = _request_spec(task, task_params, request, ref, ids[0], ids[1], head, finetune)
    return ref, store.lookup(derivation_key(spec), touch=False) is not None


def _check_tools_first(store, runner: Runner, request: ResultRequest, task: Task,
                       task_params: dict[str, Any], eval_l: Listing, train_l: Listing | None,
                       head: str | None, finetune: dict[str, Any] | None) -> None:
    """Refuse a run whose scorers or libraries are missing here (:meth:`Runner.check_tools`)
    before anything is stored or built, a dry run too; a stored result, answered without them,
    is not refused.

    Raises:
        MissingTool, MissingDependency: what ``check_tools`` names.
    """
    try:
        runner.check_tools(task, task_params, request)
    except VbstoreError:
        if not _stored_already(store, request, task, task_params, eval_l, train_l, head,
                               finetune)[1]:
            raise


def _check_blocks_first(store, request: ResultRequest, task: Task, task_params: dict[str, Any],
                        eval_l: Listing, train_l: Listing | None, head: str | None,
                        finetune: dict[str, Any]) -> BackboneRef | None:
    """Refuse a fine-tuning request whose backbone cannot be cut into blocks before anything
    (a manifest, a prefix) is stored; a stored result is answered without building a model.
    Returns the backbone it resolved (built when it was checked), for the plan to keep."""
    ref, stored = _stored_already(store, request, task, task_params, eval_l, train_l, head,
                                  finetune)
    if stored:
        return ref
    ref = ref or backbone_of(store, request, task, build=True)
    assert ref is not None  # built when never seen
    check_backbone_blocks(ref, finetune["blocks"], request.backbone.layers)
    return ref


def plan(request: ResultRequest, store: Store | None = None, *, dry_run: bool = False) -> Plan:
    """Resolve ``request`` into steps, each stored, on a remote, or to compute.

    With ``dry_run`` nothing is built or computed (a manifest is still read, as any ``get``
    does, since its id is the hash of the data) and torch is not imported.

    Raises:
        UsageError: a bad parameter or combination; data whose targets are not of the task's
            kind (before anything is stored); UnknownTask, UnknownBackbone, BadInput...
    """
    started = time.perf_counter()  # a result's seconds count the planning (manifests) too
    begun = time.time()
    store = store if store is not None else Store()
    task = request.probe.spec
    try:
        params = request.probe.resolved_params()
    except UsageError:
        # data of the wrong kind is the mistake to name, not the parameter it then lacks
        # (num_classes for depth maps)
        for data, flag in ((request.data, field_ref("data")),
                           (request.train, field_ref("train_data"))):
            if data is not None:
                explain_mismatch(store, task, data, flag,
                                 data_options_for(task, data.options, data.source))
        raise
    task_params = store_param_files(store, task, params)
    runner = FINETUNE_RUNNER if request.probe.finetune_blocks else runner_for(task)
    runner.check(task, request)
    # the data before the backbone, and both splits listed before either is stored: a split
    # the task cannot read is refused (its targets are checked on the listing) before a model is
    # built or anything stored, and each split is listed once
    eval_l = _listing(store, request.data, field_ref("split"), task)
    train_l = (_listing(store, request.train, field_ref("train_split"), task)
               if request.train is not None else None)
    # the target kind's data options (target_scale...): the user's, else what the data states;
    # a split its kind cannot read with them is refused here, before anything is stored
    listed: list[tuple[Any, Listing, str]] = [(request.data, eval_l, field_ref("data"))]
    listed += [(request.train, train_l, field_ref("train_data"))] if train_l is not None else []
    stated = data_options(task, request.probe.params, listed)
    if stated:
        params = request.probe.resolved_params(stated)
        task_params = store_param_files(store, task, params)
    finetune = request.probe.finetune(task_params)
    check_data_options(task, params, stated, [listing for _, listing, _ in listed])
    head = store.resolve(request.probe.head) if request.probe.head is not None else None
    # the data checks read label maps only for a result still to compute (a dry run's too)
    notes = check_against_data(
        task, params, request.probe.params, eval_l, train_l,
        lambda: _stored_already(store, request, task, task_params, eval_l, train_l, head,
                                finetune)[1])
    # the scorers' programs (java, jars) before a manifest is stored or a model built
    _check_tools_first(store, runner, request, task, task_params, eval_l, train_l, head,
                       finetune)
    checked = None
    if finetune and not dry_run:
        checked = _check_blocks_first(store, request, task, task_params, eval_l, train_l, head,
                                      finetune)
    # a dry run writes no manifest: it names each by its document's hash
    eval_m = store_listing(store, eval_l, touch=False, write=not dry_run)
    train_m = (store_listing(store, train_l, touch=False, write=not dry_run)
               if train_l is not None else None)
    # a fine-tuning request's backbone, checked (and built) above, is not built twice
    ref = checked or backbone_of(store, request, task, build=not dry_run)
    tuned = given_finetune(store, head) if head is not None else None
    if tuned is not None:  # a head trained with fine-tuned blocks is applied through them
        finetune, runner = tuned, FINETUNE_RUNNER
        runner.check(task, request)
    seeds = request.probe.seed_list
    steps = [
        Step(
            "backbone",
            status="stored" if ref is not None else "compute",
            id=ref.id if ref else None,
            work={} if ref else {"builds": f"builds {request.backbone.spec} (imports torch)"},
        )
    ]
    for role, manifest in (("eval", eval_m), ("train", train_m)):
        if manifest is not None:  # a dry run's new manifest: to store (files hashed, no model)
            steps.append(Step("manifest", role, "stored" if store.has(manifest.id) else "compute",
                              manifest.id, {"samples": len(manifest)}))
    if ref is None:
        extractor, spec = None, None
    else:
        extractor = _result_extractor(task, request, ref)
        spec = _request_spec(task, task_params, request, ref, eval_m.id,
                             train_m.id if train_m else None, head, finetune)
    key = derivation_key(spec) if spec is not None else None  # made once: execute uses it
    result_id = store.lookup(key, touch=False) if key is not None else None
    # a dry run names the remote whose binary cache has the result: execute would fetch it and
    # read nothing under it, as for a stored one
    remote = (remote_has(store, key)
              if result_id is None and dry_run and key is not None else None)
    unneeded = result_id is not None or remote is not None
    # A stored result is a gc root that keeps its inputs, so answering it writes nothing to the
    # registry (a write costs a WAL append and a checkpoint when the store closes). Otherwise
    # the inputs found above are in use from here on: touched, in one write, before anything
    # is computed from them.
    if result_id is None:
        store.touch([m.id for m in (ref, eval_m, train_m) if m is not None])
    features = {}
    for role, manifest in (("eval", eval_m), ("train", train_m if head is None else None)):
        if manifest is None or not runner.frozen_features:
            continue
        step = featureset_step(store, ref, manifest, extractor, role, unneeded, dry_run,
                               make_featureset)
        features[role] = step
        steps.append(step)
    steps.extend(runner.steps(StepContext(store, ref, task, task_params, eval_m, train_m,
                                          extractor, features, head, seeds, unneeded, dry_run,
                                          finetune)))
    if remote is not None:  # the steps under it say where the result is
        steps[1:] = [replace(s, remote=remote) if s.status == "unneeded" else s
                     for s in steps[1:]]
        steps.append(Step("result", status="remote", remote=remote, spec=spec, key=key))
    else:
        steps.append(Step("result", status="stored" if unneeded else "compute", id=result_id,
                          work={"samples": len(eval_m)}, spec=spec, key=key))
    return Plan(
        store,
        request,
        task,
        task_params,
        runner,
        ref,
        eval_m,
        train_m,
        extractor,
        head,
        spec,
        steps,
        started,
        begun,
        notes,
        finetune,
    )


def plan_head(request: HeadRequest, store: Store | None = None) -> Plan:
    """Resolve ``request`` into the steps of one head: backbone, train manifest, its features
    and the head of ``request.probe.seed``; ``Plan.derivation`` is the head's.

    Raises:
        UsageError: a bad parameter; training data the task cannot read (before anything is
            stored); UnknownTask, UnknownBackbone, BadInput...
    """
    started, begun = time.perf_counter(), time.time()
    store = store if store is not None else Store()
    task = request.probe.spec
    try:
        params = request.probe.resolved_params()
    except UsageError:  # data of the wrong kind is the mistake to name (see plan)
        explain_mismatch(store, task, request.train, field_ref("train_data"),
                         data_options_for(task, request.train.options, request.train.source))
        raise
    train_l = _listing(store, request.train, field_ref("train_split"), task)
    listed: list[tuple[Any, Listing, str]] = [(request.train, train_l, field_ref("train_data"))]
    stated = data_options(task, request.probe.params, listed)
    if stated:
        params = request.probe.resolved_params(stated)
    check_data_options(task, params, stated, [train_l])
    task_params = store_param_files(store, task, params)
    finetune = request.probe.finetune(task_params)
    if finetune:
        check_finetune(task, request)
    runner = FINETUNE_RUNNER if finetune else runner_for(task)
    ref = backbone_of(store, request, task, build=True)
    assert ref is not None  # built when never seen
    if finetune:  # refused before the train manifest is stored
        check_backbone_blocks(ref, finetune["blocks"], request.backbone.layers)
    train_m = store_listing(store, train_l, touch=False)
    extractor = extractor_for(task, request, ref)
    store.touch([ref.id, train_m.id])
    seed = request.probe.seed
    steps = [Step("backbone", status="stored", id=ref.id),
             Step("manifest", "train", "stored", train_m.id, {"samples": len(train_m)})]
    features = None
    if not finetune:
        features = featureset_step(store, ref, train_m, extractor, "train", False, False,
                                   make_featureset)
        steps.append(features)
    steps += runner.steps(StepContext(store, ref, task, task_params, None, train_m, extractor,
                                      {"train": features} if features else {}, None, [seed],
                                      False, False, finetune))
    spec: dict[str, Any] | None
    if finetune:
        spec = finetune_head_spec(task, task_params, ref.id, train_m.id, extractor, finetune,
                                  seed)
    else:  # the head's spec: None until its features exist (execute_head makes it then)
        spec = steps[-1].spec
    return Plan(store, request, task, task_params, runner, ref, None, train_m, extractor,
                None, spec, steps, started, begun, finetune=finetune)
