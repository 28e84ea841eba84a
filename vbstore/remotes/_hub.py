"""Hugging Face Hub remotes (``hf://namespace/repo``), through ``huggingface_hub``.

Writes are commits: a push gathers every blob, derivation record, the ref and any browsable
files into ONE ``HfApi.create_commit`` whose ``parent_commit`` is the branch head read when the
push began. The Hub refuses such a commit once the branch has moved (HTTP 412, "A commit has
happened since"), which becomes a :class:`RemoteConflict`. Reads are pinned to one commit: the
revision asked for, or the branch head resolved once at the start, so a pull never mixes files
from two commits. The endpoint and token come from ``HF_ENDPOINT`` and ``HF_TOKEN`` (or the
locally saved token) at call time and are never written anywhere by vbstore.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from .. import __version__
from .._progress import progress
from ..errors import VbstoreError
from ._base import RefUpdate, Remote, bounded, document_limit, local_digest, probe_url
from ._config import RemoteConfig
from ._errors import (
    RemoteConflict,
    RemoteError,
    RemoteNotFound,
    RemoteOffline,
    UnsafeRemotePath,
    redact,
)
from ._paths import check_ref

# Local imports: huggingface_hub and httpx load when a Hub remote is used.

DEFAULT_ENDPOINT = "https://huggingface.co"
CHUNK = 1 << 20
_PATHS_INFO_BATCH = 200
_PREUPLOAD_BATCH = 100
_TRUE = ("1", "true", "yes", "on")


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in _TRUE
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


class HubRemote(Remote):
    """A model (or dataset) repository on the Hub; refs, objects and derivations are files in it."""

    has_revisions = True

    def __init__(self, config: RemoteConfig) -> None:
        super().__init__(config)
        self.repo_id = config.url[len("hf://"):]
        self.repo_type = config.options.get("repo_type", "model")
        self.branch = config.options.get("branch", "main")
        self.endpoint = hub_endpoint()
        self._api = None
        self._heads: dict[str | None, str] = {}

    @property
    def api(self):
        if self._api is None:
            from huggingface_hub import HfApi

            self._api = HfApi(endpoint=self.endpoint, token=os.environ.get("HF_TOKEN") or None,
                              library_name="vbstore", library_version=__version__)
        return self._api

    def check_online(self) -> None:
        # huggingface_hub retries a dead endpoint for tens of seconds; answer at once instead
        if hub_offline():
            raise RemoteOffline(self.name, "HF_HUB_OFFLINE is set")
        probe_url(self.name, self.endpoint)

    @contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """Map huggingface_hub errors to vbstore's, with the token never in the message."""
        from huggingface_hub.errors import (
            HfHubHTTPError,
            OfflineModeIsEnabled,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        http = _http_errors()
        try:
            yield
        except VbstoreError:  # already one of ours (ValueError below must not swallow it)
            raise
        except (OfflineModeIsEnabled, *http.connect) as exc:
            raise RemoteOffline(self.name, f"{what}: {type(exc).__name__}") from None
        except http.transport as exc:  # the connection broke or timed out mid-way
            raise RemoteError(f"{what} on {self.repo_id!r} failed: {type(exc).__name__}",
                              hint="retry; nothing partial was kept") from None
        except RepositoryNotFoundError:
            raise RemoteNotFound(
                f"repository {self.repo_id!r} not found at {self.endpoint} (or it is private)",
                hint="push to create it, or set HF_TOKEN to a token that can read it") from None
        except RevisionNotFoundError:
            raise RemoteNotFound(f"{what}: no such revision in {self.repo_id!r}",
                                 hint="check the commit sha or branch name") from None
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status in (409, 412):
                raise RemoteConflict(
                    f"{what}: {self.repo_id!r} received another commit while this push ran",
                    hint="pull to see the other change, then push again") from None
            hint = ("set HF_TOKEN to a token with write access" if status in (401, 403)
                    else "retry later; run with VBSTORE_DEBUG=1 for details")
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RemoteError(f"{what} on {self.repo_id!r} failed: {redact(first)}",
                              hint=hint) from None
        except ValueError as exc:  # e.g. README metadata the Hub refused
            raise RemoteError(f"{what} on {self.repo_id!r} failed: {redact(str(exc))}") from None

    def resolve(self, revision: str | None) -> str:
        """The commit sha of ``revision`` (default: the configured branch), asked once and kept."""
        if revision not in self._heads:
            with self._failing(f"resolving {revision or self.branch}"):
                info = self.api.repo_info(self.repo_id, repo_type=self.repo_type,
                                          revision=revision or self.branch)
            if not info.sha:
                raise RemoteError(
                    f"{self.repo_id!r} reported no commit for {revision or self.branch}")
            self._heads[revision] = info.sha
        return self._heads[revision]

    def begin_push(self) -> str:
        with self._failing("creating the repository"):
            self.api.create_repo(self.repo_id, repo_type=self.repo_type, exist_ok=True,
                                 # private unless asked otherwise: sharing is a choice
                                 private=self.config.options.get("private", "true").lower()
                                 in _TRUE)
            if self.branch != "main":
                self.api.create_branch(self.repo_id, repo_type=self.repo_type,
                                       branch=self.branch, exist_ok=True)
        self._heads.pop(None, None)  # the head must be read now, not reused from earlier
        return self.resolve(None)

    def _open(self, path: str, revision: str | None):
        """A streaming response for ``path`` at the pinned commit, or None when it is absent.

        The bytes are never written anywhere by this layer: the caller streams them (into the
        store's own ``tmp/``, hashing as they come) and stops at the size it expects.
        """
        from huggingface_hub import hf_hub_url
        from huggingface_hub.errors import EntryNotFoundError
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        sha = self.resolve(revision)
        url = hf_hub_url(self.repo_id, path, repo_type=self.repo_type, revision=sha,
                         endpoint=self.endpoint)
        headers = build_hf_headers(token=os.environ.get("HF_TOKEN") or None,
                                   library_name="vbstore", library_version=__version__)
        session = get_session()
        with self._failing(f"downloading {path}"):
            response = session.send(session.build_request("GET", url, headers=headers,
                                                          timeout=60),
                                    stream=True, follow_redirects=True)
            if response.status_code >= 400:
                try:
                    response.read()
                    hf_raise_for_status(response)
                except EntryNotFoundError:
                    return None
                finally:
                    response.close()
        return response

    def _chunks(self, response, path: str) -> Iterator[bytes]:
        try:
            with self._failing(f"downloading {path}"):
                yield from response.iter_bytes(CHUNK)
        finally:
            response.close()

    def read(self, path: str, revision: str | None = None,
             limit: int | None = None) -> bytes | None:
        chunks = self.download(path, revision)
        if chunks is None:
            return None
        if limit is not None:
            chunks = bounded(chunks, limit, path, self.name)
        return b"".join(chunks)

    def download(self, path: str, revision: str | None = None) -> Iterable[bytes] | None:
        response = self._open(path, revision)
        return None if response is None else self._chunks(response, path)

    def unchanged(self, files: Mapping[str, Path | bytes], revision: str | None = None) -> set[str]:
        # the listing carries a checksum of every file: the sha256 of an LFS file, else its git
        # blob id; compare those, so nothing is downloaded

        sha = self.resolve(revision)
        paths, same = sorted(files), set()
        with self._failing("checking objects"):
            for i in range(0, len(paths), _PATHS_INFO_BATCH):
                infos = self.api.get_paths_info(self.repo_id, paths[i : i + _PATHS_INFO_BATCH],
                                                repo_type=self.repo_type, revision=sha)
                for info in infos:
                    if not hasattr(info, "size") or info.path not in files:
                        continue
                    local = files[info.path]
                    lfs = getattr(info, "lfs", None)
                    if lfs is not None:
                        match = lfs.sha256 == local_digest(local, hashlib.sha256)
                    else:
                        match = info.blob_id == _git_blob_id(local)
                    if match:
                        same.add(info.path)
        return same

    def existing(self, paths: Iterable[str], revision: str | None = None) -> set[str]:
        sha = self.resolve(revision)
        wanted = list(paths)
        found: set[str] = set()
        with self._failing("listing objects"):
            for i in range(0, len(wanted), _PATHS_INFO_BATCH):
                infos = self.api.get_paths_info(self.repo_id, wanted[i : i + _PATHS_INFO_BATCH],
                                                repo_type=self.repo_type, revision=sha)
                found.update(info.path for info in infos if hasattr(info, "size"))
        return found

    def read_ref(self, name: str, revision: str | None = None,
                 limit: int | None = None) -> tuple[bytes | None, str | None]:
        # the version of anything on the Hub is the commit it was read at
        data = self.read(f"refs/{check_ref(name)}.json", revision,
                         limit=limit or document_limit())
        return data, self.resolve(revision)

    def list_refs(self, revision: str | None = None) -> list[str]:
        from huggingface_hub.errors import EntryNotFoundError

        sha = self.resolve(revision)
        with self._failing("listing refs"):
            try:
                entries = list(self.api.list_repo_tree(self.repo_id, path_in_repo="refs",
                                                       recursive=True, repo_type=self.repo_type,
                                                       revision=sha))
            except EntryNotFoundError:
                return []
        names = []
        for entry in entries:
            if hasattr(entry, "size") and entry.path.endswith(".json"):
                try:
                    names.append(check_ref(entry.path[len("refs/"): -len(".json")]))
                except UnsafeRemotePath:
                    continue  # not a name vbstore would write: never hand it on
        return sorted(names)

    def publish(self, files: Mapping[str, Path | bytes], ref: RefUpdate | None,
                message: str) -> str | None:
        from huggingface_hub import CommitOperationAdd

        operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=files[path])
                      for path in sorted(files)]
        if ref is not None:
            operations.append(CommitOperationAdd(path_in_repo=f"refs/{check_ref(ref.name)}.json",
                                                 path_or_fileobj=ref.data))
        parent = ref.expected if ref is not None and ref.expected else self.resolve(None)
        with progress(f"pushing to {self.name}", len(operations), "file") as shown, \
                self._failing("pushing"):
            # large files go up before the commit that names them, a batch at a time, so the
            # progress lines say how far it is; the commit then adds them all at once
            for i in range(0, len(operations), _PREUPLOAD_BATCH):
                batch = operations[i : i + _PREUPLOAD_BATCH]
                self.api.preupload_lfs_files(self.repo_id, batch, repo_type=self.repo_type,
                                             revision=self.branch)
                shown.update(len(batch))
            info = self.api.create_commit(
                self.repo_id, operations, commit_message=message, repo_type=self.repo_type,
                revision=self.branch, parent_commit=parent)
        self._heads.pop(None, None)
        return info.oid


class _HttpErrors:
    """The HTTP client's connect and transport errors: httpx2 (hub 2.x) or httpx (hub 1.x)."""

    def __init__(self) -> None:
        try:
            import httpx2 as client
        except ImportError:
            import httpx as client  # type: ignore[no-redef]  # the same API under its 1.x name
        self.connect = (client.ConnectError, client.ConnectTimeout)
        self.transport = client.TransportError


_http: _HttpErrors | None = None


def _http_errors() -> _HttpErrors:
    global _http
    if _http is None:
        _http = _HttpErrors()
    return _http


def _git_blob_id(local: Path | bytes) -> str:
    """The git object id of a file's bytes (what the Hub lists for a non-LFS file)."""
    size = len(local) if isinstance(local, bytes) else local.stat().st_size
    hasher = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    if isinstance(local, bytes):
        hasher.update(local)
    else:
        with open(local, "rb") as handle:
            while chunk := handle.read(CHUNK):
                hasher.update(chunk)
    return hasher.hexdigest()
