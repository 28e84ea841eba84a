"""The vbstore error hierarchy.

Every error a user can cause is a :class:`VbstoreError`. Each subclass also derives from the
builtin it refines, so ``except KeyError`` still catches an unknown object. ``exit_code`` is what
the CLI exits with; ``hint`` is the next step the user should take.
"""

from __future__ import annotations


class VbstoreError(Exception):
    """Base class of every error vbstore raises on purpose."""

    exit_code = 1
    hint = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        message = self.args[0] if self.args else ""
        return f"{message}; {self.hint}" if self.hint else str(message)


class ObjectNotFound(VbstoreError, KeyError):
    """An object id, prefix or name matches nothing in the store."""

    exit_code = 3

    def __init__(self, oid: str, *, hint: str | None = None) -> None:
        super().__init__(f"no object matches {oid!r}", hint=hint or "list objects with: vbstore ls")
        self.oid = oid


class AmbiguousPrefix(VbstoreError, KeyError):
    """A hex prefix matches more than one object."""

    exit_code = 2

    def __init__(self, prefix: str, matches: list[str]) -> None:
        shown = ", ".join(m[:16] for m in matches[:5])
        super().__init__(
            f"prefix {prefix!r} matches {len(matches)} objects ({shown})",
            hint="give more hex digits",
        )
        self.prefix = prefix
        self.matches = matches


class CorruptObject(VbstoreError, ValueError):
    """A blob's bytes no longer hash to its id."""

    exit_code = 4

    def __init__(self, oid: str, path: str, actual: str | None = None) -> None:
        super().__init__(
            f"object {oid[:12]} is corrupt: {path} does not hash to its id",
            hint="run `vbstore fsck` (with a remote configured, `vbstore fsck --repair`)",
        )
        self.oid = oid
        self.path = path
        self.actual = actual


class NonCanonical(VbstoreError, ValueError):
    """A value cannot be written as canonical JSON (NaN, Infinity, a non-string key...)."""

    exit_code = 2

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"{message} at {field or '<root>'}",
                         hint="replace it with a finite value or null")
        self.field = field


class SchemaError(VbstoreError, ValueError):
    """A JSON document does not match the schema of its kind."""

    exit_code = 2

    def __init__(self, kind: str, field: str, message: str) -> None:
        super().__init__(
            f"invalid {kind} document at {field or '<root>'}: {message}",
            hint=f"see schemas/{kind}.schema.json",
        )
        self.kind = kind
        self.field = field


class UnknownKind(VbstoreError, ValueError):
    """An artifact kind vbstore does not know."""

    exit_code = 2


class StoreIOError(VbstoreError, OSError):
    """The filesystem refused a write (disk full, read-only, permissions)."""

    exit_code = 7


class DiskFull(StoreIOError):
    """No space left while writing into the store; nothing partial was kept."""


class LeaseTimeout(VbstoreError, TimeoutError):
    """Waited too long for another process computing the same derivation."""

    exit_code = 8


class StoreLocked(VbstoreError, RuntimeError):
    """The registry stayed locked by another process past the busy timeout."""

    exit_code = 8


class UsageError(VbstoreError, ValueError):
    """An argument combination that cannot work, with the flag to fix."""

    exit_code = 2


class BadInput(VbstoreError, ValueError):
    """Input files that cannot be used (corrupt, unreadable, mislaid); lists the first few."""

    exit_code = 2

    def __init__(self, what: str, problems: list[tuple[str, str]], *,
                 hint: str | None = None) -> None:
        shown = "; ".join(f"{path}: {why}" for path, why in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"{len(problems)} {what}: {shown}{more}",
                         hint=hint or "fix or remove them and run again; nothing was written")
        self.problems = problems


class MissingDependency(VbstoreError, ImportError):
    """An optional library a feature needs (datasets, matplotlib) is not installed."""

    exit_code = 2

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"this needs {module}, which is not installed",
                         hint=f"install it with: pip install 'vbstore[{extra}]'")
        self.module, self.extra = module, extra
