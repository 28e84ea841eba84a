"""The built-in remote schemes (a directory, S3, the Hugging Face Hub), registered through
:func:`register_remote_scheme` as a user's are."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult

from ..errors import UsageError
from ._schemes import RemoteScheme, register_remote_scheme

# Local imports: each remote's class (fsspec, s3fs, huggingface_hub behind it) loads when a
# remote of its scheme is opened.


def _dir_url(parts: SplitResult, url: str) -> str:
    if parts.scheme == "file" and parts.netloc not in ("", "localhost"):
        raise UsageError(f"file URL with a host: {url}", hint="use file:///absolute/path")
    path = parts.path if parts.scheme == "file" else url
    return "file://" + str(Path(path).expanduser().resolve())


def _s3_url(parts: SplitResult, url: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", parts.netloc):
        raise UsageError(f"bad S3 bucket in {url}", hint="use s3://bucket/prefix")
    prefix = parts.path.strip("/")
    if any(seg in ("", ".", "..") for seg in prefix.split("/")) and prefix:
        raise UsageError(f"bad S3 prefix in {url}", hint="use s3://bucket/prefix")
    return f"s3://{parts.netloc}" + (f"/{prefix}" if prefix else "")


def _hf_url(parts: SplitResult, url: str) -> str:
    repo_id = (parts.netloc + parts.path).strip("/")
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", repo_id) or ".." in repo_id:
        raise UsageError(f"bad Hub repository in {url}", hint="use hf://namespace/repo")
    return f"hf://{repo_id}"


def _dir(config: Any) -> Any:
    from ._fsspec import DirRemote

    return DirRemote(config)


def _s3(config: Any) -> Any:
    from ._fsspec import S3Remote

    return S3Remote(config)


def _hub(config: Any) -> Any:
    from ._hub import HubRemote

    return HubRemote(config)


for _scheme in (
    RemoteScheme("dir", ("", "file"), (), _dir_url, _dir, local=True),
    RemoteScheme("s3", ("s3",), ("endpoint_url", "region"), _s3_url, _s3),
    RemoteScheme("hf", ("hf",), ("repo_type", "branch", "private"), _hf_url, _hub, cache=False,
                 model_card=True),
):
    register_remote_scheme(_scheme)
