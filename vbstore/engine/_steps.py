"""The steps of a plan: one derivation each, how the plan finds what is stored, and what
makes it.

A plan is a list of steps in dependency order (backbone, manifests, featuresets or prefixes,
heads or captions, the result). Execute walks that list: each step that has a ``make`` is made
in turn (``make(plan, run, step)``, from the store when it is there, else computed), its output
kept in ``Run.made`` for the steps below it, and the plan's runner scores the last one, the
result. Torch-free: the planner, a dry run and the shape runners' own steps build them from
cheap ids alone; a ``make`` loads the compute path only when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..data import ManifestView, find_warped_views
from ..features import extractor_key
from ..store import derivation_key, derivation_spec
from ..tasks import Task
from ._cache import remote_has
from ._features import featureset_spec, packs_present

# make(plan, run, step) -> the step's output (see Step.make); Plan and Run are not named here,
# since this module sits below both
Make = Callable[[Any, Any, "Step"], Any]


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
        spec, key: Its derivation spec and key, made once, here; execute derives under them.
            None where an input is made only by an earlier step (a head on features still to
            extract, the features of views still to derive): execute makes them when that
            input exists (:meth:`Plan.spec_of`).
        make: What execute calls to make its output, ``make(plan, run, step)`` (stored: read
            back; else computed), kept in ``run.made[(op, role)]``: a featureset's feed, a
            head's :class:`._cache.Derived`, a derived manifest, a prefix's or captions' id.
            None for what the plan resolved itself (the backbone, the request's manifests) or
            was given (a head), and for the result, which execute derives around the walk.
    """

    op: str
    role: str = ""
    status: str = "compute"
    id: str | None = None
    work: dict[str, Any] = field(default_factory=dict)
    remote: str | None = None
    spec: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    key: str | None = None
    make: Make | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, spec: dict[str, Any] | None, op: str, role: str = "", status: str = "compute",
           id: str | None = None, work: dict[str, Any] | None = None,
           remote: str | None = None, make: Make | None = None) -> Step:
        """A step of derivation ``spec``, its key made from it."""
        return cls(op, role, status, id, work or {}, remote, spec,
                   derivation_key(spec) if spec is not None else None, make)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "op": self.op,
            "role": self.role,
            "status": self.status,
            "id": self.id,
        }
        if self.key:
            out["key"] = self.key
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


def _on_remote(store, step: Step) -> Step:
    assert step.key is not None  # a step looked for on a remote has its key
    name = remote_has(store, step.key)
    if name is None:
        return step
    return replace(step, status="remote", work={}, remote=name)


def featureset_step(store, ref, manifest, extractor, role, unneeded, dry_run,
                    make: Make | None = None) -> Step:
    """The featureset of ``manifest`` in ``role``: stored, on a remote, or to extract (with the
    rows already stored for other manifests counted as reused); ``make`` extracts it."""
    if ref is None:
        return Step("featureset", role, work={"forward_passes": len(manifest)}, make=make)
    planned = Step.of(featureset_spec(ref.id, manifest.id, extractor), "featureset", role,
                      make=make)
    key = planned.key
    assert key is not None
    if unneeded:  # under a stored result nothing here is read: its record is shown, unchecked
        return replace(planned, status="unneeded", id=store.lookup(key, check=False))
    oid = store.lookup(key, valid=lambda o: packs_present(store, o))
    if oid is not None:
        return replace(planned, status="stored", id=oid)
    reused = len(store.feature_rows.find(extractor_key(ref.id, extractor), manifest.image_ids))
    step = replace(planned, work={"forward_passes": len(manifest) - reused,
                                  "reused_rows": reused})
    return _on_remote(store, step) if dry_run else step


def views_steps(store, ref, eval_m, extractor, params, unneeded, dry_run,
                make_views: Make | None = None, make_features: Make | None = None
                ) -> list[Step]:
    """The derived views of ``eval_m`` (a task with ``views``) and their features; ``make_views``
    derives the views' manifest, ``make_features`` their featureset."""
    oid = find_warped_views(store, eval_m, params["warp_seed"], params["max_warp"])
    status = "unneeded" if unneeded else "compute"
    if oid is None or not store.has(oid):
        return [Step("manifest", "views", status, work={"samples": len(eval_m)},
                     make=make_views),
                Step("featureset", "views", status, work={"forward_passes": len(eval_m)},
                     make=make_features)]
    views = ManifestView(eval_m.root, oid, store.read_json(oid))  # only its ids are read
    return [Step("manifest", "views", "stored", oid, {"samples": len(views)}, make=make_views),
            featureset_step(store, ref, views, extractor, "views", unneeded, dry_run,
                            make_features)]


def head_step(store, task, task_params, features: Step, train_m, seed, unneeded, dry_run,
              make: Make | None = None, val: Step | None = None) -> Step:
    """The head of ``seed`` on the train featureset ``features`` (and, searched on it, the
    validation featureset ``val``); ``make`` trains it."""
    role = f"seed {seed}"
    work = {"samples": len(train_m)}
    if "epochs" in task_params:
        work["epochs"] = task_params["epochs"]
    if any(f.id is None or f.status not in ("stored", "unneeded")
           for f in (features, *([val] if val is not None else []))):
        # its key needs the features' ids: execute makes it once they are extracted
        return Step("head", role, "unneeded" if unneeded else "compute", work=work, make=make)
    assert features.id is not None
    planned = Step.of(head_spec(task, task_params, features.id, seed,
                                val.id if val is not None else None),
                      "head", role, work=work, make=make)
    key = planned.key
    assert key is not None
    if unneeded:  # as for a featureset under a stored result
        oid = store.lookup(key, check=False)
        return replace(planned, status="unneeded", id=oid, work={} if oid else work)
    oid = store.lookup(key)
    if oid is not None:
        return replace(planned, status="stored", id=oid, work={})
    return _on_remote(store, planned) if dry_run else planned


def head_spec(
    task: Task, task_params: dict[str, Any], train_features: str, seed: int,
    val_features: str | None = None,
) -> dict[str, Any]:
    """The derivation spec of one seed's head on one train featureset; ``val_features`` (the
    featureset of a validation split, ``val_split``) joins the inputs only when given, so every
    other head keeps its key."""
    inputs = {"features": train_features}
    if val_features is not None:
        inputs["val_features"] = val_features
    return derivation_spec(
        "head",
        task.op_version,
        inputs,
        {"task": task.name, "task_params": task.head_params(task_params), "seed": seed},
    )
