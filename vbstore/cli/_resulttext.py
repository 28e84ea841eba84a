"""A result as ``get result`` prints it, from its record.

One function serves the command and the answer cache (:mod:`._answers`), which prints a stored
result without importing click or the record types (it reads the stored document through
:class:`StoredResult`, attribute by attribute as the record reads), so this module imports
nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False  # see vbstore/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from ..records import ResultRecord

# vbstore.records.result.RENAMED_METRICS, repeated so this module imports nothing (a test keeps
# the two equal): a record stored under a metric's old name prints under its current one.
RENAMED_METRICS = {"retrieval": {"mean_average_precision": "mAP"}}


class StoredResult:
    """A stored result document read as its record reads (:class:`vbstore.records.ResultRecord`):
    each field an attribute, None when absent, and the metrics (``metrics``, ``aggregate``,
    ``sample_ci``, the baseline's ``headline``) under their current names. The cached answer's
    printer reads a stored document through it without importing the record types."""

    __slots__ = ("_doc",)

    def __init__(self, doc: Mapping[str, Any]):
        names = RENAMED_METRICS.get(doc["task"], {})
        if names.keys() & set(doc["metrics"]):
            doc = {**doc, **{field: {names.get(k, k): v for k, v in doc[field].items()}
                             for field in ("metrics", "aggregate", "sample_ci")
                             if isinstance(doc.get(field), dict)}}
            baseline = doc.get("baseline")
            if isinstance(baseline, dict) and baseline.get("headline") is not None:
                doc["baseline"] = {**baseline,
                                   "headline": names.get(baseline["headline"],
                                                         baseline["headline"])}
        self._doc = doc

    def __getattr__(self, name: str) -> Any:
        return self._doc.get(name)

    @property
    def spec(self) -> str:
        """The backbone as the user named it."""
        return (self._doc.get("backbone") or {}).get("spec", "")


def result_lines(result: ResultRecord | Mapping[str, Any], oid: str, origin: str, seconds: float,
                 metric_order: Sequence[str], *, from_cache: bool = True,
                 reused_features: bool = False,
                 reproduced: Mapping[str, Any] | None = None) -> list[tuple[bool, str]]:
    """The lines of a result's text form, each with whether it goes to stderr (warnings).

    Args:
        result: The result's record (:class:`vbstore.records.ResultRecord`), or its document
            as stored (read through :class:`StoredResult`).
        oid: Its id. ``origin``: where it came from, in words; ``seconds``: how long it took.
        metric_order: The task's metric names in the order it declares them (records store
            them sorted); metrics it does not name follow by name.
        reused_features: This computation ran no forward pass (its run's
            ``features_from_cache``, from the registry's run log).
    """
    r: Any = StoredResult(result) if isinstance(result, dict) else result
    rank = {name: i for i, name in enumerate(metric_order)}
    metrics = sorted(r.metrics.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
    out = [(False, f"{r.task} on {r.spec} ({r.weights_kind} weights): "
                   f"{origin} in {seconds:.2f} s  [{oid[:12]}]")]
    if not from_cache and reused_features:
        out.append((False, "  reused stored features (no forward pass)"))
    tuned = r.finetune
    if tuned:  # another measurement than a frozen probe's: said before any number
        out.append((False, f"  fine-tuned: the last {tuned['blocks']} blocks trained with the "
                           f"head (backbone_lr {tuned['backbone_lr']:g}); not comparable with "
                           "frozen probes"))
    aggregate, sample, baseline = r.aggregate or {}, r.sample_ci or {}, r.baseline or {}
    for name, value in metrics:
        if name in aggregate:
            a = aggregate[name]
            out.append((False, f"  {name:<28} {a['mean']:.4f} ± {a['std']:.4f}  over {a['n']} "
                               f"seeds (95% t-interval {a['ci_low']:.4f}–{a['ci_high']:.4f})"))  # noqa: RUF001 - a range's en dash
        else:
            out.append((False, f"  {name:<28} {number(value)}"))
        if name in sample:
            b = sample[name]
            out.append((False, f"  {'':<28} 95% CI over eval samples "
                               f"{b['ci_low']:.4f}–{b['ci_high']:.4f}"  # noqa: RUF001 - a range's en dash
                               f"  (bootstrap, {b['n_boot']} draws)"))
        if name == baseline.get("headline"):
            out.append((False, f"  {'':<28} baseline {baseline['value']:.4f} "
                               f"({baseline['predictor']}), margin {baseline['margin']:+.4f}"))
    if baseline.get("skipped"):
        out.append((False, f"  {baseline['skipped']}"))
    if r.sample_ci_skipped:
        out.append((False, f"  no CI over eval samples: {r.sample_ci_skipped}"))
    for name, value in (r.train_metrics or {}).items():
        a = (r.train_aggregate or {}).get(name)
        if a:
            out.append((False, f"  {name:<28} {a['mean']:.4f} ± {a['std']:.4f}  over {a['n']} "
                               "seeds (train)"))
        else:
            out.append((False, f"  {name:<28} {value:.4f}  (train)"))
    out.extend((True, f"  warning: {warning}") for warning in r.warnings or [])
    if r.comparable is False:
        out.append((True, "  warning: a mismatched head was applied; comparable with nothing"))
    if reproduced is not None:
        out.append((False, "  reproduced the stored numbers (max abs diff "
                           f"{reproduced['max_abs_diff']:.3g})"))
    return out


def number(value: float) -> str:
    """A metric as printed: a count (a whole number of 2 or more: ``classes_scored``,
    ``num_matches``) as an integer, anything else to 4 decimals."""
    if isinstance(value, int) or (float(value).is_integer() and abs(value) >= 2):
        return str(int(value))
    return f"{value:.4f}"
