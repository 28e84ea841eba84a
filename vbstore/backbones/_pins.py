"""Pretrained files checked against the hash vbstore expects, on use and before they are cached.

A cache is a folder anyone with write access can fill: a file named like torchvision's
``resnet18-f37072fd.pth`` holding random weights would otherwise be recorded as pretrained
``IMAGENET1K_V1``. What each file must hash to is known without a network where upstream says
it in the name:

* torchvision's (and torch.hub's, and timm's older) weight URLs end in ``-<sha256 prefix>.pth``;
  OpenAI's CLIP URLs name the sha256 as the folder above the file: the tables of URLs ship
  with the installed torchvision, timm and open_clip;
* a Hugging Face cache stores each LFS file under ``blobs/<sha256>`` (a snapshot's file is a link
  to it): the file must hash to its blob name.

A verified file is remembered under its state (device, inode, size, mtime, ctime), in this
process and in ``verified-files.json`` beside the store, so a checkpoint is hashed once, not on
every build; a file replaced or rewritten has another state and is hashed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from ..store import default_root
from ._errors import TamperedWeights

# torch.hub's convention: the file name carries a prefix of its sha256 ("resnet18-f37072fd.pth")
HASH_IN_NAME = re.compile(r"-([a-f0-9]{8,64})\.[A-Za-z0-9]+$")
_SHA256 = re.compile(r"[a-f0-9]{64}")
_MEMO_NAME = "verified-files.json"
_MEMO_MAX = 4096
_seen: dict[str, str] = {}  # file state -> sha256 (and code pin -> digest), in this process


def expected_from_name(path: str | os.PathLike[str]) -> str | None:
    """The sha256 prefix a torch.hub file name carries, or None."""
    match = HASH_IN_NAME.search(os.path.basename(os.fspath(path)))
    return match.group(1) if match else None


def expected_from_url(url: str) -> str | None:
    """The sha256 (or prefix) a download URL pins: in its file name (torch.hub's convention), or
    as the folder above it (OpenAI's CLIP URLs, ``.../<sha256>/ViT-B-32.pt``)."""
    path = urlparse(url).path
    parent = os.path.basename(os.path.dirname(path))
    return expected_from_name(path) or (parent if _SHA256.fullmatch(parent) else None)


def hub_blob_sha256(path: str | os.PathLike[str]) -> str | None:
    """The sha256 a Hugging Face cache file is stored under (``blobs/<sha256>``), or None when
    it is not an LFS blob of such a cache (a small file is named by its git sha1)."""
    real = Path(os.path.realpath(path))
    if real.parent.name == "blobs" and _SHA256.fullmatch(real.name):
        return real.name
    return None


def verify_file(path: str | os.PathLike[str], expected: str, *, what: str) -> None:
    """Refuse ``path`` unless its sha256 starts with ``expected``.

    Raises:
        TamperedWeights: it hashes to something else.
    """
    actual = sha256_of(path)
    if not actual.startswith(expected):
        raise TamperedWeights(what, os.fspath(path),
                              f"has sha256 {actual[:12]}, not the pinned {expected[:12]}")


def sha256_of(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file, remembered under its state (see the module docstring)."""
    st = os.stat(path)
    state = f"{os.path.realpath(path)}|{st.st_dev}|{st.st_ino}|{st.st_size}|" \
            f"{st.st_mtime_ns}|{st.st_ctime_ns}"
    if state in _seen:
        return _seen[state]
    memo = _load_memo()
    if state in memo:
        _seen[state] = memo[state]
        return memo[state]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    _seen[state] = digest.hexdigest()
    _save_memo(state, _seen[state])
    return _seen[state]


def _memo_path() -> Path:
    return default_root() / _MEMO_NAME  # read at call time: VBSTORE_HOME may change


def _load_memo() -> dict[str, str]:
    try:
        memo = json.loads(_memo_path().read_text())
    except (OSError, ValueError):
        return {}
    return memo if isinstance(memo, dict) else {}


def _save_memo(state: str, digest: str) -> None:
    """Remember a hash; best effort (a read-only or missing store folder only costs a re-hash)."""
    path = _memo_path()
    with contextlib.suppress(OSError):
        memo = _load_memo()
        memo[state] = digest
        if len(memo) > _MEMO_MAX:  # the oldest states first (dicts keep insertion order)
            memo = dict(list(memo.items())[-_MEMO_MAX:])
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{_MEMO_NAME}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(memo))
        os.replace(temp, path)


def code_digest(folder: Path) -> str:
    """A digest of the Python code in ``folder`` (every ``*.py``, by relative path): what
    ``torch.hub.load`` of the folder can execute, loaded under :func:`source_only` with no
    :func:`stray_code` beside it."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def record_code(folder: Path, pin: str) -> None:
    """Remember the code digest of ``folder``, just fetched from the commit ``pin`` names."""
    _seen[f"code:{pin}"] = code_digest(folder)
    _save_memo(f"code:{pin}", _seen[f"code:{pin}"])


def verify_code(folder: Path, pin: str, *, what: str) -> None:
    """Refuse hub code in ``folder`` unless it is what vbstore fetched for ``pin``.

    The code of a pinned commit cannot be hashed without downloading it, so the pin is the
    digest vbstore recorded when it fetched that commit itself; a folder it did not fetch
    (planted, or warmed by another tool) is refused, never executed.

    Raises:
        TamperedWeights: no digest was recorded for ``pin``, or the code differs from it.
    """
    expected = _seen.get(f"code:{pin}") or _load_memo().get(f"code:{pin}")
    if expected is None:
        raise TamperedWeights(what, str(folder), "was not fetched by vbstore, so its code cannot "
                                                 "be checked against the pinned commit")
    if code_digest(folder) != expected:
        raise TamperedWeights(what, str(folder), "holds other code than vbstore fetched for "
                                                 "the pinned commit")
    stray = stray_code(folder)
    if stray:
        raise TamperedWeights(what, str(folder), f"holds {len(stray)} file(s) Python could run "
                                                 f"besides the pinned source ({stray[0]})")


# what an import runs besides ``*.py``: sourceless bytecode and compiled extension modules
_RUNNABLE = (*importlib.machinery.BYTECODE_SUFFIXES, *importlib.machinery.EXTENSION_SUFFIXES,
             ".pyd", ".so")


def stray_code(folder: Path) -> list[str]:
    """Files in ``folder`` an import could execute that ``code_digest`` does not pin: a
    sourceless ``.pyc`` or an extension module (imported before a ``.py`` of the same name).
    ``__pycache__`` is left out: :func:`source_only` never reads it."""
    return sorted(
        path.relative_to(folder).as_posix() for path in folder.rglob("*")
        if path.name.endswith(_RUNNABLE) and "__pycache__" not in path.relative_to(folder).parts
    )


def drop_bytecode(folder: Path) -> None:
    """Remove the ``__pycache__`` folders under pinned code, best effort: bytecode there is not
    pinned, and a module the code imports later (outside :func:`source_only`) would read it."""
    for cache in sorted(folder.rglob("__pycache__"), reverse=True):
        if cache.is_dir() and not cache.is_symlink():
            shutil.rmtree(cache, ignore_errors=True)
        elif cache.is_symlink():
            with contextlib.suppress(OSError):
                cache.unlink()


@contextlib.contextmanager
def source_only() -> Iterator[None]:
    """Import from source only while pinned hub code loads: cached bytecode beside the source
    (``__pycache__/hubconf.cpython-311.pyc``, which the pin cannot see and Python would run
    instead of the pinned ``hubconf.py``) is never read, and none is written into the folder."""
    saved = sys.pycache_prefix, sys.dont_write_bytecode
    with tempfile.TemporaryDirectory(prefix="vbstore-pyc-") as empty:
        # bytecode is looked up under the (empty) prefix instead of beside the source
        sys.pycache_prefix, sys.dont_write_bytecode = empty, True
        try:
            yield
        finally:
            sys.pycache_prefix, sys.dont_write_bytecode = saved
