"""Backbone spec strings, parsed in exactly one place.

Grammar (documented in ``docs/backbones.md``)::

    NAME                 a registered plugin, e.g. test_vit, or a bare name such as resnet18
                         that stands for a pinned spec (``_names.BARE_NAMES``)
    SOURCE:ARCH          a built-in source, e.g. timm:vit_small_patch14_dinov2.lvd142m
    SOURCE:ARCH@TAG      a pretrained tag, e.g. open_clip:ViT-B-32@laion2b_s34b_b79k

``@`` separates the tag because architecture names already use ``-``, ``_`` and ``.``
(timm writes its own tags as ``ARCH.TAG``, so ``timm:`` takes no ``@``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import field_ref
from ._errors import InvalidSpec, UnknownBackbone
from ._names import BARE_NAMES, bare_name
from ._registry import _REGISTRY, entries

_CHECKPOINT_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt", ".safetensors", ".npz")


@dataclass(frozen=True)
class BackboneSpec:
    """A parsed spec: which registered entry builds it, for which architecture and tag."""

    name: str
    source: str
    arch: str
    tag: str | None = None

    def __str__(self) -> str:
        entry = _REGISTRY.get(self.name)
        text = f"{self.name}:{self.arch}" if entry is None or entry.prefix else self.name
        return f"{text}@{self.tag}" if self.tag else text


def _sources() -> list[str]:
    return [entry.name for entry in entries() if entry.prefix]


def _unknown_name(text: str) -> UnknownBackbone:
    names = [entry.name for entry in entries() if not entry.prefix] + list(BARE_NAMES)
    import difflib  # a suggestion, on the error path only

    close = difflib.get_close_matches(text, names, n=3)
    # a bare architecture name is the most common slip: say how to prefix it
    # timm and torchvision hold most architectures: suggest them first
    sources = sorted(_sources(), key=lambda s: (s not in ("timm", "torchvision"), s))
    examples = ", ".join(f"{source}:{text}" for source in sources[:2])
    hint = (
        f"prefix an architecture with its source ({examples}...); "
        "list them with: vbstore list backbones"
    )
    if close:
        hint = f"did you mean {', '.join(close)}? or {hint}"
    return UnknownBackbone(text, hint=hint)


def parse_spec(text: str) -> BackboneSpec:
    """Parse a backbone spec string.

    ```python
    parse_spec("open_clip:ViT-B-32@laion2b_s34b_b79k")
    # BackboneSpec(name='open_clip', source='open_clip', arch='ViT-B-32', tag='laion2b_s34b_b79k')
    ```

    Raises:
        InvalidSpec: the text is malformed (empty, a path, a missing architecture or tag...).
        UnknownBackbone: the name, source or catalogued architecture is not registered.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidSpec(
            str(text),
            "empty spec",
            hint="e.g. timm:resnet50; list them with: vbstore list backbones",
        )
    text = text.strip()
    if "://" in text or text.startswith(("/", "./", "~")) or text.endswith(_CHECKPOINT_SUFFIXES):
        raise InvalidSpec(
            text,
            "looks like a path or URL",
            hint="give the architecture as the spec and the file as weights "
                 f"({field_ref('weights', 'PATH')})",
        )
    head, sep, rest = text.partition(":")
    if not sep:
        name, at, tag = text.partition("@")
        entry = _REGISTRY.get(name)
        bare = bare_name(name) if entry is None else None
        if bare is not None:
            if at:
                raise InvalidSpec(text, f"{name!r} stands for {bare}",
                                  hint="write the full spec to choose other weights")
            return parse_spec(bare)
        if entry is None:
            raise _unknown_name(name)
        if entry.prefix:
            raise InvalidSpec(
                text, f"source {name!r} needs an architecture", hint=f"write {name}:ARCH"
            )
        if at:
            raise InvalidSpec(text, f"{name!r} takes no @TAG", hint="choose weights with "
                                                                    f"{field_ref('weights')}")
        return BackboneSpec(name=name, source=entry.source, arch=name)

    entry = _REGISTRY.get(head)
    if entry is None:
        if head in ("hf-hub", "local-dir", "hf"):
            raise InvalidSpec(
                text,
                f"{head}: models are not pinned sources",
                hint=f"download the checkpoint and pass it with {field_ref('weights', 'PATH')}",
            )
        raise UnknownBackbone(
            head,
            f"unknown backbone source {head!r}",
            hint=f"known sources: {', '.join(_sources())}; list them with: vbstore list backbones",
        )
    if not entry.prefix:
        raise InvalidSpec(text, f"{head!r} is a backbone, not a source", hint=f"write just {head}")
    arch, at, tag = rest.partition("@")
    if not arch:
        raise InvalidSpec(text, "missing architecture", hint=f"write {head}:ARCH")
    if ":" in arch or "/" in arch:
        raise InvalidSpec(
            text,
            f"architecture {arch!r} contains ':' or '/'",
            hint="remote model ids are not pinned; pass the checkpoint file with "
                 f"{field_ref('weights', 'PATH')}",
        )
    if at and not tag:
        raise InvalidSpec(
            text, "empty tag after '@'", hint=f"write {head}:{arch}@TAG or drop the '@'"
        )
    if at and not entry.tags:
        hint = f"write timm:{arch}.{tag}" if head == "timm" else f"{head} takes no @TAG"
        raise InvalidSpec(text, f"source {head!r} takes no @TAG", hint=hint)
    if entry.catalog and arch not in entry.catalog:
        import difflib  # a suggestion, on the error path only

        close = difflib.get_close_matches(arch, list(entry.catalog), n=1)
        raise UnknownBackbone(
            arch,
            f"{head} has no architecture {arch!r}",
            hint=(f"did you mean {head}:{close[0]}? " if close else "")
            + f"known: {', '.join(sorted(entry.catalog))}",
        )
    return BackboneSpec(name=head, source=entry.source, arch=arch, tag=tag or None)
