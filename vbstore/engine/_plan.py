"""Plan, then execute: a request becomes derivation steps before anything is computed.

``plan(request)`` resolves every id it can without torch (backbone alias, manifests, derivation
keys) and says, step by step, whether the output is already stored, on a remote's binary cache,
or to be computed, with the forward passes and training epochs that would cost.
``execute(plan)`` then computes only what is missing, through the store's derivations.

A backbone the store has never seen cannot be named without building the model (its weights
identity is the hash of its tensors), so a dry run says so and stops short of torch: every step
below it is then necessarily to compute.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backbones import parse_spec
from ..data import Listing, ManifestView, find_warped_views, is_navi, list_split, store_listing
from ..errors import UsageError
from ..features import OP_VERSION as FEATURES_VERSION
from ..features import ExtractorParams, extractor_key
from ..store import Store, derivation_key, derivation_spec
from ..tasks import Task
from ._backbone import BackboneRef, find_backbone, resolve_backbone
from ._cache import remote_has
from ._datachecks import check_against_data
from ._features import featureset_spec, packs_present
from ._requests import ResultRequest, store_param_files
from ._targets import check_targets, explain_mismatch

RECORD_VERSION = 2  # 2: records carry warnings (same train and eval data)


@dataclass(frozen=True)
class Step:
    """One derivation of a plan.

    Attributes:
        op: ``backbone``, ``manifest``, ``featureset``, ``head`` or ``result``.
        role: Which one (``eval``, ``train``, ``seed 3``), or empty.
        status: ``stored``, ``remote`` (on that remote's binary cache), ``compute``, or
            ``unneeded`` (the result is stored, or on a remote's binary cache, so nothing under
            it is read).
        id: The output id when it is known.
        work: What computing it costs: ``forward_passes``, ``reused_rows``, ``epochs``, ``samples``.
        remote: The remote that has it (status ``remote``), or, on a step not needed, the
            remote whose binary cache has the result (a dry run).
    """

    op: str
    role: str = ""
    status: str = "compute"
    id: str | None = None
    work: dict[str, Any] = field(default_factory=dict)
    remote: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "op": self.op,
            "role": self.role,
            "status": self.status,
            "id": self.id,
        }
        if self.work:
            out["work"] = dict(self.work)
        if self.remote:
            out["remote"] = self.remote
        return out

    def describe(self) -> str:
        """One line: what, which, and how it will be obtained."""
        name = f"{self.op} ({self.role})" if self.role else self.op
        where = {
            "stored": "stored",
            "remote": f"on remote {self.remote}",
            "unneeded": f"not needed (the result is on remote {self.remote})" if self.remote
                        else "not needed (the result is stored)",
        }.get(self.status, "to compute")
        ident = f"  [{self.id[:12]}]" if self.id else ""
        work = self.work
        costs = []
        if "forward_passes" in work:
            costs.append(f"{work['forward_passes']} forward passes")
            if work.get("reused_rows"):
                costs.append(f"{work['reused_rows']} rows reused")
        if "epochs" in work:
            costs.append(f"{work['epochs']} epochs over {work['samples']} samples")
        elif "samples" in work:
            costs.append(f"{work['samples']} samples")
        if "builds" in work:
            costs.append(work["builds"])
        cost = f": {', '.join(costs)}" if costs and self.status == "compute" else ""
        return f"{name:<22} {where}{cost}{ident}"


@dataclass
class Plan:
    """A resolved request and its steps; ``execute`` runs it.

    Attributes:
        request: What was asked.
        task: The task object; ``task_params`` its resolved parameters.
        ref: The backbone, or None when only building it could name it (dry run).
        eval_m, train_m: The manifests (train None for zero-shot tasks or a given head).
        extractor: Feature settings the task needs.
        head: The resolved id of a given head.
        spec: The result's derivation spec (None when the backbone is unresolved).
        steps: Every derivation, top-down order of dependencies (backbone first).
    """

    store: Store
    request: ResultRequest
    task: Task
    task_params: dict[str, Any]
    ref: BackboneRef | None
    eval_m: Any
    train_m: Any
    extractor: ExtractorParams | None
    head: str | None
    spec: dict[str, Any] | None
    steps: list[Step]
    started: float = field(default_factory=time.perf_counter)
    # when planning began, as time.time(): what execute's run lease keeps from gc
    begun: float = field(default_factory=time.time)
    # what the task adapts to the data and the record says (vbstore.engine._datachecks)
    notes: list[str] = field(default_factory=list)

    @property
    def backbone(self) -> BackboneRef:
        """The backbone of an executable plan.

        Raises:
            UsageError: the plan comes from a dry run that could not name the backbone.
        """
        if self.ref is None:
            raise UsageError("this plan comes from a dry run and names no backbone",
                             hint="plan again without dry_run to build the backbone")
        return self.ref

    @property
    def settings(self) -> ExtractorParams:
        """The feature settings of an executable plan (see :attr:`backbone`)."""
        if self.extractor is None:
            self.backbone  # noqa: B018 - raises the dry-run error
        assert self.extractor is not None  # set whenever ref is
        return self.extractor

    @property
    def derivation(self) -> dict[str, Any]:
        """The result's derivation spec (see :attr:`backbone`)."""
        if self.spec is None:
            self.backbone  # noqa: B018 - raises the dry-run error
        assert self.spec is not None  # set whenever ref is
        return self.spec

    @property
    def cached(self) -> bool:
        """Whether the result itself is stored (nothing to compute)."""
        return self.steps[-1].status == "stored"

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.name,
            "params": self.task_params,
            "backbone": self.ref.id if self.ref else None,
            "steps": [s.as_dict() for s in self.steps],
        }

    def describe(self) -> list[str]:
        return [s.describe() for s in self.steps]


