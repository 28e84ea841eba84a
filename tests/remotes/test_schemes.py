"""A remote scheme registers once (``register_remote_scheme``): its URLs then parse, its
options are checked, and opening a remote of it goes through it; the built-ins are three."""

from __future__ import annotations

import pytest

from vbstore.errors import UsageError
from vbstore.remotes import _schemes
from vbstore.remotes._config import RemoteRegistry, parse_url
from vbstore.remotes._fsspec import DirRemote
from vbstore.remotes._open import open_remote
from vbstore.remotes._schemes import RemoteScheme, register_remote_scheme


@pytest.fixture
def sandbox(monkeypatch):
    _schemes.get_scheme("dir")  # the built-ins first
    monkeypatch.setattr(_schemes, "_SCHEMES", dict(_schemes._SCHEMES))


def test_the_built_in_schemes_parse_as_before(tmp_path):
    assert parse_url(str(tmp_path)) == ("dir", f"file://{tmp_path}")
    assert parse_url("s3://bucket/a/b/") == ("s3", "s3://bucket/a/b")
    assert parse_url("hf://me/repo") == ("hf", "hf://me/repo")
    with pytest.raises(UsageError, match="unsupported remote URL"):
        parse_url("gopher://x")
    assert _schemes.get_scheme("hf").cache is False


@pytest.mark.usefixtures("sandbox")
def test_a_new_scheme_parses_checks_and_opens(tmp_path):
    opened = []

    def normalise(parts, url):
        return "box://" + parts.path

    def open_box(config):
        opened.append(config.url)
        return DirRemote(config.__class__(config.name, "file://" + config.url[len("box://"):],
                                          "dir", {}, config.cache))

    with pytest.raises(UsageError, match="unsupported remote URL"):
        parse_url(f"box://{tmp_path}")
    register_remote_scheme(RemoteScheme("box", ("box",), ("shelf",), normalise, open_box))
    assert parse_url(f"box://{tmp_path}") == ("box", f"box://{tmp_path}")
    store_root = tmp_path / "store"
    store_root.mkdir()
    remotes = RemoteRegistry(store_root)
    with pytest.raises(UsageError, match="unknown option 'region' for a box remote"):
        remotes.add("b", f"box://{tmp_path}/r", {"region": "x"})
    config = remotes.add("b", f"box://{tmp_path}/r", {"shelf": "top"})
    assert (config.scheme, config.cache) == ("box", True)
    assert isinstance(open_remote(store_root, "b"), DirRemote)
    assert opened == [f"box://{tmp_path}/r"]
    with pytest.raises(UsageError, match="URL scheme 'box' already means a box remote"):
        register_remote_scheme(RemoteScheme("box2", ("box",), (), normalise, open_box))
