"""Prompts of the zero-shot CLIP tasks: language, template sets and class names, torch-free.

CLIP_benchmark's conventions: a template is a string with a ``{c}`` placeholder for the class
name; ``--language`` names the language of the prompts and class names (``en``, ``fr``, ``jp``,
``cn``...); custom templates and class names come from files. Here a file is one entry per line
(blank lines skipped) or a JSON list of strings; a CLIP_benchmark JSON object keyed by dataset
name is read when it holds exactly one dataset. The engine stores a file's entries and passes
them in ``context["files"]`` (see :class:`FileParam`), so results follow the content.

Built-in templates exist for English only; any other language needs a templates file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..errors import UsageError
from . import _classifiers
from ._base import FileParam, Param
from ._shape_zero_shot import TextTask

# The seven-prompt ImageNet ensemble published with CLIP (verbatim, "a origami" included: the
# text is part of the protocol) and the single "photo" prompt.
TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {
        "ensemble": (
            "itap of a {c}.",
            "a bad photo of the {c}.",
            "a origami {c}.",
            "a photo of the large {c}.",
            "a {c} in a video game.",
            "art of the {c}.",
            "a photo of the small {c}.",
        ),
        "photo": ("a photo of a {c}.",),
    },
}
BUILTIN_SETS = tuple(sorted({name for sets in TEMPLATES.values() for name in sets}))
# ISO 639 codes as CLIP_benchmark writes them (en, fr, jp, cn), optionally with a region/script.
_LANGUAGE = re.compile(r"[a-z]{2,3}([_-][A-Za-z0-9]{2,8})*")


def read_entries(text: str, what: str) -> list[str]:
    """The entries of a file's text: a JSON list (or one-dataset object) or one per line.

    Raises:
        UsageError: no entry, or JSON that is not a list of strings.
    """
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            value: Any = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise UsageError(f"the {what} file is not valid JSON ({exc.msg}, line {exc.lineno})",
                             hint="write a JSON list of strings, or one entry per line") from None
        except RecursionError:
            raise UsageError(f"the {what} file is JSON nested too deeply",
                             hint="write a JSON list of strings, or one entry per line") from None
        if isinstance(value, dict):
            if len(value) != 1:
                raise UsageError(f"the {what} file maps {len(value)} datasets; vbstore reads one",
                                 hint="keep only the evaluated dataset's list in the file")
            value = next(iter(value.values()))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"the {what} file must hold a JSON list of strings",
                             hint="e.g. [\"a photo of a {c}.\"], or one entry per line")
        entries = [v.strip() for v in value if v.strip()]
    else:
        entries = [line.strip() for line in text.splitlines() if line.strip()]
    if not entries:
        raise UsageError(f"the {what} file is empty", hint="write one entry per line")
    return entries


def read_templates(text: str) -> list[str]:
    """Templates from a file's text, each checked to hold ``{c}`` and no other placeholder.

    Raises:
        UsageError: an empty file, or a template without ``{c}`` or with another placeholder.
    """
    templates = read_entries(text, "templates")
    for i, template in enumerate(templates, 1):
        try:
            filled = template.format(c="\0")
        except (KeyError, IndexError, ValueError):
            raise UsageError(f"template {i} {template!r} has a placeholder other than {{c}}",
                             hint="write literal braces as {{ and }}") from None
        if "\0" not in filled:
            raise UsageError(f"template {i} {template!r} has no {{c}} placeholder",
                             hint="mark where the class name goes, e.g. 'a photo of a {c}.'")
    return templates


def read_classnames(text: str) -> list[str]:
    """Class names from a file's text, one per class in the data's class order.

    Raises:
        UsageError: an empty file or a name given twice.
    """
    names = read_entries(text, "classnames")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"the classnames file names {name!r} twice",
                             hint="one distinct name per class, in the data's class order")
        seen.add(name)
    return names


# the templates the data names itself (a cb: source's, CLIP_benchmark's for that dataset)
DATASET_TEMPLATES = "dataset"

LANGUAGE_PARAM = Param("en", "language of the prompts and class names (CLIP_benchmark's "
                             "--language: en, fr, jp...); non-English needs --templates FILE")
PROMPT_PARAMS: Mapping[str, Param] = MappingProxyType({
    "language": LANGUAGE_PARAM,
    "templates": Param("ensemble", "prompt templates: a built-in set (" + ", ".join(BUILTIN_SETS)
                       + ") or a file of templates with {c}, one per line or a JSON list",
                       file=FileParam(read_templates, (*BUILTIN_SETS, DATASET_TEMPLATES))),
    "classnames": Param("", "a file of class names, one per class in the data's class order "
                        "(default: the data's own names)", file=FileParam(read_classnames, ("",))),
    # added after results were stored: at its default it stays out of their keys
    "load_clfs": Param("", "classifier files CLIP_benchmark's --save_clf wrote (comma-"
                       "separated; several are averaged), scored instead of the text tower's "
                       "(CLIP_benchmark's --load_clfs)",
                       file=FileParam(None, ("",), load=_classifiers.load,
                                      entries=_classifiers.entries), added=True),
})


class Multilingual(TextTask):
    """A zero-shot text task with a ``language`` (and, with templates, built-in sets by language).

    ``resolve_params`` checks the language code, and that a language without built-in
    templates is given a templates file.
    """

    def resolve_params(self, user_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """See :meth:`Task.resolve_params`.

        Raises:
            UsageError: also a malformed language code, or a built-in template set asked for a
                language it does not exist in.
        """
        params = super().resolve_params(user_params)
        language = params["language"]
        if not _LANGUAGE.fullmatch(language):
            raise UsageError(f"language {language!r} is not a language code",
                             hint="use an ISO 639 code as CLIP_benchmark does: en (the default), "
                                  "fr, jp, cn...")
        template = params.get("templates")
        if params.get("load_clfs"):
            for key in ("templates", "classnames"):
                if params[key] != self.params[key].default:
                    raise UsageError(f"{key} {params[key]!r} and load_clfs disagree: loaded "
                                     "classifiers are scored instead of the prompts",
                                     hint=f"drop {key}, or drop load_clfs to embed prompts")
            return params  # no prompt is embedded: no templates needed in any language
        if template in BUILTIN_SETS and template not in TEMPLATES.get(language, {}):
            known = ", ".join(sorted(TEMPLATES))
            raise UsageError(f"no built-in {template!r} templates for language {language!r} "
                             f"(built-in: {known})",
                             hint="pass --templates FILE (one template with {c} per line), "
                                  "--templates dataset (cb: data: CLIP_benchmark's in that "
                                  "language), or keep the default language 'en'")
        return params


def file_entries(params: Mapping[str, Any], context: Mapping[str, Any], key: str) -> list[str]:
    """The entries of file parameter ``key`` from ``context["files"]``.

    Raises:
        UsageError: the context lacks them (a path was given to the task, not through the engine).
    """
    files = context.get("files") or {}
    if key not in files:
        raise UsageError(f"{key} {params[key]!r} is not built in and context['files'] lacks its "
                         "entries",
                         hint="run through vbstore (get result/run), which reads the file, or "
                              f"pass context['files'][{key!r}]")
    return [str(entry) for entry in files[key]]


def prompt_sets(params: Mapping[str, Any], context: Mapping[str, Any],
                class_names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(templates, names)``: the templates, and each class's name as the prompts write it.

    Manifest class names (or ``context["prompt_names"]``, the data's own where they differ) read
    underscores as spaces (they often come from folder names); a classnames file is used
    verbatim.

    Raises:
        UsageError: a file parameter without its entries, or a classnames file whose length is
            not the data's class count.
    """
    language, template = params["language"], params["templates"]
    if template == DATASET_TEMPLATES:
        templates = [str(t) for t in context.get("dataset_templates") or []]
        if not templates:
            raise UsageError("--templates dataset: the data names no templates",
                             hint="read it as cb:NAME (CLIP_benchmark's templates), or pass a "
                                  "built-in set or a templates file")
    elif template in TEMPLATES.get(language, {}):
        templates = list(TEMPLATES[language][template])
    else:
        templates = file_entries(params, context, "templates")
    if params["classnames"] == "":
        # the data's own names for the prompts (a cb: source's, verbatim: imagenet1k's two
        # "missile"), where its class names had to tell them apart
        own = context.get("prompt_names") or class_names
        if len(own) != len(class_names):
            raise UsageError(f"the data names {len(own)} prompt names for {len(class_names)} "
                             "classes", hint="read the data again (vbstore get manifest)")
        return templates, [name.replace("_", " ") for name in own]
    names = file_entries(params, context, "classnames")
    if len(names) != len(class_names):
        order = ", ".join(class_names[:5]) + (" ..." if len(class_names) > 5 else "")
        raise UsageError(f"the classnames file has {len(names)} names but the data has "
                         f"{len(class_names)} classes",
                         hint=f"one name per class, in the data's class order: {order}")
    return templates, names
