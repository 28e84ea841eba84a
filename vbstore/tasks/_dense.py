"""What every dense probe shares: its schedule parameters, its head choice, and the two hooks.

A dense task maps the patch-feature grid to a per-pixel target. The recipe (one implementation,
:mod:`._dense_train`) is probe3d's (El Banani et al., 2024):

- head ``linear``: a 1x1 convolution on the patch grid of the last requested layer, its
  prediction upsampled (bilinear) to the target size, so no interpolated feature enters the
  linear map; head ``dpt``: a light DPT-style head that fuses every requested layer (needs two
  or more ``--layers``), ``hidden_dim`` 512 wide by default (VisBench's; 256 before);
- AdamW (``lr`` 5e-4, ``weight_decay`` 1e-4), ``batch_size`` 8, ``epochs`` 10, the learning
  rate warmed up linearly over ``warmup_epochs`` (1.5) then decayed on a cosine to 0;
- features and targets streamed from the split batch by batch: memory does not grow with the
  dataset; metrics are accumulated over the split (a confusion matrix, running sums, per-image
  correlations);
- the head's initial weights and the order of batches come from the run's seed only (a local
  generator; the global RNG is left as it was), so a run is repeatable on CPU.

A subclass declares its metrics and ``protocol`` (the string the record carries) and five
hooks (``_outputs``, ``_prepare``, ``_predict``, ``_loss``, ``_scorer``) that the recipe
calls. torch is imported only inside those calls.

Every dense task also has a trivial predictor (``trivial`` names it: the majority class, the
mean depth, the mean normal, the zero map...), one constant prediction taken from a split's
own targets: :meth:`DenseTask.baseline_split` scores it with the task's scorer, so a probe's
number can be read against what a constant would get on the same split.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UsageError
from ._base import HeadState, Metric, Param, Task
from ._errors import TaskInputError
from ._shape_split import SplitTask

if TYPE_CHECKING:
    import torch

    from ._split import DenseSplit

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.

# probe3d's schedule: each a task parameter, so a run that changes one has another key.
DENSE_PARAMS = MappingProxyType(
    {
        "epochs": Param(10, "passes over the train split", minimum=1),
        "lr": Param(5e-4, "peak AdamW learning rate", above=0.0),
        "weight_decay": Param(1e-4, "decoupled AdamW weight decay", minimum=0.0),
        "batch_size": Param(8, "images per step", minimum=1),
        "warmup_epochs": Param(1.5, "linear warm-up length in epochs, then cosine decay to 0",
                               minimum=0.0),
        "head": Param("linear", "linear: 1x1 conv on the last layer's grid; dpt: fuses several "
                      "--layers", choices=("linear", "dpt")),
        # VisBench's (probe3d's) DPT width; 256 before, which -p hidden_dim=256 still asks for
        "hidden_dim": Param(512, "width of the dpt head (unused by linear)", minimum=1),
    }
)


def dense_params(**extra: Param) -> Mapping[str, Param]:
    """The shared schedule plus a task's own parameters."""
    return MappingProxyType({**DENSE_PARAMS, **extra})


