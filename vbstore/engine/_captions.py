"""Generated captions, stored: a model writes the captions of a split once per decoding.

A task of the ``generate`` shape (captioning) scores the caption the model writes for each eval
image. Writing them is the expensive part (beam search over the text decoder), scoring is not,
so the captions are a derivation of their own, ``captions(backbone, manifest; decoding)``, whose
output is a canonical JSON ``blob``::

    {"backbone": ID, "manifest": ID, "decoding": {...}, "captions": ["a dog on a sofa", ...]}

one caption per manifest sample, in manifest order. Scoring them again (SPICE on or off, another
metric set, a later scorer) reads them back and never runs the model; the result's ``captions``
edge keeps them while the result lives. ``decoding`` is what the task passes to ``generate``
(:meth:`vbstore.tasks.GenerateTask.decoding`); a ``seed`` in it (sampling) seeds the draws
and is not passed on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import canonical
from ..store import derivation_key, derivation_spec
from ._steps import Step

if TYPE_CHECKING:
    from ._planned import Plan
    from ._run import Run

# Local imports: torch, the image decoder and the progress bar load where captions are written
# (a miss only); the plan's step and a stored answer read ids alone.

CAPTIONS_OP_VERSION = 1


def captions_spec(backbone: str, manifest: str, decoding: Mapping[str, Any]) -> dict[str, Any]:
    """The derivation spec of the captions ``backbone`` writes for ``manifest``."""
    return derivation_spec("captions", CAPTIONS_OP_VERSION,
                           {"backbone": backbone, "manifest": manifest},
                           {"decoding": dict(decoding)})


def decodings(plan_task: Any, task_params: Mapping[str, Any], seeds: list[int]
              ) -> list[dict[str, Any]]:
    """Each seed's decoding settings (equal for every seed unless the decoding samples)."""
    return [plan_task.decoding(task_params, seed) for seed in seeds]


def captions_steps(store: Any, ref: Any, task: Any, task_params: Mapping[str, Any], eval_m: Any,
                   seeds: list[int], unneeded: bool) -> list[Step]:
    """One step per distinct decoding: stored, or to write (a forward per image)."""
    steps: list[Step] = []
    seen: list[dict[str, Any]] = []
    for seed, decoding in zip(seeds, decodings(task, task_params, seeds), strict=True):
        if decoding in seen:
            continue
        seen.append(decoding)
        role = "eval" if len(seeds) == 1 or "seed" not in decoding else f"eval, seed {seed}"
        work = {"samples": len(eval_m)}
        if ref is None:  # a dry run that could not name the backbone
            steps.append(Step("captions", role, "unneeded" if unneeded else "compute", work=work))
            continue
        planned = Step.of(captions_spec(ref.id, eval_m.id, decoding), "captions", role,
                          work=work, make=make_captions)
        assert planned.key is not None
        # under a stored result nothing here is read: its record is shown, unchecked
        oid = store.lookup(planned.key, check=not unneeded)
        if unneeded or oid is not None:
            planned = replace(planned, status="unneeded" if unneeded else "stored", id=oid,
                              work={})
        steps.append(planned)
    return steps


def make_captions(plan: Plan, run: Run, step: Step) -> str:
    """A captions step's output: the id of the captions of its decoding, stored or written
    now."""
    assert step.spec is not None  # an executed plan names its backbone
    return generated_captions(plan, run, step.spec["params"]["decoding"])


def read_captions(store: Any, oid: str) -> list[str]:
    """The captions of a stored ``captions`` blob, in manifest order."""
    return list(json.loads(store.read_bytes(oid))["captions"])


def generated_captions(plan: Plan, run: Run, decoding: Mapping[str, Any]) -> str:
    """The id of the captions of the eval split under ``decoding``: stored, or written now
    (:func:`read_captions` reads them)."""
    from ._cache import derive  # the binary cache's check: the compute path only

    store, ref, manifest = plan.store, plan.backbone, plan.eval_m
    spec = captions_spec(ref.id, manifest.id, decoding)
    step = next((s for s in plan.steps if s.op == "captions" and s.spec == spec), None)
    key = step.key if step is not None and step.key else derivation_key(spec)
    start = time.perf_counter()

    def compute() -> str:
        captions = _write(plan, run, decoding)
        doc = {"backbone": ref.id, "manifest": manifest.id, "decoding": dict(decoding),
               "captions": captions}
        return store.put_bytes(canonical.dumps(doc), "blob",
                               edges={"backbone": ref.id, "manifest": manifest.id})

    derived = derive(store, spec, compute, key=key)
    if derived.computed:
        run.computed.append(key)
        run.extracted += len(manifest)
    run.from_cache["captions"] = run.from_cache.get("captions", True) and not derived.computed
    run.timings["captions_s"] = round(run.timings.get("captions_s", 0.0)
                                      + time.perf_counter() - start, 4)
    return derived.id


def _write(plan: Plan, run: Run, decoding: Mapping[str, Any]) -> list[str]:
    """Run the model's ``generate`` over the eval images, in batches, in manifest order."""
    import torch

    from .._progress import progress, reporting
    from ..features import decode_image
    from ._device import resolve_device

    manifest = plan.eval_m
    backbone = plan.backbone.load()
    device = resolve_device(run.device)
    backbone.to(device)
    settings = {k: v for k, v in decoding.items() if k != "seed"}
    out: list[str] = []
    size = max(1, run.batch_size)
    # a sampling decoding draws from the seed it is keyed with; the caller's RNG is untouched
    with (reporting(run.progress is True),
          progress("writing captions", len(manifest), "image") as bar,
          torch.random.fork_rng(devices=[])):
        torch.manual_seed(int(decoding.get("seed", 0)))
        for start in range(0, len(manifest), size):
            rows = range(start, min(start + size, len(manifest)))
            batch = torch.stack([decode_image(manifest.image_path(i), manifest.samples[i]["image"],
                                              backbone.preprocess) for i in rows])
            out.extend(backbone.generate_captions(batch, settings))
            bar.update(len(rows))
    return out
