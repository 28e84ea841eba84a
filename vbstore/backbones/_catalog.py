"""What can be asked for: registered entries, bare names, and the models the libraries offer.

``catalog_rows(pattern)`` is what ``vbstore list backbones PATTERN`` prints. The registry and
bare-name rows are cheap; the model rows ask the installed timm, torchvision and open_clip for
their pretrained models (which imports torch), so they are listed only when asked for. A source
whose library is missing (open_clip without the ``clip`` extra) gets one row saying so.
"""

from __future__ import annotations

import fnmatch
import importlib.util
from typing import Any

from ._names import BARE_NAMES
from ._registry import backbone_rows, get_entry
from ._spec import parse_spec


def _matches(pattern: str, *texts: str) -> bool:
    # model names mix cases (ViT-B-32, resnet50): a listing pattern should not care
    pattern = pattern.lower()
    return any(fnmatch.fnmatchcase(t.lower(), pattern) for t in texts if t)


def _row(spec: str, source: str, arch: str, tag: str | None, **extra: Any) -> dict[str, Any]:
    entry = get_entry(source)
    return {"name": source, "spec": spec, "source": source, "arch": arch, "tag": tag,
            "extra": entry.extra, "installed": entry.installed(), "offline": False,
            "default_pooling": entry.default_pooling, "embed_dim": None,
            "description": "", **extra}


def bare_rows(pattern: str = "*") -> list[dict[str, Any]]:
    """One row per bare name whose name or spec matches ``pattern``."""
    rows = []
    for name, spec in sorted(BARE_NAMES.items()):
        if _matches(pattern, name, spec):
            parsed = parse_spec(spec)
            dim = get_entry(parsed.source).catalog.get(parsed.arch)
            rows.append(_row(name, parsed.source, parsed.arch, parsed.tag, stands_for=spec,
                             embed_dim=dim, description=f"= {spec}"))
    return rows


def _timm_rows(pattern: str) -> list[dict[str, Any]]:
    import timm  # heavy (torch): only when models are listed

    rows = []
    for full in timm.list_pretrained():
        arch, _, tag = full.partition(".")
        spec = f"timm:{full}"
        if _matches(pattern, spec, full):
            rows.append(_row(spec, "timm", arch, tag or None))
    return rows


def _torchvision_rows(pattern: str) -> list[dict[str, Any]]:
    import torchvision.models as models  # heavy (torch): only when models are listed

    rows = []
    for arch in models.list_models(module=models):
        if not _matches(pattern, f"torchvision:{arch}", arch):
            continue
        for member in models.get_model_weights(arch):
            rows.append(_row(f"torchvision:{arch}@{member.name}", "torchvision", arch,
                             member.name))
    return rows


def _open_clip_rows(pattern: str) -> list[dict[str, Any]]:
    if importlib.util.find_spec("open_clip") is None:
        spec = "open_clip:MODEL@TAG"
        return [_row(spec, "open_clip", "MODEL", "TAG",
                     description="install the clip extra to list its models")
                ] if _matches(pattern, spec, "open_clip") else []
    import open_clip  # heavy (torch): only when models are listed

    rows = []
    for arch, tag in open_clip.list_pretrained():
        spec = f"open_clip:{arch}@{tag}"
        if _matches(pattern, spec, arch, f"{arch}@{tag}"):
            rows.append(_row(spec, "open_clip", arch, tag))
    return rows


def model_rows(pattern: str = "*") -> list[dict[str, Any]]:
    """Pretrained models the installed timm, torchvision and open_clip offer, as specs.

    Each row names a buildable spec (``timm:resnet50.a1_in1k``,
    ``torchvision:resnet50@IMAGENET1K_V2``, ``open_clip:ViT-B-32@openai``), the extra its
    source needs and whether it is installed. Matching is case-insensitive, on the spec or the
    architecture alone.
    """
    return [*_timm_rows(pattern), *_torchvision_rows(pattern), *_open_clip_rows(pattern)]


def catalog_rows(pattern: str = "*", models: bool = False) -> list[dict[str, Any]]:
    """Registered entries, bare names and (with ``models``) the libraries' models."""
    rows = backbone_rows(pattern) + bare_rows(pattern)
    return rows + model_rows(pattern) if models else rows
