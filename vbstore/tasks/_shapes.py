"""Probe shapes: how a task meets its features, declared once.

A task declares one shape (``shape = "dense"``). The shape says which features it reads
(pooled vectors or dense maps), whether it trains a head, which of the task's hooks the engine
calls, what the engine must give it beside features (a text tower, derived views), and why the
bootstrap over eval samples does not apply, when it does not. The engine holds one runner per
shape (``vbstore.engine``'s runners) and the plan names it: no code outside this package asks a
task whether it is dense or zero-shot.

| shape | task's base | features | head | hooks the engine calls | e.g. |
|---|---|---|---|---|---|
| `pooled` | `PooledTask` | (N, C) | yes | `_fit`, `_evaluate` (`_per_sample`) | knn |
| `zero_shot` | `ZeroShotTask` | (N, C) | no | `_evaluate_zero_shot` | retrieval |
| `text` | `TextTask` | (N, C) | no | `_evaluate_zero_shot`, a text tower | zeroshot_* |
| `embedding` | `EmbeddingTask` | CLIP embeddings | yes | `_fit`, `_evaluate` | linear_probe |
| `dense` | `SplitTask` | (N, C, H, W) | yes | `_fit_split`, `_evaluate_split` | depth |
| `dense_zero_shot` | `DenseZeroShotTask` | (N, C, H, W) | no | `_evaluate_split` | (plugins) |
| `boxes` | `BoxesTask` | (N, C, H, W) | yes | `_fit_split`, `_evaluate_split` | detection |
| `pairs` | `PairsTask` | grid-pooled | yes | `_fit`, `_evaluate`; rows index | relative_pose |
| `views` | `ViewsTask` | (N, C, H, W) | no | `_evaluate_views`, warped copies | correspondence |
| `keypoint_views` | `KeypointViewsTask` | (N, C, H, W) | no | `_evaluate_views` | keypoint_corr. |
| `generate` | `GenerateTask` | none: captions | no | `_evaluate_captions` | captioning |

The calls live on five base classes, one per family of hooks, each in ``_shape_<family>.py``
beside :mod:`._base` (whose ``Task`` holds only what every shape shares): ``PooledTask``,
``ZeroShotTask``, ``SplitTask``, ``ViewsTask``, ``GenerateTask``; a shape row's ``base`` names
its family's, and the other names of the table are their subclasses that declare the shape
(``class LinearProbe(EmbeddingTask)``). A new shape is a :class:`Shape` row, a base class (or
an existing family's) and a runner.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ..data import get_target_kind
from ..errors import UsageError, field_ref

T = TypeVar("T")
_DENSE_CI = ("dense task: each draw would stream every eval map through the head again (cost); "
             "only the spread over seeds is reported")


@dataclass(frozen=True)
class Shape:
    """One probe shape (see the module's table).

    Attributes:
        name: What a task declares (``shape = "pooled"``) and the plan names.
        description: One line for ``vbstore list tasks`` and the docs.
        feature_mode: ``pooled`` (N, C) or ``dense`` (N, C, H, W) features are extracted.
        trains_head: Whether the task fits a head on a train split; otherwise it takes none.
        hooks: The task methods the engine calls, which a task of this shape must implement.
        needs_text: The engine gives the task a CLIP text tower (``context["text_encoder"]``).
        views: ``homography`` (warped copies the engine derives) or ``keypoints`` (annotated
            pairs of the manifest), for a task scored on image pairs.
        sample_ci_skip: Why the engine's bootstrap over eval samples does not apply to any task
            of this shape; empty when it may (a task can still give its own reason).
        finetune: The engine's runner of this shape can train the backbone's last blocks with
            the head (``--finetune-blocks``), for a task whose head recipe trains them too
            (``Task.finetunes``).
        reads_features: Its runner reads the backbone's features (``generate``: the model
            writes captions instead, so no pooling chooses anything).
        base: The base class a task of this shape subclasses, which carries the calls its
            runner makes (``"module:Class"``, imported when first needed, or the class); None:
            the task class itself implements the hooks (a plugin's shape row alone).
    """

    name: str
    description: str
    feature_mode: Literal["pooled", "dense"]
    trains_head: bool
    hooks: tuple[str, ...]
    needs_text: bool = False
    views: str | None = None
    sample_ci_skip: str = ""
    finetune: bool = False
    reads_features: bool = True
    base: str | type[Any] | None = None

    def base_class(self) -> type[Any] | None:
        """The :attr:`base` class, imported on first use (a cached ``get`` imports none)."""
        if self.base is None or isinstance(self.base, type):
            return self.base
        module, _, name = self.base.partition(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]

    def check_inputs(self, task: str, *, train: bool, head: bool) -> None:
        """Refuse training data or a head that a task of this shape cannot take, or their
        absence where it needs one.

        Raises:
            UsageError: naming the flag to drop or to pass.
        """
        if not self.trains_head and train:
            raise UsageError(f"task {task!r} is zero-shot and takes no training data",
                             hint=f"drop {field_ref('train_data')}")
        if not self.trains_head and head:
            raise UsageError(f"task {task!r} is zero-shot and uses no head",
                             hint=f"drop {field_ref('head')}")
        if self.trains_head and not (train or head):
            raise UsageError(f"task {task!r} trains a head on training data",
                             hint=f"pass {field_ref('train_data', 'DATA')} (and "
                                  f"{field_ref('train_split')} if it has splits)")

    def check_saves_head(self, task: str) -> None:
        """Refuse saving the head of a task that trains none (VisBench's ``--save-probe``).

        Raises:
            UsageError: the task trains no head.
        """
        if not self.trains_head:
            raise UsageError(f"{task!r} trains no head ({self.name} probe), so there is none to "
                             "save", hint="anyone with the backbone reproduces this number: "
                             "share the command, not a file")

    def check_trains(self, task: str) -> None:
        """Refuse a head of a task that trains none.

        Raises:
            UsageError: the task is zero-shot.
        """
        if not self.trains_head:
            raise UsageError(f"task {task!r} is zero-shot and has no head",
                             hint="use `vbstore get result` for it")

    def train_input(self, train: T) -> T | None:
        """``train`` for a shape that trains a head, None for one that takes no training data
        (a sweep over several tasks passes one train split to those that take it)."""
        return train if self.trains_head else None

    def pooled_input(self, value: T) -> T | None:
        """``value`` for a shape that reads pooled vectors, None for one that reads dense maps
        or no features (a pooling is offered only where it chooses the features)."""
        return value if self.feature_mode == "pooled" and self.reads_features else None

    def features_input(self, value: T) -> T | None:
        """``value`` (the feature settings) for a shape that reads features, None for one that
        reads none: no extractor is keyed or recorded where nothing is extracted."""
        return value if self.reads_features else None

    def check_pooling(self, task: str, pooling: str | None) -> None:
        """Refuse a pooling for a task that reads dense maps: it would key new features that
        hold the same numbers.

        Raises:
            UsageError: a pooling given to a dense shape.
        """
        if pooling is not None and self.feature_mode != "pooled":
            raise UsageError(f"task {task!r} reads dense feature maps; a pooling does not "
                             "apply to it", hint=f"drop {field_ref('pooling')}")

    @property
    def kind(self) -> str:
        """``trains a head`` or ``zero-shot``, for help texts and tables."""
        return "trains a head" if self.trains_head else "zero-shot"


_FIT = ("_fit", "_evaluate")
_SPLIT = ("_fit_split", "_evaluate_split")
_BASE = "vbstore.tasks._shape_{}:{}"
SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("pooled", "trains a head on pooled (N, C) vectors, one target per image", "pooled",
          True, _FIT, finetune=True, base=_BASE.format("pooled", "PooledTask")),
    Shape("zero_shot", "scores pooled (N, C) vectors with no training", "pooled", False,
          ("_evaluate_zero_shot",), base=_BASE.format("zero_shot", "ZeroShotTask")),
    Shape("text", "scores pooled (N, C) vectors against a CLIP text tower, no training",
          "pooled", False, ("_evaluate_zero_shot",), needs_text=True,
          sample_ci_skip="each draw would run the text tower again (cost)",
          base=_BASE.format("zero_shot", "ZeroShotTask")),
    Shape("embedding", "trains a head on a CLIP model's image embeddings (encode_image), one "
          "target per image", "pooled", True, _FIT, base=_BASE.format("pooled", "PooledTask")),
    Shape("dense", "trains a head on dense (N, C, H, W) maps, per-pixel targets in batches",
          "dense", True, _SPLIT, sample_ci_skip=_DENSE_CI, finetune=True,
          base=_BASE.format("split", "SplitTask")),
    Shape("dense_zero_shot", "scores dense (N, C, H, W) maps with no training", "dense",
          False, ("_evaluate_split",), sample_ci_skip=_DENSE_CI,
          base=_BASE.format("split", "SplitTask")),
    Shape("boxes", "trains a head on dense maps to predict boxes (and instance masks)",
          "dense", True, _SPLIT, sample_ci_skip=_DENSE_CI, finetune=True,
          base=_BASE.format("split", "SplitTask")),
    Shape("pairs", "trains a head on grid-pooled dense maps of image pairs (rows of the "
          "features)", "dense", True, _FIT, base=_BASE.format("pooled", "PooledTask")),
    Shape("views", "scores dense maps of each image against a warped copy's, no training",
          "dense", False, ("_evaluate_views",), views="homography",
          base=_BASE.format("views", "ViewsTask")),
    Shape("keypoint_views", "scores dense maps on annotated keypoint pairs, no training",
          "dense", False, ("_evaluate_views",), views="keypoints",
          base=_BASE.format("views", "ViewsTask")),
    # reads no features: the model generates a caption per image, stored once per decoding
    Shape("generate", "scores the captions the model generates for each image (CoCa's "
          "generate) against the references, no training", "pooled", False,
          ("_evaluate_captions",),
          sample_ci_skip="each draw would run the caption scorers (Java) again (cost)",
          reads_features=False, base=_BASE.format("generate", "GenerateTask")),
)}


def register_shape(shape: Shape) -> Shape:
    """Register a new probe shape (a plugin's, after its base class, before the task classes
    that subclass it); its runner registers with ``vbstore.engine.register_runner``.

    Raises:
        UsageError: the name is taken.
    """
    if shape.name in SHAPES:
        raise UsageError(f"probe shape {shape.name!r} is already registered",
                         hint="register yours under another name")
    SHAPES[shape.name] = shape
    if isinstance(shape.base, type) and shape.base.__dict__.get("shape") == shape.name:
        shape.base.take_shape_flags()  # a base class made before its row: its flags now
    return shape


def get_shape(name: str) -> Shape:
    """The shape called ``name``.

    Raises:
        UsageError: no such shape (the message lists them).
    """
    try:
        return SHAPES[name]
    except KeyError:
        raise UsageError(f"unknown probe shape {name!r}",
                         hint=f"shapes: {', '.join(SHAPES)}") from None


def infer_shape(feature_mode: str, trains_head: bool, zero_shot: bool, needs_text: bool,
                views: str | None, target_kind: str) -> str:
    """The shape a task declared before shapes existed, from its flags (a plugin's ``Task``
    subclass that sets ``feature_mode``, ``trains_head``... keeps working)."""
    if views is not None:
        return "keypoint_views" if views == "keypoints" else "views"
    if needs_text:
        return "text"
    if feature_mode == "dense":
        # a kind's own shape for dense features (boxes; pairs, pooled to a grid of vectors)
        own = get_target_kind(target_kind).dense_shape
        if own:
            return own
        return "dense" if trains_head and not zero_shot else "dense_zero_shot"
    return "pooled" if trains_head and not zero_shot else "zero_shot"
