"""Remotes configured for one store, kept in ``<store>/remotes.json``.

The file lives beside the registry rather than in it, so the registry schema stays the store's
own. It holds names, URLs and non-secret options only: credentials come from the environment
(``HF_TOKEN``, ``AWS_ACCESS_KEY_ID``...) at the moment they are needed, and an option or URL that
looks like it carries one is refused. The file also remembers where each pulled ref came from
(remote, ref, revision), since the registry's ``refs`` table has no column for it.

Writes take ``locks/remotes.lock`` and replace the file atomically (temp + rename).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError
from ._errors import UnknownRemote
from ._paths import check_remote_name
from ._schemes import get_scheme, scheme_of_url

FILE_NAME = "remotes.json"
FORMAT = 1

# the options each kind of remote understands (everything else is refused so a typo is not
# silent), how its URL reads and how it opens: ._schemes
_SECRETISH = re.compile(r"(secret|token|password|passwd|credential|access_key|api_key|auth)", re.I)


@dataclass(frozen=True)
class RemoteConfig:
    """One configured remote: its name, scheme (``dir``, ``s3``, ``hf``), URL and options."""

    name: str
    url: str
    scheme: str
    options: Mapping[str, str] = field(default_factory=dict)
    #: Asked as a binary cache by ``get``; False for a pull-only remote (``--no-cache``), whose
    #: lineage is never recorded as cache answers either.
    cache: bool = True

    @property
    def model_card(self) -> bool:
        """Whether a head pushed here gets a model card (its scheme says: the Hub's does)."""
        return get_scheme(self.scheme).model_card

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "scheme": self.scheme,
                "options": dict(self.options), "cache": self.cache}


def parse_url(url: str) -> tuple[str, str]:
    """Normalise a remote URL and return ``(scheme, url)``.

    A plain path or ``file://`` URL is a directory (made absolute); ``s3://bucket[/prefix]`` an
    S3 prefix; ``hf://namespace/repo`` a Hugging Face Hub repository.

    Raises:
        UsageError: an unknown scheme, a malformed URL, or credentials embedded in it.
    """
    parts = urlsplit(url)
    if not url:
        raise UsageError("empty remote URL", hint="give a directory, s3://... or hf://...")
    scheme = scheme_of_url(parts.scheme)
    if scheme is not None and scheme.local:
        return scheme.name, scheme.normalise(parts, url)
    if parts.username or parts.password or "@" in parts.netloc:
        raise UsageError("credentials in a remote URL are refused",
                         hint="put them in the environment (AWS_*, HF_TOKEN) instead")
    if parts.query or parts.fragment:
        raise UsageError(f"query strings are not part of a remote URL: {url}",
                         hint="pass settings with --option KEY=VALUE")
    if scheme is None:
        raise UsageError(f"unsupported remote URL {url!r}",
                         hint="use a directory path, file:///path, s3://bucket/prefix or "
                              "hf://namespace/repo")
    return scheme.name, scheme.normalise(parts, url)


def check_options(scheme: str, options: Mapping[str, str]) -> dict[str, str]:
    """The options, refused when unknown for ``scheme`` or when they look like a secret."""
    checked = {}
    for key, value in options.items():
        if _SECRETISH.search(key):
            raise UsageError(f"option {key!r} looks like a credential and is never stored",
                             hint="set it in the environment (HF_TOKEN, AWS_SECRET_ACCESS_KEY...)")
        understood = get_scheme(scheme).options
        if key not in understood:
            known = ", ".join(understood) or "none"
            raise UsageError(f"unknown option {key!r} for a {scheme} remote",
                             hint=f"known: {known}")
        checked[key] = str(value)
    if "endpoint_url" in checked:
        parts = urlsplit(checked["endpoint_url"])
        # "@" anywhere: "http:////:pw@host" has an empty netloc and carries the password in
        # what urlsplit calls its path
        if parts.username is not None or parts.password is not None or "@" in checked[
                "endpoint_url"]:
            raise UsageError("credentials in endpoint_url are refused (it holds an '@')",
                             hint="put them in the environment (AWS_ACCESS_KEY_ID...) instead")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError("endpoint_url is not http(s)://host[:port]",
                             hint="give the endpoint alone, e.g. https://host:9000")
        if parts.query or parts.fragment:  # a pre-signed URL carries its signature here
            raise UsageError("a query string in endpoint_url is refused (it may carry a "
                             "credential)", hint="give the endpoint alone, e.g. https://host:9000")
    return checked