def extractor_for(task: Task, request: ResultRequest, default_pooling: str) -> ExtractorParams:
    """The feature settings a task reads, from the backbone request."""
    pooling = request.backbone.pooling or (
        default_pooling if task.pooling == "default" else task.pooling
    )
    return ExtractorParams(
        layers=request.backbone.layers,
        pooling=pooling,
        mode=task.feature_mode,
        precision=request.backbone.precision,
        input_size=request.backbone.input_size,
    )


def data_options_for(task: Task, options: Mapping[str, Any], source: Any = None) -> dict[str, Any]:
    """The layout options ``task`` reads data with: a task whose targets come from the pixels
    (target kind ``image``) reads a dense folder's images alone unless told otherwise; a pair
    task reads ``pairs.csv`` (scenes hold it beside a dense split's folders), or a NAVI tree."""
    out = dict(options)
    if task.target_kind == "image":
        out.setdefault("target", "images")
    if task.target_kind == "pairs" and "layout" not in out:
        navi = isinstance(source, (str, os.PathLike)) and is_navi(Path(source))
        out["layout"] = "navi" if navi else "pairs"
    return out


def _listing(store, ref, flag: str, task: Task) -> Listing:
    """``ref``'s split listed and its targets checked against ``task``; nothing stored yet."""
    options = data_options_for(task, ref.options, ref.source)
    data_flag = "--data" if flag == "--split" else "--train-data"
    try:
        listing = list_split(store, ref.source, split=ref.split, limit=ref.limit, **options)
    except UsageError as exc:
        if flag != "--split" and "--split" in exc.hint:  # name the flag this data came with
            exc.hint = exc.hint.replace("--split", flag)
        raise
    check_targets(task, listing.targets, data_flag)
    return listing


def _check_text(task: Task, spec: Any) -> None:
    if task.needs_text and isinstance(spec, str):
        if parse_spec(spec).source != "open_clip":
            raise UsageError(
                f"task {task.name!r} compares images with text and needs a CLIP "
                f"backbone, not {spec!r}",
                hint="use an open_clip:MODEL@TAG backbone (vbstore list backbones 'open_clip*')",
            )


def backbone_of(store, request: ResultRequest, task: Task, *, build: bool) -> BackboneRef | None:
    """The backbone of a request; with ``build`` off, None when only building could name it."""
    b = request.backbone
    find = resolve_backbone if build else find_backbone
    return find(store, b.spec, weights=b.weights, seed=b.seed, input_size=b.input_size,
                use_projection=task.needs_text, touch=False)


