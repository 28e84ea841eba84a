"""JSON Schema validation of every JSON artifact, and of safetensors ``__metadata__``.

The schemas live in the repository's top-level ``schemas/`` folder; ``vbstore/_schemas`` links to
it so they ship inside the package. jsonschema is imported on the first write only, so reads
stay fast.

jsonschema walks a document in ~0.4 ms; a board pull validates 100k of them. A schema written
only in keywords that draft 7 and 2020-12 read alike is also compiled to Python by
fastjsonschema (~20 µs a document): a document it accepts is valid; one it refuses goes through
jsonschema, whose error names the field as always.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import SchemaError, UnknownKind

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "_schemas"


def schema_text(name: str) -> str:
    """The text of ``schemas/<name>.schema.json``."""
    path = SCHEMA_DIR / f"{name}.schema.json"
    if not path.is_file():
        raise UnknownKind(f"no schema for {name!r}", hint="reinstall vbstore")
    return path.read_text()


def has_schema(name: str) -> bool:
    return (SCHEMA_DIR / f"{name}.schema.json").is_file()


@cache
def _validator(name: str):
    # jsonschema (~70 ms at import): on the first write only, never on a cached read
    import jsonschema

    schema = json.loads(schema_text(name))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# keywords fastjsonschema (draft 7) reads as jsonschema (2020-12) does; a schema with any
# other keyword is left to jsonschema alone
_SHARED = {"type", "properties", "additionalProperties", "required", "pattern", "enum", "const",
           "items", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
           "exclusiveMaximum", "minItems", "maxItems", "uniqueItems", "minProperties",
           "maxProperties", "oneOf", "anyOf",
           "allOf", "not", "description", "title", "$id", "$schema", "$comment"}
_SUBSCHEMAS = ("additionalProperties", "items", "not")  # a keyword whose value is a schema


def _shared_keywords(schema: Any) -> bool:
    """Whether every keyword in ``schema`` (and its sub-schemas) is in :data:`_SHARED`."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or not set(schema) <= _SHARED:
        return False
    subschemas = [*(schema.get("properties") or {}).values(),
                  *(schema[k] for k in _SUBSCHEMAS if k in schema),
                  *(s for k in ("oneOf", "anyOf", "allOf") for s in schema.get(k, []))]
    return all(_shared_keywords(s) for s in subschemas)


@cache
def _fast(name: str):
    """A compiled fastjsonschema check of schema ``name``, or None (not installed, or the
    schema uses a keyword the two drafts might read differently)."""
    try:
        import fastjsonschema  # compiles on first use: a cached answer validates nothing
    except ImportError:
        return None
    schema = json.loads(schema_text(name))
    if not _shared_keywords(schema):
        return None
    return fastjsonschema.compile({k: v for k, v in schema.items() if k != "$schema"})


@cache
def _long_arrays(name: str) -> dict[str, Any]:
    from ._fastschema import long_arrays  # with jsonschema: the first write only

    return long_arrays(json.loads(schema_text(name)))


def _valid_quickly(name: str, document: Any) -> bool:
    """Whether ``document`` is valid, decided with each long array's items checked by their
    compiled function (:mod:`._fastschema`) and the rest by jsonschema; False means "ask
    jsonschema about the whole document"."""
    arrays = _long_arrays(name)
    if not arrays or not isinstance(document, dict):
        return False
    cut = dict(document)
    for key, check in arrays.items():
        items = document.get(key)
        if isinstance(items, list) and len(items) > 1:
            if not all(map(check, items)):
                return False
            cut[key] = items[:1]
    return len(cut) > 0 and any(cut[k] is not document[k] for k in arrays if k in cut) \
        and _validator(name).is_valid(cut)


def validate(name: str, document: Any) -> None:
    """Validate ``document`` against schema ``name``.

    Raises:
        SchemaError: naming the JSON path of the first offending field.
    """
    fast = _fast(name)  # the whole document compiled, where the schema allows
    if fast is not None:
        try:
            fast(document)
            return
        except Exception:  # noqa: S110 - refused or unreadable: jsonschema decides and says why
            pass
    if _valid_quickly(name, document):  # a long array's items compiled, the rest jsonschema
        return
    errors = sorted(_validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        field = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        ).lstrip(".")
        message = error.message if len(error.message) <= 300 else error.message[:240] + " …"
        raise SchemaError(name, field, message)
