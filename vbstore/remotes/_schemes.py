"""Remote schemes: the kinds of place a store pushes to and pulls from (``dir``, ``s3``,
``hf``), each declared once.

A :class:`RemoteScheme` names the URL schemes it claims, the options it understands, how it
normalises a URL, whether it is a binary cache by default and how it opens a remote; parsing a
URL, checking options and opening a remote all ask this registry. A user's scheme registers
through :func:`register_remote_scheme`, as the built-ins do (``_schemes_builtin``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult

from ..errors import UsageError

# Local imports: the built-in schemes (._schemes_builtin) register the first time one is looked
# up, imported by name as the data layer's kinds are (their remotes import the configuration,
# which asks this registry).


@dataclass(frozen=True)
class RemoteScheme:
    """One kind of remote, declared once.

    Attributes:
        name: As the configuration records it (``dir``, ``s3``, ``hf``).
        url_schemes: The URL schemes it claims (``s3`` in ``s3://bucket``; ``""`` for a plain
            path).
        options: The options it understands; anything else is refused.
        normalise: ``(parts, url) -> url``: the URL as stored (raises ``UsageError`` on a
            malformed one).
        open: ``(config) -> Remote``: the remote, its client library imported here.
        local: A local path: credentials and query strings cannot be in its URL, so it is not
            checked for them.
        cache: Asked as a binary cache by default (a team's own place); False: pull-only (the
            Hub: anyone's).
        model_card: A head pushed there gets a model card and the files a Hub repository
            shows (``heads.hub_files``).
    """

    name: str
    url_schemes: tuple[str, ...]
    options: tuple[str, ...]
    normalise: Callable[[SplitResult, str], str]
    open: Callable[[Any], Any]
    local: bool = False
    cache: bool = True
    model_card: bool = False


_SCHEMES: dict[str, RemoteScheme] = {}


def register_remote_scheme(scheme: RemoteScheme) -> RemoteScheme:
    """Register ``scheme`` (a user's goes through here, as the built-ins do).

    Raises:
        UsageError: the name, or a URL scheme it claims, is taken.
    """
    if scheme.name in _SCHEMES:
        raise UsageError(f"remote scheme {scheme.name!r} is already registered",
                         hint="register yours under another name")
    for url_scheme in scheme.url_schemes:
        owner = next((s.name for s in _SCHEMES.values() if url_scheme in s.url_schemes), None)
        if owner is not None:
            raise UsageError(f"URL scheme {url_scheme!r} already means a {owner} remote",
                             hint="claim another URL scheme")
    _SCHEMES[scheme.name] = scheme
    return scheme


def get_scheme(name: str) -> RemoteScheme:
    """The registered scheme ``name`` (as a configuration records it).

    Raises:
        UsageError: no such scheme (a configuration written by a newer vbstore or a plugin).
    """
    _builtins()
    try:
        return _SCHEMES[name]
    except KeyError:
        raise UsageError(f"unknown remote scheme {name!r}",
                         hint=f"schemes: {', '.join(_SCHEMES)}") from None


def scheme_of_url(url_scheme: str) -> RemoteScheme | None:
    """The scheme that claims a URL scheme (``s3``), None when none does."""
    _builtins()
    return next((s for s in _SCHEMES.values() if url_scheme in s.url_schemes), None)


def _builtins() -> None:
    if "dir" not in _SCHEMES:
        import importlib

        importlib.import_module("._schemes_builtin", __package__)
