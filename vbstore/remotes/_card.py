"""The model card (``README.md``) of a head pushed to the Hub.

The YAML front matter is written as JSON-style flow values, which YAML reads as they are, so
no YAML library is needed and no value can break out of its line. The Hub reads
``library_name`` and ``tags`` for search; ``backbone``, ``task`` and ``metrics`` let a reader (or
``vbstore pull``) see what the head is compatible with before downloading it. Nothing from the
environment goes in, and a value that contains a credential is refused.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from ._errors import SECRET_ENV

# Shown in the body's compatibility table, in this order, when present.
_COMPAT = ("backbone", "extractor", "pooling", "layers", "feature_mode", "embed_dim", "task",
           "train_manifest", "classes")
_MAX_CELL = 120


def _flow(value: Any) -> str:
    """One YAML flow value. Floats always carry a '.', so YAML 1.1 readers see a number too."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UsageError(f"{value!r} cannot go into a model card", hint="report finite metrics")
        text = repr(value)
        return text.replace("e", ".0e", 1) if "e" in text and "." not in text else text
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _refuse_secrets(value: Any) -> None:
    secrets = [v for v in (os.environ.get(n) for n in SECRET_ENV) if v and len(v) >= 4]
    text = json.dumps(value, default=str)
    if any(secret in text for secret in secrets):
        raise UsageError("the head metadata contains a credential from the environment",
                         hint="remove it from the metadata; credentials never go into a card")


def _cell(value: Any) -> str:
    if isinstance(value, (list, tuple)) and len(value) > 8:
        text = f"{len(value)} items: " + ", ".join(map(str, value[:5])) + ", ..."
    elif isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, sort_keys=True, default=str)
    else:
        text = str(value)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 3] + "..."


def _name(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("name") or value.get("id") or value.get("architecture") or "")
    return "" if value is None else str(value)


def write_model_card(head_metadata: Mapping[str, Any]) -> str:
    """The ``README.md`` text for a pushed head, from its compatibility record.

    Known keys: ``name``, ``id``, ``backbone``, ``extractor``, ``pooling``, ``layers``,
    ``feature_mode``, ``embed_dim``, ``task``, ``classes``, ``train_manifest``, ``metrics``
    (name → number), ``tags`` (extra Hub tags), ``remote_ref`` (what to pull). Others appear
    in the body's table.

    ```python
    card = write_model_card({"name": "linear-in1k", "backbone": "timm:vit_small", "task": "linear",
                             "metrics": {"top1": 0.81}})
    ```

    Raises:
        UsageError: a value holds a credential, or a metric is not finite.
    """
    meta = dict(head_metadata)
    _refuse_secrets(meta)
    metrics = {str(k): v for k, v in (meta.get("metrics") or {}).items()}
    task, backbone = _name(meta.get("task")), _name(meta.get("backbone"))
    tags = ["vbstore", "probe-head", *([task] if task else []),
            *(str(t) for t in meta.get("tags", []))]
    front = {"library_name": "vbstore", "tags": list(dict.fromkeys(tags)),
             "backbone": backbone or None, "task": task or None, "metrics": metrics}
    lines = ["---"] + [f"{key}: {_flow(value)}" for key, value in front.items()] + ["---", ""]
    title = str(meta.get("name") or "vbstore probe head")
    lines += [f"# {_cell(title)}", "",
              f"A {task or 'probe'} head trained by vbstore "
              f"on frozen features of `{_cell(backbone or 'a vision backbone')}`.", ""]
    if metrics:
        lines += ["## Metrics", "", "| metric | value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in sorted(metrics.items())] + [""]
    rows = [(k, meta[k]) for k in _COMPAT if meta.get(k) is not None]
    shown = (*_COMPAT, "metrics", "tags", "name", "remote_ref")
    rows += sorted((k, v) for k, v in meta.items() if k not in shown and v is not None)
    if rows:
        lines += ["## Compatibility", "", "A head only fits features made exactly like these:", "",
                  "| field | value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in rows] + [""]
    lines += ["## Use", "",
              "The weights are `model.safetensors` (never pickle); `vbstore.json` holds "
              "the compatibility record. Every blob under `objects/` is named by its BLAKE3 hash "
              "and re-hashed by `vbstore pull` before use.", ""]
    if meta.get("remote_ref"):
        lines += ["```", f"vbstore pull {meta['remote_ref']}", "```", ""]
    return "\n".join(lines)
