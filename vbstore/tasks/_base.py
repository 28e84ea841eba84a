"""What every probe task declares, whatever its shape.

A task is a stateless object. Its class attributes are the declaration that goes into derivation
keys and records (``op_version``, the resolved params, metric directions); the calls the engine
makes on it are its shape's, and live on the shape's base class beside this module:

| base class (module ``_shape_*``) | shapes | the task implements |
|---|---|---|
| `PooledTask` (pooled) | pooled, embedding, pairs | `_fit`, `_evaluate` (`_per_sample`) |
| `ZeroShotTask` (zero_shot) | zero_shot, text | `_evaluate_zero_shot` |
| `SplitTask` (split) | dense, boxes, dense_zero_shot | `_fit_split`, `_evaluate_split` |
| `ViewsTask` (views) | views, keypoint_views | `_evaluate_views` |
| `GenerateTask` (generate) | generate | `_evaluate_captions` |

```python
params = task.resolve_params(user_params)      # defaults filled, unknown keys refused
head_state, train_metrics = task.fit(train_feats, train_targets, params, seed, class_names)
metrics = task.evaluate(head_state, eval_feats, eval_targets, params)   # a PooledTask
```

A shape's public methods check their inputs, call the task's hooks, then check the outputs
(CPU tensors; finite floats for exactly the declared metrics). torch is imported only inside
those calls, so reading a task's declaration (a cached ``vbstore get``) never imports it.

A task written before the shapes had base classes (a plugin's ``class P(Task)`` with
``shape = "pooled"``, or with the flags alone) still works: made, it is an instance of a
subclass of both its class and its shape's base (:meth:`Task.__new__`); a method of another
shape is refused as before, naming the one to call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from ..data import get_target_kind
from ..errors import UsageError, field_ref
from ._declare import Direction, FileParam, Metric, Param, ParamValue
from ._shapes import SHAPES, Shape, get_shape, infer_shape

__all__ = ["Direction", "FileParam", "HeadState", "Level", "Metric", "Param", "ParamValue",
           "TargetKind", "Task", "of_shape", "unimplemented"]

Level = Literal["high", "mid", "low"]
TargetKind = str  # a registered target kind (vbstore.data.list_target_kinds())
# a head's named tensors: torch tensors, or numpy arrays for a task that computes in numpy
HeadState = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", bound="Task")


def unimplemented(hook: F) -> F:
    """Mark a shape base's default ``hook``: a task of that shape must override it, and the
    registry refuses one that does not (naming the hook)."""
    hook.unimplemented_hook = True  # type: ignore[attr-defined]
    return hook


class Task:
    """Base class of every probe task: the declaration all shapes share. A task subclasses its
    shape's base (:class:`PooledTask`, :class:`ZeroShotTask`...), which carries the calls.

    Attributes:
        name: The registered name (set by :func:`register_task`).
        level: ``high``, ``mid`` or ``low`` vision.
        op_version: Bumped whenever the numbers the task produces would change.
        shape: How the task meets its features (:mod:`._shapes`: ``pooled``, ``zero_shot``,
            ``text``, ``dense``, ``boxes``, ``pairs``, ``views``...): the engine runs the
            shape's runner. Its base class declares it; declaring it sets ``feature_mode``,
            ``trains_head``, ``zero_shot``, ``needs_text`` and ``views``; a task that sets
            those flags instead gets the shape they describe at registration.
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
        trains_head: Whether the task fits a head on a train split.
        zero_shot: Whether the task takes no train split.
        needs_text: Whether the context must carry a CLIP ``text_encoder``.
        stochastic: Whether the seed changes the numbers; a task that ignores it gives the same
            result for every seed.
        takes_val_split: Whether the task's fit reads a named validation split of the training
            data (``val_split``: ``linear_probe`` searches its weight decay on it); its
            ``fit`` then takes ``val=(features, targets)``.
        params: Parameter schema: name -> :class:`Param`.
        metrics: The evaluation metrics, in report order.
        train_metrics: Metrics the head's fit reports on the train split.
        headline: The metric a leaderboard ranks by.
        protocol: The published protocol the numbers follow (``probe3d``...), put in records.
        layout: The data layout the task reads, for help texts (default: by ``target_kind``).
        sample_ci_skip: Why the engine's bootstrap over eval samples does not apply to this
            task (put in the record instead of an interval); empty when it applies.
        views: For a task scored on image pairs: ``homography`` or ``keypoints`` (set by the
            ``views`` and ``keypoint_views`` shapes).
        finetune_loss: For a pooled task whose head is ``tasks._linear``'s (``weight``,
            ``bias``, ``mean``, ``std``): the loss that head trains with (``cross_entropy`` or
            ``binary_cross_entropy``), so ``--finetune-blocks`` can train the backbone's last
            blocks with it (docs/finetune.md); None: the task cannot fine-tune.
        array: What the task's calls compute with: ``torch`` tensors, or ``numpy`` arrays for a
            task that scores (``ZeroShotTask``) or trains and scores (``PooledTask``) on the
            stored rows without torch; the engine reads the rows as the task declares.
    """

    name: str = ""
    array: ClassVar[Literal["torch", "numpy"]] = "torch"
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
    takes_val_split: ClassVar[bool] = False
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
        cls.take_shape_flags()

    @classmethod
    def take_shape_flags(cls) -> None:
        """Set the flags of the shape the class declares, for the task's own methods and
        describe() (again by ``register_shape``, for a plugin's base class that declares its
        shape before the shape's row names it)."""
        declared = cls.__dict__.get("shape")
        if declared in SHAPES:
            spec = SHAPES[declared]
            cls.feature_mode, cls.trains_head = spec.feature_mode, spec.trains_head
            cls.zero_shot, cls.needs_text, cls.views = (not spec.trains_head, spec.needs_text,
                                                        spec.views)

    def __new__(cls: type[T], *args: Any, **kwargs: Any) -> T:
        """A task of a class that does not derive from its shape's base (one written against
        the wide ``Task``) is made as a subclass of both, so it has its shape's calls."""
        base = _shape_base(cls)
        if base is not None and not issubclass(cls, base):
            cls = _adapted(cls, base)
        return super().__new__(cls)

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

    if not TYPE_CHECKING:  # typed code calls a shape's methods on that shape's base (of_shape)

        def __getattr__(self, name: str) -> Any:
            """A call of another shape (``fit`` on a zero-shot task...): refused when called,
            naming the one to call, as the wide ``Task`` refused it."""
            refusal = _refusal(self, name)
            if refusal is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise UsageError(f"task {self.display_name!r} {refusal[0]}", hint=refusal[1])

            return refuse

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

    def uses_seed(self, params: Mapping[str, Any]) -> bool:
        """Whether the seed changes the numbers of a run with ``params`` (``stochastic``, unless
        a parameter decides it: captioning samples only with ``top_k``/``top_p``)."""
        return self.stochastic

    def check_tools(self, params: Mapping[str, Any]) -> None:
        """Refuse, before anything is computed, a run whose scorers cannot run here (a program
        or a file they need is missing). Nothing to check by default.

        Raises:
            MissingDependency: naming what to install.
        """
        return None


def of_shape(task: Task, base: type[T]) -> T:
    """``task`` as its shape's base class ``base`` (what a runner calls it through).

    Raises:
        UsageError: the task is of another shape.
    """
    if not isinstance(task, base):
        raise UsageError(f"task {task.display_name!r} is of shape {task.shape_spec.name!r}, "
                         f"not a {base.__name__}", hint="run it with its own shape's runner")
    return task


def _shape_base(cls: type[Task]) -> type[Task] | None:
    """The base class of the shape ``cls`` declares (or its flags describe); None for a shape
    with none (a plugin's shape row alone) or a declaration the registry will refuse."""
    name = cls.shape
    if not name:
        try:
            name = infer_shape(cls.feature_mode, cls.trains_head, cls.zero_shot, cls.needs_text,
                               cls.views, cls.target_kind)
        except (AttributeError, UsageError):
            return None
    spec = SHAPES.get(name)
    return None if spec is None else spec.base_class()


_ADAPTED: dict[tuple[type, type], type] = {}


def _adapted(cls: type[T], base: type[Task]) -> type[T]:
    """``cls`` (written against the wide ``Task``) joined to its shape's ``base``, made once:
    named and placed like ``cls``, pickled as ``cls``."""
    if (cls, base) not in _ADAPTED:
        _ADAPTED[cls, base] = type(cls.__name__, (cls, base), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
            "__reduce__": lambda self: (_remake, (cls, dict(self.__dict__)))})
    return _ADAPTED[cls, base]


