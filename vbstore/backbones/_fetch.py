"""Getting upstream files: the local cache first, the network only when it answers quickly.

A missing file must fail within seconds with :class:`WeightsUnavailable`, never after the ~50 s
of retries a hub client spends without a network, and never by falling back to other weights.
So every fetch looks in the cache without touching the network, then probes the download host
with a short TCP connect (in a thread, because a DNS lookup ignores socket timeouts), and only
then downloads, with timeouts set.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from .._net import forget, probe_timeout, unreachable_reason
from ..errors import field_ref
from ._errors import TamperedWeights, WeightsUnavailable
from ._pins import (
    drop_bytecode,
    expected_from_url,
    hub_blob_sha256,
    record_code,
    verify_code,
    verify_file,
)

# Local imports: huggingface_hub and torch.hub load when weights are downloaded.

DOWNLOAD_TIMEOUT_S = 30.0


def forget_probes() -> None:
    """Drop remembered probe results (tests, or after the network changed)."""
    forget()


def _require_network(url: str, what: str, upstream: str, hint: str | None = None) -> None:
    reason = unreachable_reason(url)
    if reason is not None:
        raise WeightsUnavailable(
            what, f"not in the local cache and offline ({reason})", upstream=upstream, hint=hint
        )


def _hf_endpoint() -> str:
    # HF_ENDPOINT is read at call time for the same reason as hf_cache_dir
    endpoint = os.environ.get("HF_ENDPOINT")
    if not endpoint:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    return endpoint


def hf_cache_dir() -> str | None:
    """The Hugging Face hub cache, read from the environment at call time.

    huggingface_hub reads ``HF_HOME`` once, at import; reading it here keeps a process that
    changes it (tests, a CLI flag) pointing at one cache.
    """
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def revision_of(path: str | Path) -> str | None:
    """The commit a Hugging Face cache path was resolved at (``.../snapshots/<sha>/file``)."""
    parts = Path(path).parts
    if "snapshots" in parts:
        index = parts.index("snapshots")
        if index + 1 < len(parts):
            return parts[index + 1]
    return None


def hf_file(
    repo_id: str, filenames: list[str], *, what: str, revision: str | None = None
) -> tuple[Path, str | None]:
    """A file from a Hugging Face repo: the first of ``filenames`` that exists.

    Returns:
        ``(local path, resolved commit sha or None)``.

    Raises:
        WeightsUnavailable: not cached and the hub cannot be reached, or the download failed.
    """
    from huggingface_hub import hf_hub_download

    try:
        from huggingface_hub.errors import EntryNotFoundError
    except ImportError:  # huggingface_hub < 0.25 kept it in utils
        from huggingface_hub.utils import EntryNotFoundError

    upstream = f"hf://{repo_id}" + (f"@{revision}" if revision else "")
    cache_dir = hf_cache_dir()
    for filename in filenames:
        try:
            path = hf_hub_download(
                repo_id, filename, revision=revision, cache_dir=cache_dir, local_files_only=True
            )
        except Exception:  # noqa: S112 - not in the cache under this name; try the next, then the hub
            continue
        return _checked_hub_file(Path(path), what), revision_of(path)
    _require_network(_hf_endpoint(), what, upstream)
    last: Exception | None = None
    for filename in filenames:
        try:
            path = hf_hub_download(
                repo_id,
                filename,
                revision=revision,
                cache_dir=cache_dir,
                endpoint=_hf_endpoint(),
                etag_timeout=max(probe_timeout(), 1.0) * 5,
            )
            return _checked_hub_file(Path(path), what), revision_of(path)
        except EntryNotFoundError as exc:
            last = exc
        except Exception as exc:
            raise WeightsUnavailable(
                what, f"download from {upstream} failed ({exc})", upstream=upstream
            ) from exc
    raise WeightsUnavailable(
        what,
        f"{upstream} has none of {filenames} ({last})",
        upstream=upstream,
        hint=f"choose another tag, or pass a checkpoint with {field_ref('weights', 'PATH')}",
    )


def _checked_hub_file(path: Path, what: str) -> Path:
    """``path`` once it hashes to the sha256 its Hub cache blob is named by (LFS files).

    Raises:
        TamperedWeights: it does not.
    """
    expected = hub_blob_sha256(path)
    if expected is not None:
        verify_file(path, expected, what=what)
    return path


def torch_hub_dir() -> Path:
    """torch.hub's cache folder (``$TORCH_HOME/hub``), read at call time."""
    import torch.hub

    return Path(torch.hub.get_dir())