def result_spec(
    plan_task: Task,
    task_params,
    ref_id: str,
    eval_id: str,
    train_id: str | None,
    head: str | None,
    seeds: list[int],
    extractor: ExtractorParams,
    strict: bool,
) -> dict[str, Any]:
    """The result's derivation spec: cheap ids and every setting, so a hit needs no features."""
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
            "task_params": task_params,
            "seeds": seeds,
            "extractor": extractor.to_dict(),
            "features_op_version": FEATURES_VERSION,
            "record_version": RECORD_VERSION,
            **({"strict": strict} if head else {}),
        },
    )


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
        for data, flag in ((request.data, "--data"), (request.train, "--train-data")):
            if data is not None:
                explain_mismatch(store, task, data, flag,
                                 data_options_for(task, data.options, data.source))
        raise
    task_params = store_param_files(store, task, params)
    _check_text(task, request.backbone.spec)
    # the data before the backbone, and both splits listed before either is stored: a split
    # the task cannot read is refused (its targets are checked on the listing) before a model is
    # built or anything stored, and each split is listed once
    eval_l = _listing(store, request.data, "--split", task)
    train_l = (_listing(store, request.train, "--train-split", task)
               if request.train is not None else None)
    notes = check_against_data(task, params, request.probe.params, eval_l, train_l)
    # a dry run writes no manifest: it names each by its document's hash
    eval_m = store_listing(store, eval_l, touch=False, write=not dry_run)
    train_m = (store_listing(store, train_l, touch=False, write=not dry_run)
               if train_l is not None else None)
    ref = backbone_of(store, request, task, build=not dry_run)
    head = store.resolve(request.probe.head) if request.probe.head is not None else None
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
        extractor = extractor_for(task, request, ref.default_pooling)
        spec = result_spec(
            task,
            task_params,
            ref.id,
            eval_m.id,
            train_m.id if train_m else None,
            head,
            seeds,
            extractor,
            request.probe.strict,
        )
    result_id = store.lookup(derivation_key(spec), touch=False) if spec is not None else None
    # a dry run names the remote whose binary cache has the result: execute would fetch it and
    # read nothing under it, as for a stored one
    remote = (remote_has(store, derivation_key(spec))
              if result_id is None and dry_run and spec is not None else None)
    unneeded = result_id is not None or remote is not None
    # A stored result is a gc root that keeps its inputs, so answering it writes nothing to the
    # registry (a write costs a WAL append and a checkpoint when the store closes). Otherwise
    # the inputs found above are in use from here on: touched, in one write, before anything
    # is computed from them.
    if result_id is None:
        store.touch([m.id for m in (ref, eval_m, train_m) if m is not None])
    features = {}
    for role, manifest in (("eval", eval_m), ("train", train_m if head is None else None)):
        if manifest is None:
            continue
        step = _featureset_step(store, ref, manifest, extractor, role, unneeded, dry_run)
        features[role] = step
        steps.append(step)
    if task.views == "homography":
        steps.extend(_views_steps(store, ref, eval_m, extractor, task_params, unneeded, dry_run))
    if task.trains_head and head is None:
        for seed in seeds:
            steps.append(
                _head_step(
                    store, task, task_params, features["train"], train_m, seed, unneeded, dry_run
                )
            )
    if head is not None:
        steps.append(Step("head", "given", "stored", head))
    if remote is not None:  # the steps under it say where the result is
        steps[1:] = [replace(s, remote=remote) if s.status == "unneeded" else s
                     for s in steps[1:]]
        steps.append(Step("result", status="remote", remote=remote))
    else:
        steps.append(Step("result", status="stored" if unneeded else "compute", id=result_id,
                          work={"samples": len(eval_m)}))
    return Plan(
        store,
        request,
        task,
        task_params,
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
    )


def _on_remote(store, key: str, step: Step) -> Step:
    name = remote_has(store, key)
    if name is None:
        return step
    return Step(step.op, step.role, "remote", step.id, {}, name)


def _featureset_step(store, ref, manifest, extractor, role, unneeded, dry_run) -> Step:
    if ref is None:
        return Step("featureset", role, work={"forward_passes": len(manifest)})
    key = derivation_key(featureset_spec(ref.id, manifest.id, extractor))
    if unneeded:  # under a stored result nothing here is read: its record is shown, unchecked
        return Step("featureset", role, "unneeded", store.lookup(key, check=False))
    oid = store.lookup(key, valid=lambda o: packs_present(store, o))
    if oid is not None:
        return Step("featureset", role, "stored", oid)
    reused = len(store.feature_rows(extractor_key(ref.id, extractor), manifest.image_ids))
    step = Step(
        "featureset",
        role,
        work={"forward_passes": len(manifest) - reused, "reused_rows": reused},
    )
    return _on_remote(store, key, step) if dry_run else step


def _views_steps(store, ref, eval_m, extractor, params, unneeded, dry_run) -> list[Step]:
    """The derived views of ``eval_m`` (a task with ``views``) and their features."""
    oid = find_warped_views(store, eval_m, params["warp_seed"], params["max_warp"])
    status = "unneeded" if unneeded else "compute"
    if oid is None or not store.has(oid):
        return [Step("manifest", "views", status, work={"samples": len(eval_m)}),
                Step("featureset", "views", status, work={"forward_passes": len(eval_m)})]
    views = ManifestView(eval_m.root, oid, store.read_json(oid))  # only its ids are read
    return [Step("manifest", "views", "stored", oid, {"samples": len(views)}),
            _featureset_step(store, ref, views, extractor, "views", unneeded, dry_run)]


def _head_step(store, task, task_params, features: Step, train_m, seed, unneeded, dry_run) -> Step:
    role = f"seed {seed}"
    work = {"samples": len(train_m)}
    if "epochs" in task_params:
        work["epochs"] = task_params["epochs"]
    if features.id is None or features.status not in ("stored", "unneeded"):
        return Step("head", role, "unneeded" if unneeded else "compute", work=work)
    key = derivation_key(head_spec(task, task_params, features.id, seed))
    if unneeded:  # as for a featureset under a stored result
        oid = store.lookup(key, check=False)
        return Step("head", role, "unneeded", oid, {} if oid else work)
    oid = store.lookup(key)
    if oid is not None:
        return Step("head", role, "stored", oid)
    step = Step("head", role, work=work)
    return _on_remote(store, key, step) if dry_run else step


def head_spec(
    task: Task, task_params: dict[str, Any], train_features: str, seed: int
) -> dict[str, Any]:
    """The derivation spec of one seed's head on one train featureset."""
    return derivation_spec(
        "head",
        task.op_version,
        {"features": train_features},
        {"task": task.name, "task_params": task_params, "seed": seed},
    )