class DenseTask(SplitTask, ABC):
    """Base of the trained dense probes: the shared recipe calls the hooks below.

    Attributes:
        protocol: The protocol the task follows, carried in every record (``probe3d``...).
    """

    shape = "dense"
    stochastic = True
    protocol: ClassVar[str] = ""
    trivial: ClassVar[str] = "the zero map"
    train_metrics = (
        Metric("train_loss", "lower",
               "mean training loss over the last epoch; high = not converged"),
    )

    @property
    def finetunes(self) -> bool:
        """Every trained dense and box probe fine-tunes: the shared recipe trains the blocks a
        split's features come through (``DenseSplit.trainable``) with the head."""
        return self.shape_spec.finetune

    def _fit_split(
        self, train: DenseSplit, params: dict[str, Any], seed: int, class_names: list[str] | None
    ) -> tuple[HeadState, dict[str, float]]:
        from . import _dense_train

        return _dense_train.fit(self, train, params, seed)

    def _evaluate_split(
        self, head: HeadState | None, split: DenseSplit, params: dict[str, Any]
    ) -> dict[str, float]:
        from . import _dense_train

        assert head is not None  # a dense task trains a head, so evaluate always passes one
        return _dense_train.evaluate(self, head, split, params)

    def check_map_grid(self, result: str) -> None:
        """Refuse to draw ``result``'s predictions as a grid of maps when they are not maps.

        Raises:
            UsageError: the task predicts something else (boxes).
        """

    def predict_split(self, head_state: HeadState, split: DenseSplit,
                      params: Mapping[str, Any] | None = None, limit: int | None = None
                      ) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
        """The head's predictions on the first ``limit`` rows of ``split`` (all when None):
        (row, prepared target, prediction at the target size) each, as the scorer sees them.

        Raises:
            UsageError: a bad param or limit.
            TaskInputError: a split or head that does not fit.
        """
        from . import _checks, _dense_train

        self._check_split(split, "eval", trained=True)
        params = self.resolve_params(params)
        if limit is not None and limit < 1:
            raise UsageError(f"limit must be at least 1, got {limit}")
        rows = len(split) if limit is None else min(limit, len(split))
        out: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        for index, target, pred in _dense_train.predictions(
                self, _checks.head_in(head_state), split, params, min(rows, 64)):
            out.extend(zip(index.tolist(), target, pred, strict=True))
            if len(out) >= rows:
                break
        return out[:rows]

    def baseline_split(self, split: DenseSplit, params: Mapping[str, Any] | None = None
                       ) -> dict[str, float]:
        """The metrics of the task's trivial predictor (:attr:`trivial`) on ``split``.

        One pass over the split's prepared targets collects the constant (class counts, a mean
        depth, a mean normal...); a second scores it with the task's own scorer, exactly as a
        head's prediction would be scored. No head, no seed: the same split gives the same
        numbers. A constant map has no correlation with a varying one: it scores 0.

        Raises:
            UsageError: a bad param.
            TaskInputError: a split whose targets are not the task's ``target_kind``.
            UndefinedMetric: a metric the split cannot define (every pixel invalid...).
        """
        from . import _checks, _dense_train

        self._check_split(split, "eval", trained=True)
        params = self.resolve_params(params)
        _dense_train.check_budget(self, params, split, self._outputs(params), training=False)
        total = None
        for batch in split.batches(params["batch_size"]):
            part = self._trivial_sum(self.prepare_batch(split, batch, params, "eval"), params)
            if part is not None:
                total = part if total is None else total + part
        scorer = self._scorer(params)
        for batch in split.batches(params["batch_size"]):
            target = self.prepare_batch(split, batch, params, "eval")
            scorer.update(self._trivial_predict(total, target, params), target)
        return _checks.metrics_out(self, scorer.result(), self.metrics_for(params))

    def prepare_batch(self, split: Any, batch: Any, params: dict[str, Any], role: str
                      ) -> torch.Tensor:
        """``_prepare`` on one batch of ``split``; a batch it refuses is searched for the first
        row at fault, and the error names that row's file (a split's ``target_source``, else its
        ``name``), so a label of 9 among 4 classes says which PNG holds it.

        Raises:
            TaskInputError: a target the task cannot score, naming its file when known.
        """
        try:
            return self._prepare(batch.target, params, role)
        except TaskInputError as err:
            where = getattr(split, "target_source", None) or getattr(split, "name", None)
            if where is None:
                raise
            for i, position in enumerate(batch.index.tolist()):
                try:
                    self._prepare(batch.target[i:i + 1], params, role)
                except TaskInputError:
                    raise TaskInputError(f"{err.args[0]} (in {where(position)})",
                                         hint=err.hint) from err
            raise

    # The hooks. Each runs inside a fit or evaluate call, so it may import torch.

    @abstractmethod
    def _outputs(self, params: dict[str, Any]) -> int:
        """Output channels of the head."""

    def _init_head(self, output: torch.nn.Conv2d, params: dict[str, Any]) -> None:
        """Set the starting values of the head's output layer before training (default: as
        built, bias 0)."""

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        """Check one batch of targets and bring it to the form the loss and metrics read.

        Raises:
            TaskInputError: a value the task cannot score (naming it and the fix).
        """
        return target

    def _predict(self, raw: torch.Tensor, size: tuple[int, int], params: dict[str, Any]
                 ) -> torch.Tensor:
        """The head's grid output -> the prediction at the target size (bilinear by default)."""
        from ._dense_ops import upsample

        return upsample(raw, size)

    @abstractmethod
    def _loss(self, pred: torch.Tensor, target: torch.Tensor, params: dict[str, Any]
              ) -> torch.Tensor | None:
        """The batch loss, or None when the batch has no pixel to learn from."""

    @abstractmethod
    def _scorer(self, params: dict[str, Any]) -> Any:
        """A fresh metric accumulator (``update(pred, target)``, ``result()``)."""

    def _scorer_bytes(self, params: dict[str, Any]) -> int:
        """About the most memory :meth:`_scorer`'s accumulator takes (the budget check reads
        it before anything is built; default: a few numbers)."""
        return 0

    def _trivial_sum(self, target: torch.Tensor, params: dict[str, Any]) -> torch.Tensor | None:
        """What one batch of prepared targets adds to the trivial predictor's statistic
        (summed over batches; None: the predictor needs none)."""
        return None

    def _trivial_predict(self, total: torch.Tensor | None, target: torch.Tensor,
                         params: dict[str, Any]) -> torch.Tensor:
        """The trivial prediction for one batch, in the form ``_predict`` returns (default:
        the zero map)."""
        import torch

        return torch.zeros_like(target, dtype=torch.float32)

    def _no_signal(self, target: torch.Tensor, params: dict[str, Any]) -> str | None:
        """Why a prepared train batch teaches nothing the task scores (None: it does).

        When every train batch says so, training is refused with that reason rather than
        producing a probe that learned a constant.
        """
        return None


def as_dense(task: Task, result: str) -> DenseTask:
    """``task`` (the task of ``result``) as a trained dense probe: its trivial predictor, its
    predictions per pixel.

    Raises:
        UsageError: ``task`` is not a trained dense probe.
    """
    if not isinstance(task, DenseTask):
        raise UsageError(f"result {result} is a {task.name} result, not a dense probe's",
                         hint="dense tasks: vbstore list tasks (feature mode dense)")
    return task
