"""The steps of a plan: one derivation each, and how the plan finds what is stored.

Torch-free: the planner, a dry run and the shape runners' own steps (heads, derived views)
build them from cheap ids alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..data import ManifestView, find_warped_views
from ..features import extractor_key
from ..store import derivation_key, derivation_spec
from ..tasks import Task
from ._cache import remote_has
from ._features import featureset_spec, packs_present


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


def _on_remote(store, key: str, step: Step) -> Step:
    name = remote_has(store, key)
    if name is None:
        return step
    return Step(step.op, step.role, "remote", step.id, {}, name)


def featureset_step(store, ref, manifest, extractor, role, unneeded, dry_run) -> Step:
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


def views_steps(store, ref, eval_m, extractor, params, unneeded, dry_run) -> list[Step]:
    """The derived views of ``eval_m`` (a task with ``views``) and their features."""
    oid = find_warped_views(store, eval_m, params["warp_seed"], params["max_warp"])
    status = "unneeded" if unneeded else "compute"
    if oid is None or not store.has(oid):
        return [Step("manifest", "views", status, work={"samples": len(eval_m)}),
                Step("featureset", "views", status, work={"forward_passes": len(eval_m)})]
    views = ManifestView(eval_m.root, oid, store.read_json(oid))  # only its ids are read
    return [Step("manifest", "views", "stored", oid, {"samples": len(views)}),
            featureset_step(store, ref, views, extractor, "views", unneeded, dry_run)]


def head_step(store, task, task_params, features: Step, train_m, seed, unneeded, dry_run) -> Step:
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
        {"task": task.name, "task_params": task.head_params(task_params), "seed": seed},
    )
