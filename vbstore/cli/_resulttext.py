"""A result as ``get result`` prints it, from the stored record document.

One function serves the command and the answer cache (:mod:`._answers`), which prints a stored
result without importing click or the record types, so this module imports nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False  # see vbstore/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

# vbstore.records.result.RENAMED_METRICS, repeated so this module imports nothing (a test keeps
# the two equal): a record stored under a metric's old name prints under its current one.
RENAMED_METRICS = {"retrieval": {"mean_average_precision": "mAP"}}


def result_lines(doc: Mapping[str, Any], oid: str, origin: str, seconds: float,
                 metric_order: Sequence[str], *, from_cache: bool = True,
                 reused_features: bool = False,
                 reproduced: Mapping[str, Any] | None = None) -> list[tuple[bool, str]]:
    """The lines of a result's text form, each with whether it goes to stderr (warnings).

    Args:
        doc: The result record, as stored.
        oid: Its id. ``origin``: where it came from, in words; ``seconds``: how long it took.
        metric_order: The task's metric names in the order it declares them (records store
            them sorted); metrics it does not name follow by name.
        reused_features: This computation ran no forward pass (its run's
            ``features_from_cache``, from the registry's run log).
    """
    rank = {name: i for i, name in enumerate(metric_order)}
    renamed = RENAMED_METRICS.get(doc["task"], {})
    if renamed.keys() & set(doc["metrics"]):
        from_old = {new: old for old, new in renamed.items()}  # the document's names, read
        doc = {**doc, "metrics": {renamed.get(k, k): v for k, v in doc["metrics"].items()}}
    else:
        from_old = {}
    metrics = sorted(doc["metrics"].items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
    spec = (doc.get("backbone") or {}).get("spec", "")
    out = [(False, f"{doc['task']} on {spec} ({doc.get('weights_kind')} weights): "
                   f"{origin} in {seconds:.2f} s  [{oid[:12]}]")]
    if not from_cache and reused_features:
        out.append((False, "  reused stored features (no forward pass)"))
    tuned = doc.get("finetune")
    if tuned:  # another measurement than a frozen probe's: said before any number
        out.append((False, f"  fine-tuned: the last {tuned['blocks']} blocks trained with the "
                           f"head (backbone_lr {tuned['backbone_lr']:g}); not comparable with "
                           "frozen probes"))
    aggregate, sample = doc.get("aggregate") or {}, doc.get("sample_ci") or {}
    baseline = doc.get("baseline") or {}
    for name, value in metrics:
        stored = from_old.get(name, name)
        if stored in aggregate:
            a = aggregate[stored]
            out.append((False, f"  {name:<28} {a['mean']:.4f} ± {a['std']:.4f}  over {a['n']} "
                               f"seeds (95% t-interval {a['ci_low']:.4f}–{a['ci_high']:.4f})"))  # noqa: RUF001 - a range's en dash
        else:
            out.append((False, f"  {name:<28} {number(value)}"))
        if stored in sample:
            b = sample[stored]
            out.append((False, f"  {'':<28} 95% CI over eval samples "
                               f"{b['ci_low']:.4f}–{b['ci_high']:.4f}"  # noqa: RUF001 - a range's en dash
                               f"  (bootstrap, {b['n_boot']} draws)"))
        if stored == baseline.get("headline"):
            out.append((False, f"  {'':<28} baseline {baseline['value']:.4f} "
                               f"({baseline['predictor']}), margin {baseline['margin']:+.4f}"))
    if baseline.get("skipped"):
        out.append((False, f"  {baseline['skipped']}"))
    if doc.get("sample_ci_skipped"):
        out.append((False, f"  no CI over eval samples: {doc['sample_ci_skipped']}"))
    for name, value in (doc.get("train_metrics") or {}).items():
        a = (doc.get("train_aggregate") or {}).get(name)
        if a:
            out.append((False, f"  {name:<28} {a['mean']:.4f} ± {a['std']:.4f}  over {a['n']} "
                               "seeds (train)"))
        else:
            out.append((False, f"  {name:<28} {value:.4f}  (train)"))
    out.extend((True, f"  warning: {warning}") for warning in doc.get("warnings") or [])
    if doc.get("comparable") is False:
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