def _download(url: str, dest: Path, expected: str | None = None) -> None:
    """Download ``url`` to ``dest`` through a temp file, checked against ``expected`` (a sha256
    prefix) before it takes ``dest``'s name."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    try:
        # S310: the URL comes from a library's pretrained table or a pinned GitHub commit
        request = urllib.request.Request(url, headers={"User-Agent": "vbstore"})  # noqa: S310
        with (
            os.fdopen(handle, "wb") as out,
            urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as src,  # noqa: S310
        ):
            shutil.copyfileobj(src, out, 1 << 20)
        if expected is not None:
            verify_file(tmp, expected, what=url)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def url_file(url: str, *, what: str) -> Path:
    """A file downloaded from ``url`` into ``$TORCH_HOME/hub/checkpoints`` (torch.hub's layout).

    When the URL's name pins a sha256 prefix (torchvision's and torch.hub's convention), a
    cached file is used only if it hashes to it (remembered per file state: see ``_pins``), and
    a download is checked before it is moved into the cache.

    Raises:
        WeightsUnavailable: not cached and the host cannot be reached, or the download failed
            or did not hash to the pinned prefix (nothing is cached then).
        TamperedWeights: the cached file does not hash to the pinned prefix.
    """
    dest = torch_hub_dir() / "checkpoints" / os.path.basename(urlparse(url).path)
    expected = expected_from_url(url)
    if dest.is_file():
        if expected is not None:
            verify_file(dest, expected, what=what)
        return dest
    _require_network(url, what, url)
    try:
        _download(url, dest, expected)
    except OSError as exc:
        raise WeightsUnavailable(what, f"download from {url} failed ({exc})", upstream=url) from exc
    except TamperedWeights as exc:
        raise WeightsUnavailable(what, f"{url} downloaded with another hash ({exc})",
                                 upstream=url) from exc
    return dest


def github_repo(owner: str, repo: str, commit: str, *, what: str, hint: str | None = None) -> Path:
    """A GitHub repository at a pinned commit, in torch.hub's cache layout.

    The folder is ``$TORCH_HOME/hub/{owner}_{repo}_{commit}``, the one ``torch.hub.load``
    itself would create. Its code is executed, so a cached folder is used only when its Python
    files are what vbstore fetched from the commit (``_pins.verify_code``).

    Raises:
        WeightsUnavailable: not cached and github.com cannot be reached, or the download failed.
        TamperedWeights: the cached folder was not fetched by vbstore, or its code changed since.
    """
    dest = torch_hub_dir() / f"{owner}_{repo}_{commit}"
    pin = f"github:{owner}/{repo}@{commit}"
    if (dest / "hubconf.py").is_file():
        verify_code(dest, pin, what=what)  # code is executed: only what vbstore fetched
        drop_bytecode(dest)  # not pinned: never read, even by a later import
        return dest
    url = f"https://github.com/{owner}/{repo}/zipball/{commit}"
    _require_network(url, what, f"github:{owner}/{repo}@{commit}", hint)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # extract next to the destination so the final move is a rename on one filesystem
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        archive = Path(tmp) / "repo.zip"
        try:
            _download(url, archive)
            with zipfile.ZipFile(archive) as zipped:
                top = zipped.namelist()[0].split("/")[0]
                zipped.extractall(tmp)
        except (OSError, zipfile.BadZipFile) as exc:
            raise WeightsUnavailable(
                what, f"download from {url} failed ({exc})", upstream=url
            ) from exc
        record_code(Path(tmp) / top, pin)  # before it takes its name in the cache
        shutil.rmtree(dest, ignore_errors=True)
        shutil.move(str(Path(tmp) / top), dest)
    return dest
