"""What a plan is: a resolved request, its steps and the runner that executes it (a leaf of the
engine: the planner in ``._plan`` makes one, ``._compute`` and the runners read it).

The plan holds its runner as an object. That runner is a :class:`._runners.Runner`; here it is
declared as the :class:`PlanRunner` protocol (what execute calls on it), so this module imports
no runner and the runners can import the plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import UsageError
from ..features import ExtractorParams
from ..store import Store, derivation_key
from ..tasks import Task
from ._backbone import BackboneRef
from ._requests import HeadRequest, ResultRequest
from ._run import Run
from ._scored import Scored
from ._steps import Step


class PlanRunner(Protocol):
    """The runner a plan holds: what execute, a head's training and the baseline ask of it
    (:class:`._runners.Runner` implements it; the feeds are ``._toolbox.Feed``)."""

    @property
    def shape(self) -> str:
        """The shape it runs (``finetune`` for the fine-tuning runner)."""
        ...

    @property
    def text_tower(self) -> bool:
        """Whether the task is scored against the backbone's text tower."""
        ...

    def prepare(self, plan: Plan) -> None:
        """Checks that need the plan's records, before any feature is extracted."""
        ...

    def run(self, plan: Plan, run: Run, fresh_heads: bool = False) -> tuple[Any, Scored]:
        """The eval feed (None: no features read) and every seed's metrics, from what the
        plan's steps made (``run.made``)."""
        ...

    def baseline(self, plan: Plan, evaluation: Any, scored: Scored) -> Any:
        """The task's trivial predictor on the eval split, a reason it has none, or None."""
        ...

    def fit(self, task: Task, train: Any, params: dict[str, Any], seed: int,
            classes: list[str] | None, val: Any = None
            ) -> tuple[dict[str, Any], dict[str, float]]:
        """A head's state and train metrics, fit on the ``train`` feed (``val``: a validation
        split's feed, searched on)."""
        ...

    def width(self, feed: Any) -> int:
        """The feature width a head of this shape reads."""
        ...


@dataclass
class Plan:
    """A resolved request and its steps; ``execute`` runs it.

    Attributes:
        request: What was asked (a :class:`HeadRequest` for a plan of one head).
        task: The task object; ``task_params`` its resolved parameters.
        runner: The runner of the task's shape (``._runners``; ``._finetune``'s for a
            fine-tuning plan): execute calls it.
        ref: The backbone, or None when only building it could name it (dry run).
        eval_m, train_m: The manifests (train None for zero-shot tasks or a given head; eval
            None in a plan of one head).
        extractor: Feature settings the task needs (None also for a shape that reads no
            features: nothing is extracted, and no extractor is keyed or recorded).
        head: The resolved id of a given head.
        spec: The derivation spec of what is asked, the result or the head (None when the
            backbone is unresolved).
        steps: Every derivation, top-down order of dependencies (backbone first); execute
            walks them (:meth:`walk`), each made by its ``Step.make``.
    """

    store: Store
    request: ResultRequest | HeadRequest
    task: Task
    task_params: dict[str, Any]
    runner: PlanRunner
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
    # {"blocks", "backbone_lr"} when the backbone's last blocks train with the head
    finetune: dict[str, Any] | None = None
    # the validation split's manifest (val_split: the head's settings searched on it), or None
    val_m: Any = None

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
    def key(self) -> str:
        """The derivation key of what is asked, made once by the plan (see :attr:`backbone`)."""
        self.derivation  # noqa: B018 - raises the dry-run error
        key = self.steps[-1].key  # the result's step, or the head's in a plan of one head
        assert key is not None  # set whenever the spec is
        return key

    def walk(self, run: Run) -> None:
        """Make every step that has a maker, in order (what a step reads was made by one above
        it), each from the store or computed now, keeping its output in ``run.made``; the
        runner then scores from what they made. Called by execute, on a cache miss only."""
        for step in self.steps:
            if step.make is not None:
                run.made[(step.op, step.role)] = step.make(self, run, step)

    def step(self, op: str, role: str = "") -> Step | None:
        """The planned step of ``op`` (``featureset``, ``head``...) in ``role``, if any."""
        return next((s for s in self.steps if s.op == op and s.role == role), None)

    def spec_of(self, op: str, role: str, made: Callable[[], dict[str, Any]],
                **inputs: str) -> tuple[dict[str, Any], str]:
        """The spec and key of the planned ``op`` step in ``role``, executed over ``inputs``
        (ids made by earlier steps). The plan's own when it made them over those same inputs;
        otherwise (an input that did not exist when it planned: features still to extract, views
        still to derive) ``made()``'s, keyed now, once."""
        step = self.step(op, role)
        if (step is not None and step.spec is not None and step.key is not None
                and all(step.spec["inputs"].get(k) == v for k, v in inputs.items())):
            return step.spec, step.key
        spec = made()
        return spec, derivation_key(spec)

    @property
    def cached(self) -> bool:
        """Whether the result itself is stored (nothing to compute)."""
        return self.steps[-1].status == "stored"

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.name,
            "params": self.task_params,
            "runner": self.runner.shape,
            "backbone": self.ref.id if self.ref else None,
            "steps": [s.as_dict() for s in self.steps],
        }

    def describe(self) -> list[str]:
        return [s.describe() for s in self.steps]
