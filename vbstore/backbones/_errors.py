"""Errors raised while naming, building and running backbones.

Each class also derives from the builtin it refines (``except KeyError`` still catches an
unknown backbone), and carries the fix in ``hint`` so the CLI can print one line.
"""

from __future__ import annotations

from ..errors import VbstoreError

_WAYS_OUT = (
    "pass a local checkpoint (--weights PATH.pth|.safetensors), warm the cache on a connected "
    "machine (HF_HOME / TORCH_HOME), or choose a seeded random init (--weights random)"
)


class UnknownBackbone(VbstoreError, KeyError):
    """A backbone name, source prefix, architecture or tag that nothing provides."""

    exit_code = 9

    def __init__(self, name: str, message: str | None = None, *, hint: str | None = None) -> None:
        super().__init__(
            message or f"unknown backbone {name!r}",
            hint=hint or "list them with: vbstore list backbones",
        )
        self.name = name


class InvalidSpec(VbstoreError, ValueError):
    """A backbone spec string or build argument that cannot be read."""

    exit_code = 2

    def __init__(self, spec: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"invalid backbone spec {spec!r}: {message}", hint=hint)
        self.spec = spec


class AmbiguousBackbone(VbstoreError, ValueError):
    """A custom module's output cannot be read as features without one more argument."""

    exit_code = 2

    def __init__(self, message: str, argument: str, how: str = "") -> None:
        super().__init__(
            message, hint=f"pass {argument}{f' ({how})' if how else ''} to CustomBackbone"
        )
        self.argument = argument


class WeightsUnavailable(VbstoreError, ConnectionError):
    """Pretrained weights (or upstream code) are neither cached nor downloadable now."""

    exit_code = 6

    def __init__(
        self, what: str, reason: str, *, upstream: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(f"{what}: {reason}", hint=hint or _WAYS_OUT)
        self.what = what
        self.reason = reason
        self.upstream = upstream


class NoPretrainedWeights(WeightsUnavailable):
    """The backbone has no pretrained weights at all: a choice to make, not a network problem."""

    exit_code = 2


class CheckpointError(VbstoreError, ValueError):
    """A checkpoint file that cannot be read or does not fit the architecture."""

    exit_code = 2

    def __init__(self, path: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"checkpoint {path}: {message}", hint=hint)
        self.path = path


class CheckpointNotFound(CheckpointError, FileNotFoundError):
    """A checkpoint path that does not exist."""

    exit_code = 9

    def __init__(self, path: str) -> None:
        super().__init__(path, "no such file", hint="check the path given to --weights")


class BackboneAlreadyRegistered(VbstoreError, ValueError):
    """A second ``@register_backbone`` for a name that is already taken."""

    exit_code = 2

    def __init__(self, name: str, owner: str) -> None:
        super().__init__(
            f"backbone {name!r} is already registered by {owner}",
            hint="rename the function (the registered name is the function's name)",
        )
        self.name = name


class MissingExtra(VbstoreError, ImportError):
    """A backbone source whose optional dependency is not installed."""

    exit_code = 2

    def __init__(self, source: str, extra: str) -> None:
        super().__init__(
            f"backbone source {source!r} needs the optional extra {extra!r}",
            hint=f"install it with: pip install 'vbstore[{extra}]'",
        )
        self.extra = extra
