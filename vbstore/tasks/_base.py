"""What a probe task declares, and the three calls the engine makes on it.

A task is a stateless object. Its class attributes are the declaration that goes into derivation
keys and records (``op_version``, the resolved params, metric directions); its methods are pure
functions of tensors, params and a seed.

The engine calls, with features already loaded:

```python
params = task.resolve_params(user_params)      # defaults filled, unknown keys refused
# a task that trains a head (task.trains_head):
head_state, train_metrics = task.fit(train_feats, train_targets, params, seed, class_names)
metrics = task.evaluate(head_state, eval_feats, eval_targets, params)
values = task.per_sample(head_state, eval_feats, eval_targets, params)  # optional: or None
# a zero-shot task (task.zero_shot):
metrics = task.evaluate_zero_shot(eval_feats, eval_targets, params, context)
```

The public methods check their inputs, call the subclass hooks ``_fit``, ``_evaluate`` and
``_evaluate_zero_shot``, then check the outputs (CPU tensors; finite floats for exactly the
declared metrics). torch is imported only inside those calls, so reading a task's declaration
(a cached ``vbstore get``) never imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from ..data import get_target_kind
from ..errors import UsageError
from ._errors import TaskInputError
from ._shapes import SHAPES, Shape, get_shape, infer_shape
from ._split import DenseSplit

if TYPE_CHECKING:
    import torch

    from ._split import DenseSplit

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.

Level = Literal["high", "mid", "low"]
Direction = Literal["higher", "lower"]
TargetKind = str  # a registered target kind (vbstore.data.list_target_kinds())
ParamValue = bool | int | float | str
HeadState = dict[str, "torch.Tensor"]

@dataclass(frozen=True)
class Metric:
    """One number a task reports, and which way is better.

    Attributes:
        min_classes: Reported only when the scored data has at least this many classes, absent
            otherwise (0: always). VisBench's rule for top-k: top5 over 5 classes or fewer is
            1.0 by construction, and a number that cannot differ says nothing.
    """

    name: str
    direction: Direction
    description: str
    min_classes: int = 0

    def reported(self, classes: int | None) -> bool:
        """Whether the metric is reported on data of ``classes`` classes (None: not known)."""
        return classes is None or classes >= self.min_classes


@dataclass(frozen=True)
class FileParam:
    """How a str parameter may name a file of strings (prompt templates, class names).

    The engine reads a named file with ``parse``, stores the entries as a JSON blob and replaces
    the path by the blob's id, so a result depends on the file's content and not its path; the
    task then finds the entries in ``context["files"][key]``.

    Attributes:
        parse: The file's text -> its entries; raises UsageError on bad content.
        names: Values that name no file (built-in sets, an empty default).
    """

    parse: Callable[[str], list[str]]
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Param:
    """One task parameter: its default (whose type is the parameter's type) and its bounds.

    Attributes:
        default: The value used when the user gives none; ``bool``, ``int``, ``float`` or ``str``.
        help: One line for ``vbstore list tasks`` and the docs.
        minimum: Inclusive lower bound for numbers.
        above: Exclusive lower bound for numbers (a learning rate must be > 0).
        maximum: Inclusive upper bound for numbers.
        choices: The allowed values of a string parameter.
        file: Set when a string parameter may name a file whose content the result depends on.
        added: Set on a parameter added after results of its task were stored: at its default
            it is left out of derivation keys and records (:meth:`Task.keyed_params`), so those
            results keep their keys; any other value enters them.
        scoring: Set on a parameter read only when scoring (detection's decoding): it is left
            out of head keys and head records (:meth:`Task.head_params`), so another value
            scores the same head again instead of training a new one.
    """

    default: ParamValue
    help: str
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    file: FileParam | None = None
    added: bool = False
    scoring: bool = False

    def normalise(self, task: str, key: str, value: Any) -> ParamValue:
        """Check ``value`` and return it in canonical form (an integral float for an int becomes
        an int; an int for a float becomes a float), so equal settings hash equal.

        Raises:
            UsageError: the value has the wrong type, is out of bounds or not a choice.
        """

        def refuse(expected: str) -> UsageError:
            return UsageError(
                f"parameter {key!r} of task {task!r} must be {expected}, got {value!r}",
                hint=f"{key}: {self.help} (default {self.default!r})",
            )

        kind = type(self.default)
        if kind is bool:
            if not isinstance(value, bool):
                raise refuse("true or false")
            return value
        if kind is str:
            if not isinstance(value, str):
                raise refuse("a string")
            if self.choices is not None and value not in self.choices:
                raise refuse("one of " + ", ".join(repr(c) for c in self.choices))
            return value
        # bool is an int subclass; `k=True` is a mistake, never 1.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise refuse("an integer" if kind is int else "a number")
        if not math.isfinite(value):
            raise refuse("a finite number")
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise refuse("an integer")
            value = int(value)
        else:
            value = float(value)
        if self.minimum is not None and value < self.minimum:
            raise refuse(f">= {self.minimum:g}")
        if self.above is not None and value <= self.above:
            raise refuse(f"> {self.above:g}")
        if self.maximum is not None and value > self.maximum:
            raise refuse(f"<= {self.maximum:g}")
        return value

    def describe(self) -> dict[str, Any]:
        """The parameter as a JSON-ready dict (bounds only where set)."""
        out: dict[str, Any] = {"default": self.default, "help": self.help}
        for field in ("minimum", "above", "maximum"):
            if getattr(self, field) is not None:
                out[field] = getattr(self, field)
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.file is not None:
            out["file"] = True
        return out


class ZeroShotContext(TypedDict, total=False):
    """What a zero-shot task may need beside the image features.

    Attributes:
        text_encoder: A CLIP text tower: list of N strings -> tensor (N, D) in the image
            embedding space. Called with at most 1024 strings at a time.
        class_names: Class names, indexed by the class-index targets.
        captions: For image-caption data: captions[i] are the captions of image row i.
        files: The entries of each file parameter (:class:`FileParam`), by parameter name.
        dataset_templates: The prompt templates the data names itself (a ``cb:`` source's),
            used by ``templates="dataset"``.
        dataset_prompts: Class-specific prompts the data names instead (CLIP_benchmark's CuPL
            file), one list per class, used by ``templates="dataset"``.
    """

    text_encoder: Callable[[list[str]], torch.Tensor]
    class_names: Sequence[str]
    captions: Sequence[Sequence[str]]
    files: Mapping[str, Sequence[str]]
    dataset_templates: Sequence[str] | None
    dataset_prompts: Sequence[Sequence[str]] | None


class Task:
    """Base class of every probe task. Subclasses set the class attributes and the hooks.

    Attributes:
        name: The registered name (set by :func:`register_task`).
        level: ``high``, ``mid`` or ``low`` vision.
        op_version: Bumped whenever the numbers the task produces would change.
        shape: How the task meets its features (:mod:`._shapes`: ``pooled``, ``zero_shot``,
            ``text``, ``dense``, ``boxes``, ``pairs``, ``views``...): the engine runs the
            shape's runner. Declaring it sets ``feature_mode``, ``trains_head``, ``zero_shot``,
            ``needs_text`` and ``views``; a task that sets those flags instead gets the shape
            they describe at registration.
        feature_mode: ``pooled`` (N, C) or ``dense`` (N, C, H, W) features.
        pooling: Which pooled vector; ``default`` is the backbone's own (CLS token for a ViT,
            global average for a CNN).
        target_kind: How targets come: ``class_index`` (N,) ints, ``multi_hot`` (N, K) 0/1,
            ``captions`` (in the zero-shot context; targets are None), or ``triplets`` (T, 5)
            ints ``[ref, left, right, left_vote, right_vote]`` (rows index the features,
            and T need not be N), or ``pairs`` (P, 9) floats ``[a, b, qw, qx, qy, qz, tx, ty,
            tz]`` (rows a and b index the features; the relative pose); a dense task
            (``feature_mode = "dense"``) takes a per-pixel kind, ``label_map``, ``depth_map``,
            ``normal_map``, ``scalar_map`` or ``image``, delivered in a :class:`DenseSplit`.
        trains_head: Whether the task fits a head on a train split (``fit`` then ``evaluate``).
        zero_shot: Whether the task takes no train split (``evaluate_zero_shot``).
        needs_text: Whether the context must carry a CLIP ``text_encoder``.
        stochastic: Whether the seed changes the numbers; a task that ignores it gives the same
            result for every seed.
        params: Parameter schema: name -> :class:`Param`.
        metrics: The evaluation metrics, in report order.
        train_metrics: Metrics ``fit`` reports on the train split.
        headline: The metric a leaderboard ranks by.
        protocol: The published protocol the numbers follow (``probe3d``...), put in records.
        layout: The data layout the task reads, for help texts (default: by ``target_kind``).
        sample_ci_skip: Why the engine's bootstrap over eval samples does not apply to this
            task (put in the record instead of an interval); empty when it applies.
        views: For a zero-shot dense task scored on image pairs: ``homography`` (each image
            against a warped copy the engine derives) or ``keypoints`` (annotated keypoint
            pairs of the manifest); the engine then calls ``evaluate_views``.
        finetune_loss: For a pooled task whose head is ``tasks._linear``'s (``weight``,
            ``bias``, ``mean``, ``std``): the loss that head trains with (``cross_entropy`` or
            ``binary_cross_entropy``), so ``--finetune-blocks`` can train the backbone's last
            blocks with it (docs/finetune.md); None: the task cannot fine-tune.
    """

    name: str = ""
    level: ClassVar[Level]
    op_version: ClassVar[int]
    shape: ClassVar[str] = ""
    feature_mode: ClassVar[Literal["pooled", "dense"]] = "pooled"
    pooling: ClassVar[str] = "default"
    target_kind: ClassVar[TargetKind]
    trains_head: ClassVar[bool] = False
    zero_shot: ClassVar[bool] = False
    needs_text: ClassVar[bool] = False
    stochastic: ClassVar[bool] = False
    params: Mapping[str, Param] = MappingProxyType({})
    metrics: ClassVar[tuple[Metric, ...]] = ()
    train_metrics: ClassVar[tuple[Metric, ...]] = ()
    headline: ClassVar[str] = ""
    protocol: ClassVar[str | None] = None
    layout: ClassVar[str | None] = None
    sample_ci_skip: ClassVar[str] = ""
    views: ClassVar[str | None] = None
    finetune_loss: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("shape")
        if declared in SHAPES:  # the shape's flags, for the task's own methods and describe()
            spec = SHAPES[declared]
            cls.feature_mode, cls.trains_head = spec.feature_mode, spec.trains_head
            cls.zero_shot, cls.needs_text, cls.views = (not spec.trains_head, spec.needs_text,
                                                        spec.views)

    @property
    def shape_spec(self) -> Shape:
        """The declared shape, or the one the task's flags describe (a task that predates
        shapes).

        Raises:
            UsageError: an unknown shape name.
        """
        if self.shape:
            return get_shape(self.shape)
        return get_shape(infer_shape(self.feature_mode, self.trains_head, self.zero_shot,
                                     self.needs_text, self.views, self.target_kind))

    def check_inputs(self, *, train: bool, head: bool) -> None:
        """Refuse training data or a head this task cannot take, or their absence where it
        needs one (see :meth:`Shape.check_inputs`).

        Raises:
            UsageError: naming the flag to drop or to pass.
        """
        self.shape_spec.check_inputs(self.name, train=train, head=head)

    def check_head(self, head: HeadState) -> None:
        """Refuse a head whose tensors this task could never use, whatever features it meets:
        run where a head arrives (``import head``), so it is refused there, not first on use.
        The default checks nothing; the task checks the head against features again on use.

        Raises:
            TaskInputError: naming the tensor and what is wrong with it.
        """

    @property
    def finetunes(self) -> bool:
        """Whether ``--finetune-blocks`` can train the backbone's last blocks with this task's
        head: its shape's runner fine-tunes (``Shape.finetune``) and its head recipe trains the
        blocks too (a pooled task's ``finetune_loss``; the dense recipe, ``DenseTask``)."""
        return self.shape_spec.finetune and self.finetune_loss is not None

    @property
    def ci_skip_reason(self) -> str:
        """Why the engine's bootstrap over eval samples does not apply; empty when it does.

        The shape's reason (dense maps, a text tower) comes before the task's own.
        """
        return self.shape_spec.sample_ci_skip or self.sample_ci_skip

    def __init__(self, *, defaults: Mapping[str, Any] | None = None) -> None:
        """Make a task, optionally with other parameter defaults (a registered variant).

        Raises:
            UsageError: an unknown parameter or a bad value in ``defaults``.
        """
        if defaults:
            resolved = self.resolve_params(defaults)
            # An instance attribute: the class's schema stays as declared for other variants.
            self.params = {k: replace(p, default=resolved[k]) for k, p in self.params.items()}

    @property
    def display_name(self) -> str:
        """The registered name, or the class name before registration (for messages)."""
        return self.name or type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} task {self.name!r} v{self.op_version}>"

    def resolve_params(self, user_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Fill defaults into ``user_params`` and normalise every value.

        The result holds every parameter, so it is what a record and a derivation key carry.

        Raises:
            UsageError: an unknown key (naming the valid ones) or a bad value.
        """
        given = dict(user_params or {})
        for key in sorted(given, key=str):
            if key not in self.params:
                valid = ", ".join(sorted(self.params)) or "none"
                import difflib  # a suggestion, on the error path only

                close = difflib.get_close_matches(str(key), list(self.params), n=1)
                raise UsageError(
                    f"task {self.display_name!r} has no parameter {key!r} (valid: {valid})",
                    hint=f"did you mean {close[0]!r}?" if close else "see: vbstore list tasks",
                )
        return {
            key: spec.normalise(self.display_name, key, given.get(key, spec.default))
            for key, spec in sorted(self.params.items())
        }

    def keyed_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` (resolved) as keys and records carry them: an ``added`` parameter at its
        default is left out, as results stored before it existed have it."""
        return {key: value for key, value in params.items()
                if not (key in self.params and self.params[key].added
                        and value == self.params[key].default)}

    def head_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` as head keys and head records carry them: :meth:`keyed_params` without the
        parameters read only when scoring."""
        return {key: value for key, value in self.keyed_params(params).items()
                if not (key in self.params and self.params[key].scoring)}

    def metrics_for(self, params: Mapping[str, Any] | None = None) -> tuple[Metric, ...]:
        """The metrics the task reports under ``params`` (resolved, or a record's, where an
        ``added`` parameter at its default is absent): :attr:`metrics`, unless a parameter
        names them (``correspondence``'s ``units`` and ``thresholds``) or leaves one out
        (``captioning``'s ``spice=false``)."""
        return self.metrics

    def headline_for(self, params: Mapping[str, Any] | None = None) -> str:
        """The headline among :meth:`metrics_for` ``params``: :attr:`headline` unless a
        parameter names the metrics."""
        return self.headline

    @property
    def data_layout(self) -> str:
        """The data layout this task reads, in words."""
        return self.layout or get_target_kind(self.target_kind).layout

    def describe(self) -> dict[str, Any]:
        """The whole declaration as a JSON-ready dict (for ``vbstore list tasks --json``)."""
        return {
            "name": self.name,
            "level": self.level,
            "op_version": self.op_version,
            "shape": self.shape_spec.name,
            "feature_mode": self.feature_mode,
            "pooling": self.pooling,
            "target_kind": self.target_kind,
            "trains_head": self.trains_head,
            "zero_shot": self.zero_shot,
            "needs_text": self.needs_text,
            "stochastic": self.stochastic,
            "params": {key: spec.describe() for key, spec in sorted(self.params.items())},
            "metrics": [asdict(m) for m in self.metrics],
            "train_metrics": [asdict(m) for m in self.train_metrics],
            "headline": self.headline,
        }

    def fit(
        self,
        train_feats: torch.Tensor,
        train_targets: torch.Tensor,
        params: Mapping[str, Any] | None = None,
        seed: int = 0,
        class_names: Sequence[str] | None = None,
    ) -> tuple[HeadState, dict[str, float]]:
        """Fit the task's head on train features.

        Args:
            train_feats: (N, C) floating features.
            train_targets: Targets of ``target_kind``.
            params: Task params; resolved again here, so partial params are fine.
            seed: Seeds every random draw (a local generator; global RNG state is untouched).
            class_names: The manifest's class names; they fix the class count, so a class
                missing from the train split still gets an output. ``None``: inferred.

        Returns:
            ``(head_state, train_metrics)``: CPU tensors for safetensors, and finite floats.

        Raises:
            UsageError: the task is zero-shot (it takes no training data) or a bad param/seed.
            TaskInputError: features or targets of the wrong shape, dtype or value.
            TrainingDiverged: the head's weights became NaN or infinite.
            UndefinedMetric: a train metric would be NaN.
        """
        if not self.trains_head:
            raise UsageError(
                f"task {self.name!r} is zero-shot and takes no training data",
                hint="drop the train split (--train-data)",
            )
        from . import _checks

        params = self.resolve_params(params)
        seed = _checks.seed(seed)
        feats = _checks.features(train_feats, "train")
        names = None if class_names is None else _checks.class_names(class_names)
        targets = _checks.targets(
            self.target_kind,
            train_targets,
            len(feats),
            "train",
            None if names is None else len(names),
        )
        head, train_metrics = self._fit(feats, targets, params, seed, names)
        return _checks.head_out(head), _checks.metrics_out(self, train_metrics, self.train_metrics)

    def evaluate(
        self,
        head_state: Mapping[str, torch.Tensor],
        eval_feats: torch.Tensor,
        eval_targets: torch.Tensor,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, float]:
        """Score a fitted head on eval features.

        Returns:
            Every declared metric, as a finite float, in declaration order.

        Raises:
            UsageError: the task is zero-shot, or a bad param.
            TaskInputError: inputs, or a head, that do not fit (shape, dtype, class count).
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        if not self.trains_head:
            raise UsageError(
                f"task {self.name!r} is zero-shot and has no head",
                hint="call evaluate_zero_shot instead",
            )
        from . import _checks

        params = self.resolve_params(params)
        feats = _checks.features(eval_feats, "eval")
        targets = _checks.targets(self.target_kind, eval_targets, len(feats), "eval", None)
        head = _checks.head_in(head_state)
        return _checks.metrics_out(self, self._evaluate(head, feats, targets, params),
                                   self.metrics_for(params))

    def per_sample(
        self,
        head_state: Mapping[str, torch.Tensor],
        eval_feats: torch.Tensor,
        eval_targets: torch.Tensor,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, torch.Tensor] | None:
        """Each metric's value per eval row, for a task whose metrics are means of them.

        ``evaluate`` equals the mean of these values; the engine's bootstrap over eval samples
        (:mod:`.bootstrap`) then costs one weighted mean per draw instead of an evaluation.

        Returns:
            ``{metric: (N,) float64}`` for every declared metric, or None when the task has no
            per-sample form (the bootstrap then calls ``evaluate`` on each draw).

        Raises:
            TaskInputError: inputs, or a head, that do not fit; or a hook that returned other
                metrics or shapes.
        """
        if not self.trains_head:
            return None
        from . import _checks

        params = self.resolve_params(params)
        feats = _checks.features(eval_feats, "eval")
        targets = _checks.targets(self.target_kind, eval_targets, len(feats), "eval", None)
        values = self._per_sample(_checks.head_in(head_state), feats, targets, params)
        if values is None:
            return None
        names = [m.name for m in self.metrics_for(params) if m.name in values or not m.min_classes]
        if sorted(values) != sorted(names):
            raise TaskInputError(f"task {self.display_name!r} gave per-sample values for "
                                 f"{sorted(values)}, not its metrics {sorted(names)}")
        for name, v in values.items():
            if tuple(v.shape) != (len(feats),):
                raise TaskInputError(f"task {self.display_name!r}: per-sample {name!r} has shape "
                                     f"{tuple(v.shape)}, not ({len(feats)},)")
        return {name: values[name].detach().to("cpu").double() for name in names}

    def evaluate_zero_shot(
        self,
        eval_feats: torch.Tensor,
        eval_targets: torch.Tensor | None,
        params: Mapping[str, Any] | None = None,
        context: ZeroShotContext | Mapping[str, Any] | None = None,
    ) -> dict[str, float]:
        """Score eval features with no training data.

        Raises:
            UsageError: the task trains a head, or needs a text encoder the context lacks.
            TaskInputError: inputs or context that do not fit.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        if not self.zero_shot:
            raise UsageError(
                f"task {self.name!r} trains a head and needs a train split",
                hint="call fit, then evaluate",
            )
        from . import _checks

        context = dict(context or {})
        if self.needs_text and not callable(context.get("text_encoder")):
            raise UsageError(
                f"task {self.name!r} needs a text encoder",
                hint="use a CLIP backbone (one with a text tower), e.g. an open_clip model",
            )
        params = self.resolve_params(params)
        feats = _checks.features(eval_feats, "eval")
        targets = _checks.targets(self.target_kind, eval_targets, len(feats), "eval", None)
        metrics = self._evaluate_zero_shot(feats, targets, params, context)
        return _checks.metrics_out(self, metrics, self.metrics_for(params))

    def fit_split(
        self,
        train: DenseSplit,
        params: Mapping[str, Any] | None = None,
        seed: int = 0,
        class_names: Sequence[str] | None = None,
    ) -> tuple[HeadState, dict[str, float]]:
        """Fit a dense task's head on a split streamed in batches (``feature_mode = "dense"``).

        Returns:
            ``(head_state, train_metrics)``: CPU tensors for safetensors, and finite floats.

        Raises:
            UsageError: the task is not a trained dense task, or a bad param/seed.
            TaskInputError: a split whose targets are not the task's ``target_kind``.
            TrainingDiverged: the head's weights became NaN or infinite.
        """
        from . import _checks

        self._check_split(train, "train", trained=True)
        params = self.resolve_params(params)
        seed = _checks.seed(seed)
        names = None if class_names is None else _checks.class_names(class_names)
        head, train_metrics = self._fit_split(train, params, seed, names)
        return _checks.head_out(head), _checks.metrics_out(self, train_metrics, self.train_metrics)

    def evaluate_split(
        self,
        head_state: Mapping[str, torch.Tensor] | None,
        split: DenseSplit,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, float]:
        """Score a dense split: with a fitted head, or ``None`` for a zero-shot dense task.

        Raises:
            UsageError: the task is not dense, or a bad param.
            TaskInputError: a split or head that does not fit.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        from . import _checks

        self._check_split(split, "eval", trained=self.trains_head)
        params = self.resolve_params(params)
        head = _checks.head_in(head_state) if self.trains_head else None
        return _checks.metrics_out(self, self._evaluate_split(head, split, params),
                                   self.metrics_for(params))

    def evaluate_views(self, views: Any, params: Mapping[str, Any] | None = None
                       ) -> dict[str, float]:
        """Score image pairs (a task with ``views``): for ``homography`` views a
        :class:`vbstore.tasks.WarpPairs` (each image's features, its warped copy's, the exact
        warp), for ``keypoints`` a :class:`vbstore.tasks.KeypointPairs`.

        Raises:
            UsageError: the task scores no views, or a bad param.
            TaskInputError: views that do not fit.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        from . import _checks

        if self.views is None:
            raise UsageError(f"task {self.display_name!r} scores no derived views",
                             hint="call evaluate_split or evaluate_zero_shot")
        params = self.resolve_params(params)
        return _checks.metrics_out(self, self._evaluate_views(views, params),
                                   self.metrics_for(params))

    def _evaluate_views(self, views: Any, params: dict[str, Any]) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} scores no derived views")

    def evaluate_captions(self, generated: Sequence[str], references: Sequence[Sequence[str]],
                          params: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Score the caption the model generated for each image against its references (a
        task of the ``generate`` shape).

        Returns:
            The metrics :meth:`metrics_for` names, as finite floats, in declared order.

        Raises:
            UsageError: the task scores no generated captions, or a bad param.
            TaskInputError: not one caption and at least one reference per image.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        from . import _checks

        if "_evaluate_captions" not in self.shape_spec.hooks:
            raise UsageError(f"task {self.display_name!r} scores no generated captions",
                             hint="call evaluate_zero_shot or evaluate")
        params = self.resolve_params(params)
        if len(generated) != len(references) or not generated:
            raise TaskInputError(f"{len(generated)} generated captions for {len(references)} "
                                 "images: one each, at least one image")
        empty = next((i for i, refs in enumerate(references) if not list(refs)), None)
        if empty is not None:
            raise TaskInputError(f"image {empty} has no reference caption",
                                 hint="give every image at least one caption")
        metrics = self._evaluate_captions([str(g) for g in generated],
                                          [[str(r) for r in refs] for refs in references], params)
        return _checks.metrics_out(self, metrics, self.metrics_for(params))

    def _evaluate_captions(self, generated: list[str], references: list[list[str]],
                           params: dict[str, Any]) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} scores no generated captions")

    def uses_seed(self, params: Mapping[str, Any]) -> bool:
        """Whether the seed changes the numbers of a run with ``params`` (``stochastic``, unless
        a parameter decides it: captioning samples only with ``top_k``/``top_p``)."""
        return self.stochastic

    def decoding(self, params: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
        """The keyword arguments a ``generate`` task passes to the model's ``generate`` (the
        generated captions' key), and ``seed`` when the decoding samples; none for other
        tasks."""
        return {}

    def check_tools(self, params: Mapping[str, Any]) -> None:
        """Refuse, before anything is computed, a run whose scorers cannot run here (a program
        or a file they need is missing). Nothing to check by default.

        Raises:
            MissingDependency: naming what to install.
        """
        return None

    def _check_split(self, split: Any, role: str, *, trained: bool) -> None:
        if self.feature_mode != "dense":
            raise UsageError(f"task {self.display_name!r} reads pooled features, not a dense split",
                             hint="call fit/evaluate with (N, C) features")
        if trained != self.trains_head:
            raise UsageError(f"task {self.display_name!r} is zero-shot and takes no training data",
                             hint="call evaluate_split(None, split)")
        if not isinstance(split, DenseSplit):
            raise TaskInputError(f"{role} data must be a DenseSplit, got {type(split).__name__}")
        if split.target_kind != self.target_kind:
            raise TaskInputError(f"{role} targets are {split.target_kind}, task "
                                 f"{self.display_name!r} needs {self.target_kind}")
        if len(split) == 0:
            raise TaskInputError(f"{role} split is empty")

    def _fit_split(
        self, train: DenseSplit, params: dict[str, Any], seed: int, class_names: list[str] | None
    ) -> tuple[HeadState, dict[str, float]]:
        raise NotImplementedError(f"task {self.name!r} does not train on a dense split")

    def _evaluate_split(
        self, head: HeadState | None, split: DenseSplit, params: dict[str, Any]
    ) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} does not score a dense split")

    def _fit(
        self,
        feats: torch.Tensor,
        targets: Any,
        params: dict[str, Any],
        seed: int,
        class_names: list[str] | None,
    ) -> tuple[HeadState, dict[str, float]]:
        raise NotImplementedError(f"task {self.name!r} does not train a head")

    def _evaluate(
        self, head: HeadState, feats: torch.Tensor, targets: Any, params: dict[str, Any]
    ) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} does not evaluate a head")

    def _per_sample(
        self, head: HeadState, feats: torch.Tensor, targets: Any, params: dict[str, Any]
    ) -> dict[str, torch.Tensor] | None:
        return None  # no per-sample form: the bootstrap re-evaluates each draw

    def _evaluate_zero_shot(
        self, feats: torch.Tensor, targets: Any, params: dict[str, Any], context: dict[str, Any]
    ) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} is not zero-shot")
