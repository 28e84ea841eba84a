"""Heads as files (``export head`` / ``import head``) and the Hub's private-by-default push."""

from __future__ import annotations

import json
import pickle

import pytest
from click.testing import CliRunner
from remotes_support import store_state

from vbstore import Store

BACKBONE = ("-b", "test_cnn", "--weights", "random", "--input-size", "32")


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(4, 0)


@pytest.fixture
def vb(tmp_path):
    """``vb("a", ...)`` runs ``vbstore --store <tmp>/a ...``."""
    from vbstore.cli import cli

    runner = CliRunner()
    return lambda store, *args: runner.invoke(cli, ["--store", str(tmp_path / store), *args])


@pytest.fixture
def vbj(vb):
    def invoke(store: str, *args: str):
        result = vb(store, *args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return invoke


@pytest.fixture
def my_head(vbj, shapes):
    return vbj("a", "get", "head", *BACKBONE, "-t", "classification", "--train-data", shapes,
               "--train-split", "train", "--tag", "my-head")


def _evaluate(vbj, store: str, shapes: str, *extra: str) -> dict:
    return vbj(store, "get", "result", *BACKBONE, "-t", "classification", "-d", shapes,
               "--split", "val", *extra)


def test_exported_head_imports_with_its_id_and_applies(vbj, shapes, my_head, tmp_path):
    path = tmp_path / "my-head.safetensors"
    exported = vbj("a", "export", "head", "my-head", "-o", str(path))
    assert exported["id"] == my_head["id"]
    with Store(tmp_path / "a") as a:
        assert path.read_bytes() == a.read_bytes(my_head["id"])

    imported = vbj("b", "import", "head", str(path), "--backbone", "test_cnn", "--weights",
                   "random", "--input-size", "32")
    assert imported["id"] == my_head["id"]  # the same bytes: the same head anywhere
    assert imported["name"] == "my-head"
    assert imported["mismatch"] == []
    assert imported["compat"] == my_head["record"]
    theirs = _evaluate(vbj, "b", shapes, "--head", "my-head")
    ours = _evaluate(vbj, "a", shapes, "--head", "my-head")
    assert theirs["record"]["inputs"]["head"] == my_head["id"]
    assert theirs["record"]["metrics"] == ours["record"]["metrics"]


def test_import_for_other_weights_is_refused_and_changes_nothing(vb, vbj, my_head, tmp_path):
    path = tmp_path / "h.safetensors"
    vbj("a", "export", "head", "my-head", "-o", str(path))
    vbj("b", "tag")  # create store b
    with Store(tmp_path / "b") as b:
        before = store_state(b)
    refused = vb("b", "import", "head", str(path), "--backbone", "test_cnn", "--weights",
                 "random", "--backbone-seed", "1", "--input-size", "32")
    assert refused.exit_code == 11, refused.output
    assert "weights" in refused.stderr
    assert "these features come from" in refused.stderr  # named by spec, not only by hashes
    assert "random weights seed 1" in refused.stderr
    assert "Traceback" not in refused.output
    with Store(tmp_path / "b") as b:
        assert b.ls("head") == []
        assert b.refs() == before[1]
        # resolving --backbone records that backbone (as pull does); nothing else was added
        added = set(store_state(b)[0]) - set(before[0])
        assert {b.info(oid).kind for oid in added} <= {"backbone", "weights"}

    loose = vb("b", "import", "head", str(path), "--as", "loose", "--backbone", "test_cnn",
               "--weights", "random", "--backbone-seed", "1", "--input-size", "32",
               "--no-strict")
    assert loose.exit_code == 0, loose.output
    assert "comparable with nothing" in loose.stderr


def test_import_refuses_a_pickle_and_a_taken_name(vb, vbj, my_head, tmp_path):
    fake = tmp_path / "head.safetensors"
    fake.write_bytes(pickle.dumps({"weight": [1.0, 2.0]}))
    refused = vb("b", "import", "head", str(fake))
    assert refused.exit_code == 2, refused.output
    assert "not a vbstore head" in refused.stderr
    assert "pickle" in refused.stderr

    path = tmp_path / "h.safetensors"
    vbj("a", "export", "head", "my-head", "-o", str(path))
    vbj("b", "tag", "h", vbj("b", "get", "manifest", "shapes:per_class=1", "--split",
                             "val")["id"])
    taken = vb("b", "import", "head", str(path))
    assert taken.exit_code == 2, taken.output
    assert "--force" in taken.stderr
    moved = vbj("b", "import", "head", str(path), "--force")
    assert vbj("b", "tag")["h"] == moved["id"] == my_head["id"]


def test_export_refuses_what_is_not_a_head(vb, vbj, tmp_path):
    manifest = vbj("a", "get", "manifest", "shapes:per_class=1", "--split", "val")["id"]
    out = vb("a", "export", "head", manifest[:12], "-o", str(tmp_path / "x.safetensors"))
    assert out.exit_code == 2, out.output
    assert "not a head" in out.stderr
    assert not (tmp_path / "x.safetensors").exists()


@pytest.fixture
def hub_remote(hub, vbj, monkeypatch):
    """The test Hub with remote ``hub`` in store a; records repo-creation payloads."""
    import hub_server

    created = []
    create = hub_server._Handler._create

    def recording(self, payload):
        created.append(payload)
        return create(self, payload)

    monkeypatch.setattr(hub_server._Handler, "_create", recording)
    vbj("a", "remote", "add", "hub", "hf://user/heads")
    hub.created = created
    return hub


def _private(payload: dict) -> bool | None:
    if "visibility" in payload:
        return payload["visibility"] == "private"
    return payload.get("private")


def test_a_head_pushed_to_the_hub_is_private_unless_public(vbj, hub_remote, my_head):
    vbj("a", "push", "head", "my-head", "--to", "hub")
    vbj("a", "push", "head", "my-head", "--to", "hub", "--public")
    assert [_private(c) for c in hub_remote.created] == [True, False]


def test_metrics_from_puts_evaluation_metrics_on_the_card(vb, vbj, shapes, hub_remote, my_head):
    import yaml

    evaluated = _evaluate(vbj, "a", shapes, "--head", "my-head")
    # a result of another head (another seed): its numbers are not my-head's
    other = _evaluate(vbj, "a", shapes, "--train-data", shapes, "--train-split", "train",
                      "--seed", "1")
    refused = vb("a", "push", "head", "my-head", "--to", "hub", "--metrics-from", other["id"])
    assert refused.exit_code == 2, refused.output
    assert "not computed with head" in refused.stderr
    assert hub_remote.created == []  # refused before anything was created or uploaded

    vbj("a", "push", "head", "my-head", "--to", "hub", "--metrics-from", evaluated["id"][:12])
    card = hub_remote.files("user/heads")["README.md"].decode()
    front = yaml.safe_load(card.removeprefix("---\n").split("\n---", 1)[0])
    assert front["metrics"]["top1"] == evaluated["record"]["metrics"]["top1"]
    assert front["metrics"]["train_top1"] == my_head["record"]["train_metrics"]["train_top1"]
    assert evaluated["record"]["data"]["eval"]["manifest"] in card
