"""``--language``: CLIP_benchmark's language of class names, templates and captions.

One language names two things that must agree: the language ``cb:`` data is built in (its
class names, zero-shot templates or captions, as CLIP_benchmark's ``build_dataset`` picks them
for ``language=``) and a zero-shot task's ``language`` parameter (the prompts' language, in its
result key and record). So:

- ``cb:NAME`` read with ``--language LANG`` is ``cb:NAME@LANG``; ``cb:NAME@X`` with another
  ``--language``, or with another ``-p language=``, is refused (neither wins);
- a task with a ``language`` parameter takes the flag's, else the ``cb:`` data's (``en``
  without ``@``), unless ``-p language=`` gives it;
- a language that reaches nothing (no ``cb:`` data, a task with no ``language``) is refused,
  rather than written into a record that no number depends on.

The language enters an identity only through what it changes: the ``cb:`` manifest (class
names, templates, captions and its ``source.language``), the texts the text tower embeds (their
stored outputs are keyed by the texts) and a zero-shot result's parameters. Image features are
keyed by image content, so another language reuses them without a forward pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError, field_ref
from ..tasks import Task

# ISO 639 codes as CLIP_benchmark writes them (en, fr, jp, cn), optionally with a region/script
_LANGUAGE = re.compile(r"[a-z]{2,3}([_-][A-Za-z0-9]{2,8})*")


def cb_language(source: Any) -> str | None:
    """The language ``cb:NAME[@LANG]`` data is read in (``en`` without ``@``); None for other
    data."""
    if not isinstance(source, str) or not source.startswith("cb:"):
        return None
    _, at, language = source.partition("@")
    return language if at and language else "en"


def applies(task: Task, *sources: Any) -> bool:
    """Whether a language reaches ``task`` on these data: its own ``language`` parameter, or
    ``cb:`` data among them."""
    return "language" in task.params or any(cb_language(s) is not None for s in sources)


def _in_language(source: Any, language: str) -> Any:
    """``cb:NAME`` read in ``language``; other data as it is.

    Raises:
        UsageError: ``cb:NAME@X`` names another language.
    """
    named = cb_language(source)
    if named is None:
        return source
    if "@" in source:
        if named != language:
            raise UsageError(f"{source} is read in {named!r} but {field_ref('language')} says "
                             f"{language!r}",
                             hint=f"give the language once: {source.partition('@')[0]} "
                                  f"{field_ref('language', language)}, or drop "
                                  f"{field_ref('language')}")
        return source
    return source if language == "en" else f"{source}@{language}"


def with_language(task: Task, params: Mapping[str, Any], data: Any, train_data: Any,
                  language: str | None) -> tuple[dict[str, Any], Any, Any]:
    """``(params, data, train_data)`` with ``language`` (``--language``; None: not given) applied.

    Raises:
        UsageError: a malformed code; a language that disagrees with ``cb:NAME@X`` or with
            ``-p language=``; a language given where it reaches nothing.
    """
    out = dict(params)
    if language is not None:
        if not isinstance(language, str) or not _LANGUAGE.fullmatch(language):
            raise UsageError(f"{field_ref('language', repr(language))} is not a language code",
                             hint="an ISO 639 code as CLIP_benchmark writes it: en, fr, jp, cn...")
        if not applies(task, data, train_data):
            raise UsageError(f"{field_ref('language', language)} reaches nothing: {task.name} "
                             "has no language "
                             "parameter and the data is not cb: data",
                             hint=f"drop {field_ref('language')} (it names the language of cb: "
                                  "data and of the "
                                  "zero-shot tasks' prompts)")
        data, train_data = _in_language(data, language), _in_language(train_data, language)
    if "language" not in task.params:
        return out, data, train_data
    stated = language or cb_language(data)
    given = out.get("language")
    if given is not None and stated is not None and given != stated:
        where = f"{field_ref('language', language)}" if language else f"{data}"
        raise UsageError(f"{field_ref('param:language', given)} and {where} disagree",
                         hint=f"give the language once: {field_ref('language')} (or "
                              "cb:NAME@LANG) or -p")
    if stated is not None:
        out["language"] = stated
    return out, data, train_data