class RemoteRegistry:
    """The ``remotes.json`` of one store directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.path = self.root / FILE_NAME

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"format": FORMAT, "remotes": {}, "pulled": {}}
        except ValueError as exc:
            raise UsageError(
                f"{self.path} is not valid JSON: {exc}",
                hint="fix or remove the file; it only holds remote names and URLs") from None
        data.setdefault("remotes", {})
        data.setdefault("pulled", {})
        return data

    @contextmanager
    def editing(self) -> Iterator[dict[str, Any]]:
        """Yield the parsed file under the lock; write it back atomically if the block succeeds."""
        (self.root / "locks").mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "locks" / "remotes.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = self.load()
            yield data
            temp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
            # 0600: URLs and options carry no secrets, but where data is shared is nobody else's
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(out, "w") as handle:
                handle.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
            os.chmod(temp, 0o600)
            os.replace(temp, self.path)
        finally:
            os.close(fd)

    def get(self, name: str) -> RemoteConfig:
        """The remote called ``name``.

        Raises:
            UnknownRemote: no such remote is configured.
        """
        remotes = self.load()["remotes"]
        if name not in remotes:
            raise UnknownRemote(name, sorted(remotes))
        entry = remotes[name]
        return RemoteConfig(name, entry["url"], entry["scheme"], entry.get("options", {}),
                            bool(entry.get("cache", True)))

    def all(self) -> list[RemoteConfig]:
        remotes = self.load()["remotes"]
        return [self.get(name) for name in sorted(remotes)]

    def add(self, name: str, url: str, options: Mapping[str, str] | None = None,
            replace: bool = False, cache: bool | None = None) -> RemoteConfig:
        """Configure a remote; refuse an existing name unless ``replace``.

        ``cache=False`` makes it pull-only: never asked as a binary cache, and what is pulled
        from it records no derivations (a stranger's lineage is not a cache answer). None: a
        cache for a directory or S3 remote (a team's own), pull-only for the Hub (anyone's).
        """
        check_remote_name(name)
        scheme, normal = parse_url(url)
        if cache is None:
            cache = get_scheme(scheme).cache
        opts = check_options(scheme, options or {})
        with self.editing() as data:
            if name in data["remotes"] and not replace:
                raise UsageError(
                    f"remote {name!r} already exists",
                    hint="remove it first (vbstore remote remove NAME) or pass --replace")
            data["remotes"][name] = {"url": normal, "scheme": scheme, "options": opts,
                                     "cache": cache}
        return RemoteConfig(name, normal, scheme, opts, cache)

    def remove(self, name: str) -> None:
        with self.editing() as data:
            if name not in data["remotes"]:
                raise UnknownRemote(name, sorted(data["remotes"]))
            del data["remotes"][name]

    def note_pull(self, local_ref: str, remote: RemoteConfig, ref: str, oid: str,
                  revision: str | None) -> dict[str, Any]:
        """Remember where a pulled ref came from (no credentials: URLs never carry any)."""
        entry = {"remote": remote.name, "url": remote.url, "ref": ref, "id": oid,
                 "revision": revision, "pulled_at": time.time()}
        with self.editing() as data:
            data["pulled"][local_ref] = entry
        return entry

    def pulled(self) -> dict[str, dict[str, Any]]:
        """Local ref → where it was pulled from (remote, URL, ref, id, revision, time)."""
        return dict(self.load()["pulled"])
