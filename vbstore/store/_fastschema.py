"""A quick yes for the items of a document's long arrays (a manifest's samples), before jsonschema.

jsonschema walks every item of every array keyword by keyword (~0.3 ms per manifest sample, more
than decoding a small image). The item schemas of those arrays use a few keywords only, so each
compiles here into one Python function that says whether an item is valid. A document is valid
when every item of each such array passes its function and jsonschema accepts the rest of the
document (each such array cut to its first item); anything else -- an item the function
refuses, an item schema using a keyword not compiled here, an array schema with more than
``type`` and ``items`` -- goes to jsonschema whole, which then names the first error as before.
So this can only say yes sooner; ``tests/store/test_fastschema.py`` checks the functions agree
with jsonschema item by item.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# the keywords compiled below, and the ones that only annotate
_ANNOTATIONS = frozenset({"description", "title", "$comment", "examples"})
_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    # JSON Schema's integer: a number with no fraction (1.0 too), never a boolean
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}


def compile_schema(schema: Any) -> Check | None:
    """A function telling whether an instance is valid under ``schema``, or None when the
    schema uses anything not compiled here."""
    if not isinstance(schema, dict):
        return None
    checks: list[Check] = []
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        check = _keyword(key, value)
        if check is None:
            return None
        checks.append(check)

    def valid(instance: Any) -> bool:
        return all(check(instance) for check in checks)

    return valid


def _keyword(key: str, value: Any) -> Check | None:
    if key == "type":
        return _TYPES.get(value) if isinstance(value, str) else None
    if key == "minLength" and isinstance(value, int):
        return lambda v: not isinstance(v, str) or len(v) >= value
    if key == "pattern" and isinstance(value, str):
        search = re.compile(value).search
        return lambda v: not isinstance(v, str) or search(v) is not None
    if key == "minimum" and _TYPES["number"](value):
        return lambda v: not _TYPES["number"](v) or v >= value
    if key == "minItems" and isinstance(value, int):
        return lambda v: not isinstance(v, list) or len(v) >= value
    if key == "uniqueItems" and value is False:
        return lambda v: True
    if key == "uniqueItems" and value is True:
        # only for items that are all integers (what the compiled schemas hold); anything
        # else is not decided here
        return lambda v: not isinstance(v, list) or (
            all(_TYPES["integer"](x) for x in v) and len(set(v)) == len(v))
    if key == "items":
        item = compile_schema(value)
        if item is None:
            return None
        return lambda v: not isinstance(v, list) or all(item(x) for x in v)
    if key == "required" and isinstance(value, list):
        names = tuple(value)
        return lambda v: not isinstance(v, dict) or all(n in v for n in names)
    if key == "dependentRequired" and isinstance(value, dict):
        pairs = tuple((k, tuple(d)) for k, d in value.items())
        return lambda v: not isinstance(v, dict) or all(
            k not in v or all(n in v for n in deps) for k, deps in pairs)
    if key == "properties" and isinstance(value, dict):
        compiled = {name: compile_schema(sub) for name, sub in value.items()}
        if any(c is None for c in compiled.values()):
            return None
        checks = tuple(compiled.items())
        return lambda v: not isinstance(v, dict) or all(
            name not in v or check(v[name]) for name, check in checks)  # type: ignore[misc]
    return None


def long_arrays(schema: dict[str, Any]) -> dict[str, Check]:
    """The top-level properties of ``schema`` that are arrays checked item by item, each with
    its compiled item check: those whose schema says only ``type: array`` and ``items``, and
    that nothing else in the schema names (a condition on them is jsonschema's to check)."""
    import json  # with the schema text: the first write only

    out = {}
    properties = schema.get("properties") or {}
    for name, sub in properties.items():
        if not isinstance(sub, dict) or sub.get("type") != "array":
            continue
        if set(sub) - _ANNOTATIONS - {"type", "items"}:
            continue  # minItems, uniqueItems...: decided on the whole array, by jsonschema
        rest = {**schema, "required": None,
                "properties": {k: v for k, v in properties.items() if k != name}}
        if json.dumps(name) in json.dumps(rest):
            continue
        check = compile_schema(sub.get("items"))
        if check is not None:
            out[name] = check
    return out
