"""Small refusals of issue 21, each with its PoC: validators ended in ``$`` (a trailing newline
passed), fsck called a newer registry "damaged" and offered a rebuild that drops every ref, and
a registry missing a table passed fsck while ``--rebuild`` refused."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.errors import NewerRegistry, ObjectNotFound, UnsafeRemotePath, UsageError
from vbstore.remotes._paths import check_oid, check_ref, check_remote_name
from vbstore.store import _registry


@pytest.fixture
def tagged(tmp_path):
    root = tmp_path / "s"
    with Store(root) as store:
        oid = store.put_bytes(b"some bytes", "blob")
        store.tag("keep/me", oid)
    return root, oid


def _vb(root, *args):
    return CliRunner().invoke(cli, ["--store", str(root), *args])


def test_ids_and_names_with_a_trailing_newline_are_refused(tagged):
    root, oid = tagged
    with Store(root) as store:
        with pytest.raises(UsageError, match="bad ref name"):
            store.tag("name\n", oid)
        with pytest.raises(ObjectNotFound):
            store.resolve(oid[:8] + "\n")
        assert store.resolve(oid[:8]) == oid
    for bad in (oid + "\n", "a" * 64 + "\n"):
        with pytest.raises(UnsafeRemotePath):
            check_oid(bad)
    with pytest.raises(UnsafeRemotePath):
        check_ref("exp/result\n")
    with pytest.raises(UnsafeRemotePath):
        check_remote_name("team\n")
    assert check_ref("exp/result") == "exp/result"


def _set_version(root, version):
    conn = sqlite3.connect(root / "registry.db")
    conn.execute(f"PRAGMA user_version={version}")
    conn.close()


def test_fsck_on_a_newer_registry_says_upgrade_and_refuses_to_rebuild(tagged):
    root, oid = tagged
    current = _registry.MIGRATIONS[-1][0]
    _set_version(root, current + 1)
    for args in (("fsck",), ("fsck", "--rebuild")):
        result = _vb(root, *args)
        assert result.exit_code == NewerRegistry.exit_code == 11, result.output
        assert "made by a newer vbstore" in result.output
        assert "upgrade vbstore" in result.output
        assert "damaged" not in result.output.replace("`fsck --rebuild` is refused", "")
    assert not list(root.glob("registry.db.damaged-*"))  # nothing moved aside
    _set_version(root, current)
    with Store(root) as store:
        assert store.refs() == {"keep/me": oid}


def test_a_registry_missing_a_table_is_damaged_and_rebuilds(tagged):
    root, oid = tagged
    conn = sqlite3.connect(root / "registry.db")
    conn.execute("DROP TABLE derivations")
    conn.close()
    result = _vb(root, "fsck")
    assert result.exit_code == 1, result.output
    assert "derivations is missing from the registry" in result.output
    rebuilt = _vb(root, "fsck", "--rebuild")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert _vb(root, "fsck").exit_code == 0
    with Store(root) as store:
        assert [o.id for o in store.ls()] == [oid]


def test_an_intact_registry_still_refuses_a_rebuild(tagged):
    root, _ = tagged
    result = _vb(root, "fsck", "--rebuild")
    assert result.exit_code == 2
    assert "registry.db is intact" in result.output
    assert _registry.schema_problems(sqlite3.connect(root / "registry.db")) == []
