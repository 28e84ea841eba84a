"""The keyword arguments of the engine's entry points, as frozen types made from one table.

``vbstore.get_result(backbone, task, data, train_data, **options)`` reads ``options`` into a
:class:`ResultOptions` (what is asked: every field is part of the question) and a
:class:`RunOptions` (how it runs: no id depends on it). Each field's default, flag and help are
its row of :data:`vbstore._fields.FIELDS`, the table the CLI makes its flags from, so the two
front ends cannot drift apart; a keyword no field names is refused as Python refuses one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from .._fields import opt
from ..errors import UsageError, field_ref


class _Ranged:
    """Options whose numbers are held to their rows' ranges, as the CLI's flags are (a click
    range): ``batch_size=0`` is refused naming ``batch_size=``, not a crash deep in a run."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            row = f.metadata.get("row")
            value = getattr(self, f.name)
            if row is None or value is None or (row.minimum is None and row.maximum is None):
                continue
            number = "an integer" if row.kind is int else "a number"
            kinds = (int,) if row.kind is int else (int, float)
            low = "" if row.minimum is None else f" {'>' if row.min_open else '>='} {row.minimum}"
            high = "" if row.maximum is None else f" <= {row.maximum}"
            if (isinstance(value, bool) or not isinstance(value, kinds)
                    or (row.minimum is not None and (value < row.minimum or (
                        row.min_open and value == row.minimum)))
                    or (row.maximum is not None and value > row.maximum)):
                raise UsageError(f"{field_ref(row.name)} must be {number}"
                                 f"{low}{' and' if low and high else ''}{high}, not {value!r}")


@dataclass(frozen=True)
class RunOptions(_Ranged):
    """How a request is computed (where, with what progress and batch): no id depends on it.

    Attributes:
        store: The store (None: the default store).
        device: ``cpu``, ``cuda``, ``cuda:1``... (None: cuda if available).
        progress: Progress on stderr (True), none (False), or a callback.
        recompute: Compute the result afresh and compare it with the stored one.
        executor: Where missing features are extracted (a ``RayExecutor``; None: here).
        batch_size: Images per forward pass of the extraction.
    """

    # opt is a dataclasses.field carrying the table's row (RUF009 cannot see it)
    store: Any = opt("store")  # noqa: RUF009
    device: str | None = opt("device")
    progress: bool | Callable[..., Any] = opt("progress")  # noqa: RUF009
    recompute: bool = opt("recompute")
    executor: Any = opt("executor")  # noqa: RUF009
    batch_size: int = opt("batch_size")

    def keywords(self, *, recompute: bool = True) -> dict[str, Any]:
        """These options as :func:`vbstore.engine.get` takes them (without ``recompute``
        where the caller computes nothing afresh)."""
        out = {"store": self.store, "device": self.device, "progress": self.progress,
               "executor": self.executor, "batch_size": self.batch_size}
        return {**out, "recompute": self.recompute} if recompute else out


@dataclass(frozen=True)
class BackboneOptions(_Ranged):
    """How the backbone is built and seen (``BackboneRequest``'s settings)."""

    weights: str = opt("weights")
    backbone_seed: int | None = opt("backbone_seed")
    input_size: int | None = opt("input_size")
    layers: Sequence[int] | None = opt("layers")
    precision: str = opt("precision")
    pooling: str | None = opt("pooling")


@dataclass(frozen=True)
class HeadOptions(BackboneOptions):
    """What a head is trained on and how (``get_head``'s keywords beside the run's)."""

    params: Mapping[str, Any] | None = opt("params")
    train_split: str | None = opt("train_split")
    train_limit: int | None = opt("train_limit")
    seed: int = opt("seed")
    data_options: Mapping[str, Any] | None = opt("data_options")
    finetune_blocks: int = opt("finetune_blocks")
    backbone_lr: float | None = opt("backbone_lr")


@dataclass(frozen=True)
class ResultOptions(HeadOptions):
    """What a result asks beyond backbone, task and data (``get_result``'s keywords beside the
    run's); see :func:`vbstore.engine.get_result` for each."""

    split: str | None = opt("split")
    limit: int | None = opt("limit")
    seeds: int = opt("seeds")
    head: str | None = opt("head")
    strict: bool = opt("strict")
    notes: str | None = opt("notes")
    language: str | None = opt("language")
    val_split: str | None = opt("val_split")


@dataclass(frozen=True)
class FeatureOptions(_Ranged):
    """What a feature set is extracted with (``get_features``' keywords beside the run's).

    ``seed`` is the backbone's init seed with ``weights="random"`` (``backbone_seed`` elsewhere).
    """

    split: str | None = opt("split")
    limit: int | None = opt("limit")
    layers: Sequence[int] = (-1,)
    pooling: str | None = opt("pooling")
    mode: str = opt("mode")
    precision: str = opt("precision")
    dense_dtype: str = opt("dense_dtype")
    weights: str = opt("weights")
    seed: int | None = opt("backbone_seed")
    input_size: int | None = opt("input_size")
    use_projection: bool = opt("use_projection")
    workers: int = opt("workers")
    data_options: Mapping[str, Any] | None = opt("data_options")
    loader: str = opt("loader")


@dataclass(frozen=True)
class SweepOptions(_Ranged):
    """What every combination of a sweep asks beyond backbone, task and data."""

    params: Mapping[str, Any] | None = opt("params")
    split: str | None = opt("split")
    train_split: str | None = opt("train_split")
    limit: int | None = opt("limit")
    train_limit: int | None = opt("train_limit")
    seed: int = opt("seed")
    data_options: Mapping[str, Any] | None = opt("data_options")
    language: str | None = opt("language")
    pooling: str | None = opt("pooling")
