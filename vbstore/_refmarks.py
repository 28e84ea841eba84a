"""How a message refers to a request field: REF_OPEN, the field's name (and ``=VALUE``),
REF_CLOSE. A leaf, so that :mod:`vbstore.errors` (which writes such references) and
:mod:`vbstore._fields` (the table that spells them as flags or keywords) share it without
importing each other."""

REF_OPEN, REF_CLOSE = "\x1e", "\x1f"


def ref(name: str, value: object = None) -> str:
    """A reference to request field ``name`` (with ``value`` when the message names one),
    unchecked: ``vbstore._fields.field_ref`` checks the name against the table first."""
    return f"{REF_OPEN}{name}{'' if value is None else f'={value}'}{REF_CLOSE}"
