"""Remotes: share artifacts through a directory, S3 or the Hugging Face Hub, with one layout.

```python
from vbstore.remotes import add_remote, push, pull, fetch_derivation

add_remote(store, "team", "s3://bucket/vbstore", {"endpoint_url": "http://127.0.0.1:9000"})
push(store, "team", "my-head")            # the head, its closure, derivations, then the ref
pull(other, "team/my-head")               # every blob re-hashed before it enters `other`
fetch_derivation(other, key)              # the binary cache: an id, or None to compute
```

Client libraries (fsspec, s3fs, huggingface_hub) are imported only when a remote of that kind is
opened, so importing this package stays cheap.
"""

from __future__ import annotations

from ._base import RefUpdate, Remote, forget_unreachable
from ._boards import (
    BoardListing,
    blobs_to_send,
    board_document,
    board_limit,
    board_ref,
    check_record,
    fetch_record,
    parse_board,
    read_board,
    sizes,
)
from ._card import write_model_card
from ._closure import Entry, closure
from ._config import RemoteConfig, RemoteRegistry, parse_url
from ._errors import (
    RemoteConflict,
    RemoteError,
    RemoteNotFound,
    RemoteOffline,
    TamperedBlob,
    UnknownRemote,
    UnsafeRemotePath,
)
from ._open import (
    add_remote,
    list_remote_refs,
    list_remotes,
    open_remote,
    registry,
    remote_for,
    remove_remote,
)
from ._paths import object_path
from ._peek import remote_has_derivation
from ._pull import PullResult, fetch_derivation, fetch_object, install, pull
from ._push import PushResult, push, push_ref
from ._results import LINEAGE_KINDS, ResultsPush, push_results, result_kinds

__all__ = [
    "LINEAGE_KINDS", "BoardListing", "Entry", "PullResult", "PushResult", "RefUpdate", "Remote",
    "RemoteConfig", "RemoteConflict", "RemoteError", "RemoteNotFound", "RemoteOffline",
    "RemoteRegistry", "ResultsPush", "TamperedBlob", "UnknownRemote", "UnsafeRemotePath",
    "add_remote", "blobs_to_send", "board_document", "board_limit", "board_ref", "check_record",
    "closure", "fetch_derivation", "fetch_object", "fetch_record", "forget_unreachable", "install",
    "list_remote_refs", "list_remotes", "object_path", "open_remote", "parse_board", "parse_url",
    "pull", "push", "push_ref", "push_results", "read_board", "registry", "remote_for",
    "remote_has_derivation", "remove_remote", "result_kinds", "sizes", "write_model_card",
]
