"""Remote errors live in :mod:`vbstore.errors`; re-exported here for the remote layer."""

from ..errors import (  # noqa: F401
    SECRET_ENV,
    RemoteConflict,
    RemoteError,
    RemoteNotFound,
    RemoteOffline,
    TamperedBlob,
    UnknownRemote,
    UnsafeRemotePath,
    redact,
)