def _remake(cls: type[T], state: dict[str, Any]) -> T:
    task = cls.__new__(cls)
    task.__dict__.update(state)
    return task


# A call of another shape's base, and what the wide Task answered: (zero-shot task, trained one)
_OTHER_SHAPES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "fit": (("is zero-shot and takes no training data", "drop the train split "
                                                        f"({field_ref('train_data')})"),
            ("trains its head on a dense split", "call fit_split")),
    "evaluate": (("is zero-shot and has no head", "call evaluate_zero_shot instead"),
                 ("scores a dense split", "call evaluate_split")),
    "per_sample": (("is zero-shot and has no head", "call evaluate_zero_shot instead"),
                   ("scores a dense split", "call evaluate_split")),
    "evaluate_zero_shot": (("is not scored on pooled vectors alone",
                            "call evaluate_split, evaluate_views or evaluate_captions"),
                           ("trains a head and needs a train split", "call fit, then evaluate")),
    "fit_split": (("is zero-shot and takes no training data", "call evaluate_zero_shot"),
                  ("reads pooled features, not a dense split",
                   "call fit/evaluate with (N, C) features")),
    "evaluate_split": (("reads no dense split", "call evaluate_zero_shot"),
                       ("reads pooled features, not a dense split",
                        "call fit/evaluate with (N, C) features")),
    "evaluate_views": (("scores no derived views", "call evaluate_split or evaluate_zero_shot"),
                       ("scores no derived views", "call fit, then evaluate")),
    "evaluate_captions": (("scores no generated captions", "call evaluate_zero_shot"),
                          ("scores no generated captions", "call fit, then evaluate")),
    "decoding": (("generates no captions", "decoding is for a generate task"),
                 ("generates no captions", "decoding is for a generate task")),
}


def _refusal(task: Task, method: str) -> tuple[str, str] | None:
    answers = _OTHER_SHAPES.get(method)
    return None if answers is None else answers[bool(type(task).trains_head)]
