"""The one layout every remote shares, and the checks that keep names inside it.

```
objects/ab/cdef...        blob bytes, named by BLAKE3 like the local store
derivations/<key>.json    a derivation: spec, output id and kind, and the output's closure
refs/<name>.json          a named object: id, kind, and its closure
```

Everything a remote hands back (a ref name, an id, a key) is checked here before it becomes a
path, so a hostile remote cannot make vbstore read or write outside the remote's root, nor
outside ``objects/``, ``derivations/`` and ``refs/``.
"""

from __future__ import annotations

import re

from ..errors import BadRemoteTarget
from ._errors import UnsafeRemotePath

_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
# The local store's ref grammar (vbstore.store._store), so a pulled ref can be tagged as is.
_REF_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*\Z")
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
# Files a push may add at the root of a remote (a Hub model repo's browsable files).
_ROOT_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MAX_REF_LENGTH = 200


def check_oid(value: object, what: str = "object id") -> str:
    """A full lowercase 64-hex id, or :class:`UnsafeRemotePath`."""
    if not isinstance(value, str) or not _HEX64.match(value):
        raise UnsafeRemotePath(what, str(value))
    return value


def check_ref(name: object) -> str:
    """A ref name whose every ``/``-segment is a plain name (no ``..``, ``.``, empty, absolute).

    Raises:
        UnsafeRemotePath: the name could leave ``refs/`` or is not a valid local ref name.
    """
    if not isinstance(name, str) or not name or len(name) > MAX_REF_LENGTH:
        raise UnsafeRemotePath("ref name", str(name))
    segments = name.split("/")
    if any(not _REF_SEGMENT.match(s) or s in (".", "..") or ".." in s for s in segments):
        raise UnsafeRemotePath("ref name", name)
    if re.fullmatch(r"[0-9a-f]+", name):  # would be read back as an id prefix
        raise UnsafeRemotePath("ref name (only hex digits)", name)
    return name


def check_remote_name(name: str) -> str:
    """A remote's local name: one plain segment, so ``REMOTE/REF`` splits unambiguously."""
    if not _REMOTE_NAME.match(name or ""):
        raise UnsafeRemotePath(
            "remote name", name,
            hint="a remote name is one word of letters, digits and . _ - (up to 64), e.g. team",
        )
    return name


def check_root_file(name: str) -> str:
    """A file name a push may place at the remote's root (``README.md``, ``model.safetensors``)."""
    if not _ROOT_FILE.match(name or "") or ".." in name or name.split(".")[0] in (
            "objects", "derivations", "refs"):
        raise UnsafeRemotePath("root file name", name)
    return name


def object_path(oid: str) -> str:
    oid = check_oid(oid)
    return f"objects/{oid[:2]}/{oid[2:]}"


def derivation_path(key: str) -> str:
    return f"derivations/{check_oid(key, 'derivation key')}.json"


def ref_path(name: str) -> str:
    return f"refs/{check_ref(name)}.json"


def split_target(target: str) -> tuple[str, str]:
    """``"REMOTE/REF/with/slashes"`` → ``("REMOTE", "REF/with/slashes")``, both checked."""
    remote, sep, ref = target.partition("/")
    if not sep or not ref:
        raise BadRemoteTarget(target)
    return check_remote_name(remote), check_ref(ref)
