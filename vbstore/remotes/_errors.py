"""Errors the remote layer raises.

Each derives from :class:`vbstore.errors.VbstoreError` (and the builtin it refines), carries the
next step in ``hint``, and has the exit code ``docs/remotes.md`` documents. Messages never hold a
credential: anything built from a server's answer goes through :func:`redact` first.
"""

from __future__ import annotations

import os

from ..errors import VbstoreError

# Environment variables whose values must never appear in a message, record or card.
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
              "AWS_ACCESS_KEY_ID")


def redact(text: str) -> str:
    """``text`` with the value of every secret environment variable replaced by ``***``."""
    for name in SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text


class RemoteError(VbstoreError, OSError):
    """A remote answered with an error, or could not be read or written."""

    exit_code = 6

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(redact(message), hint=hint)


class RemoteOffline(RemoteError, ConnectionError):
    """The remote cannot be reached now (offline mode or no network); nothing was changed."""

    exit_code = 6

    def __init__(self, remote: str, reason: str) -> None:
        super().__init__(
            f"remote {remote!r} is unreachable: {reason}",
            hint="connect to the network (or unset HF_HUB_OFFLINE) and retry; "
                 "the local store is unchanged",
        )
        self.remote = remote


class RemoteConflict(RemoteError):
    """Someone else changed the remote (or a local ref) while this operation ran."""

    exit_code = 11


class RemoteNotFound(RemoteError, KeyError):
    """A ref, object or derivation that the remote does not hold."""

    exit_code = 9

    def __str__(self) -> str:  # KeyError would quote the message
        return RemoteError.__str__(self)


class UnknownRemote(VbstoreError, KeyError):
    """A remote name that is not configured for this store."""

    exit_code = 9

    def __init__(self, name: str, known: list[str]) -> None:
        shown = ", ".join(known) if known else "none configured"
        super().__init__(f"no remote named {name!r} ({shown})",
                         hint="add one with: vbstore remote add NAME URL")
        self.name = name

    def __str__(self) -> str:
        return VbstoreError.__str__(self)


class TamperedBlob(VbstoreError, ValueError):
    """Downloaded bytes are not what the remote said they are; nothing of them was kept."""

    exit_code = 10

    def __init__(self, remote: str, oid: str, reason: str, *, what: str | None = None) -> None:
        super().__init__(
            f"refused {what or oid[:12]} from remote {remote!r}: {redact(reason)}",
            hint="the remote is damaged or tampered with; "
                 "the local store kept nothing of this transfer",
        )
        self.remote = remote
        self.oid = oid


class UnsafeRemotePath(VbstoreError, ValueError):
    """A ref name, id or path that would leave the remote's layout (``..``, absolute, odd chars)."""

    exit_code = 2

    def __init__(self, what: str, value: str) -> None:
        shown = value if len(value) <= 80 else value[:77] + "..."
        super().__init__(
            f"unsafe {what} {shown!r}",
            hint="names use letters, digits and . _ / @ + - (no '..', no leading '/'); "
                 "ids are 64 hex digits",
        )
        self.value = value
