"""Probe heads and remotes end to end, as a user runs them: ``vbstore`` through click's CliRunner.

Two (or three) stores on one machine stand for teammates; a directory or the test Hub server in
``hub_server.py`` is what they share. Every backbone is a tiny registered ``test_*`` one with
random weights, on a few generated 32-pixel shapes, so a head trains in about a second.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import time

import pytest
import yaml
from click.testing import CliRunner
from remotes_support import HF_SECRET, store_state

from vbstore import Store, canonical
from vbstore.heads import HeadMismatchWarning
from vbstore.remotes import Entry, registry
from vbstore.remotes._closure import ref_document
from vbstore.store import fsck

BACKBONE = ("-b", "test_cnn", "--weights", "random", "--input-size", "32")
HUB_REPO = "user/heads"


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    """Generated data D: ``D/{train,val}/<shape>/*.png``, four images per class and split."""
    return shapes_folder(4, 0)


@pytest.fixture
def vb(tmp_path):
    """``vb("a", "get", "head", ...)`` runs ``vbstore --store <tmp>/a get head ...``."""
    from vbstore.cli import cli

    runner = CliRunner()

    def invoke(store: str, *args: str):
        return runner.invoke(cli, ["--store", str(tmp_path / store), *args])

    return invoke


@pytest.fixture
def vbj(vb):
    """Like ``vb`` with ``--json``; asserts success and returns the parsed output."""

    def invoke(store: str, *args: str):
        result = vb(store, *args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return invoke


@pytest.fixture
def team(tmp_path, vbj):
    """Directory remote ``team`` configured in stores a and b; returns its path."""
    for store in ("a", "b"):
        vbj(store, "remote", "add", "team", str(tmp_path / "team"))
    return tmp_path / "team"


@pytest.fixture
def my_head(vbj, shapes):
    """A classification head trained in store a on D's train split, tagged ``my-head``."""
    return vbj("a", "get", "head", *BACKBONE, "-t", "classification", "--train-data", shapes,
               "--train-split", "train", "--tag", "my-head")


@pytest.fixture
def counted(monkeypatch):
    """Counts forward passes over data (``Backbone.extract``) and head fits.

    The one-image all-zero batch a backbone runs on itself when a store first resolves its spec
    (``Backbone._probe_geometry``) is not a pass over data and is not counted.
    """
    from vbstore.backbones._base import Backbone
    from vbstore.tasks.classification import LinearClassification

    calls = {"extract": 0, "fit": 0}
    extract, fit = Backbone.extract, LinearClassification.fit

    def counting_extract(self, images, *args, **kwargs):
        if len(images) != 1 or bool(images.any()):
            calls["extract"] += 1
        return extract(self, images, *args, **kwargs)

    def counting_fit(self, *args, **kwargs):
        calls["fit"] += 1
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(Backbone, "extract", counting_extract)
    monkeypatch.setattr(LinearClassification, "fit", counting_fit)
    return calls


def _evaluate(vbj, store: str, shapes: str, *extra: str) -> dict:
    return vbj(store, "get", "result", *BACKBONE, "-t", "classification", "-d", shapes,
               "--split", "val", *extra)


def _state(tmp_path, name: str) -> tuple:
    with Store(tmp_path / name) as store:
        return store_state(store)


def _pulled(root) -> dict:
    """What ``remotes.json`` says was pulled into the store at ``root``."""
    with Store(root) as store:
        return registry(store).pulled()


# ---- 1. a head shared through a directory remote -------------------------------------------

def test_head_pushed_to_a_directory_is_pulled_and_applies_in_another_store(
        vbj, shapes, team, my_head, tmp_path):
    head = my_head["id"]
    assert my_head["record"]["task"] == "classification"
    assert vbj("a", "tag")["my-head"] == head
    pushed = vbj("a", "push", "head", "my-head", "--to", "team")
    assert pushed["id"] == head
    assert pushed["kind"] == "head"
    assert (team / "refs" / "my-head.json").is_file()
    assert (team / "objects" / head[:2] / head[2:]).is_file()

    pulled = vbj("b", "pull", "head", "team/my-head")
    assert pulled["id"] == head
    assert pulled["local_ref"] == "my-head"
    assert pulled["mismatch"] == []
    assert pulled["compat"] == my_head["record"]
    assert vbj("b", "tag") == {"my-head": head}

    theirs = _evaluate(vbj, "b", shapes, "--head", "my-head")
    ours = _evaluate(vbj, "a", shapes, "--head", "my-head")
    assert theirs["record"]["inputs"]["head"] == head
    assert theirs["record"]["comparable"] is True
    assert theirs["record"]["metrics"] == ours["record"]["metrics"]
    assert set(theirs["record"]["metrics"]) == {"top1"}  # five classes: no top5
    assert theirs["record"]["train_metrics"] == my_head["record"]["train_metrics"]
    with Store(tmp_path / "b") as b:  # the pulled head is verified and traceable in b too
        assert b.verify(head)
        assert fsck(b).clean


def test_push_head_carries_only_what_checks_and_uses_it_unless_asked(vbj, team, my_head,
                                                                       tmp_path):
    head = my_head["id"]
    with Store(tmp_path / "a") as a:
        kinds = {o.id: o.kind for o in a.ls()}
        backbone = my_head["record"]["backbone"]
        needed = {head, backbone, a.read_json(backbone)["weights"]}

    def pushed_kinds() -> dict[str, str]:
        found = {p.parent.name + p.name for p in (team / "objects").rglob("*") if p.is_file()}
        return {oid: kinds[oid] for oid in found}

    vbj("a", "push", "head", "my-head", "--to", "team")
    assert set(pushed_kinds()) == needed  # no pack, featureset or manifest: 25 KiB, not MBs
    pulled = vbj("b", "pull", "head", "team/my-head")
    assert pulled["mismatch"] == []
    assert pulled["compat"] == my_head["record"]

    vbj("a", "push", "head", "my-head", "--to", "team", "--with-lineage")
    assert {"pack", "featureset", "manifest"} <= set(pushed_kinds().values())


def test_a_pulled_head_keeps_its_backbone_records_through_gc(vbj, team, my_head, tmp_path):
    # the backbone and weights records pulled with a head are what it is checked with and what
    # a push passes on; nothing kept them, so `gc --grace 0` removed them and a push from there
    # sent the head alone (1 uploaded), without a word
    backbone = my_head["record"]["backbone"]
    vbj("a", "push", "head", "my-head", "--to", "team")
    vbj("b", "pull", "head", "team/my-head")
    vbj("b", "gc", "--grace", "0")
    with Store(tmp_path / "b") as b:
        weights = b.read_json(backbone)["weights"]
        assert b.has(weights)
    vbj("b", "remote", "add", "other", str(tmp_path / "other"))
    pushed = vbj("b", "push", "head", "my-head", "--to", "other")
    assert set(pushed["uploaded"]) == {my_head["id"], backbone, weights}


def test_pushing_a_head_without_its_backbone_record_says_so(vb, vbj, team, my_head, tmp_path):
    vbj("a", "push", "head", "my-head", "--to", "team")
    vbj("b", "pull", "ref", "team/my-head")  # a plain pull: no edge keeps the backbone record
    vbj("b", "gc", "--grace", "0")
    vbj("b", "remote", "add", "other", str(tmp_path / "other"))
    pushed = vb("b", "push", "head", "my-head", "--to", "other")
    assert pushed.exit_code == 0, pushed.output
    assert f"backbone record {my_head['record']['backbone'][:12]} is not in this store" in (
        pushed.stderr)


# ---- 2. a head for other weights is refused -------------------------------------------------

def test_head_applied_to_other_weights_is_refused_unless_not_strict(vb, vbj, shapes, my_head,
                                                                    tmp_path):
    other = ("--backbone-seed", "1", "--head", "my-head")
    refused = vb("a", "get", "result", *BACKBONE, "-t", "classification", "-d", shapes,
                 "--split", "val", *other)
    assert refused.exit_code == 11, refused.output
    assert "weights" in refused.stderr
    assert "--no-strict" in refused.stderr
    assert "Traceback" not in refused.output
    with Store(tmp_path / "a") as a:
        assert a.ls("result") == []  # a refusal records nothing

    with pytest.warns(HeadMismatchWarning, match="weights"):
        loose = _evaluate(vbj, "a", shapes, *other, "--no-strict")
    assert loose["record"]["comparable"] is False
    assert loose["record"]["inputs"]["head"] == my_head["id"]
    text = vb("a", "get", "result", *BACKBONE, "-t", "classification", "-d", shapes,
              "--split", "val", *other, "--no-strict")
    assert text.exit_code == 0, text.output
    assert "cached" in text.stdout  # stored once; the record still carries the warning
    assert "comparable with nothing" in text.stderr
    # the strict default still refuses after a loose result was stored
    assert vb("a", "get", "result", *BACKBONE, "-t", "classification", "-d", shapes,
              "--split", "val", *other).exit_code == 11


def test_pull_head_for_other_weights_is_refused_and_leaves_no_ref(vb, vbj, team, my_head):
    vbj("a", "push", "head", "my-head", "--to", "team")
    refused = vb("b", "pull", "head", "team/my-head", "--backbone", "test_cnn", "--weights",
                 "random", "--backbone-seed", "1")
    assert refused.exit_code == 11, refused.output
    assert "weights" in refused.stderr
    assert "my-head" not in vbj("b", "tag")

    # the same weights it was trained on are accepted
    vbj("c", "remote", "add", "team", str(team))
    fits = vbj("c", "pull", "head", "team/my-head", "--backbone", "test_cnn", "--weights", "random")
    assert fits["mismatch"] == []
    assert vbj("c", "tag") == {"my-head": my_head["id"]}


def test_refused_compatibility_check_keeps_a_head_pulled_before(vb, vbj, team, my_head):
    vbj("a", "push", "head", "my-head", "--to", "team")
    vbj("b", "pull", "head", "team/my-head")
    refused = vb("b", "pull", "head", "team/my-head", "--backbone", "test_cnn", "--weights",
                 "random", "--backbone-seed", "1")
    assert refused.exit_code == 11
    assert vbj("b", "tag") == {"my-head": my_head["id"]}


def test_refused_pull_head_leaves_no_note_of_a_pull(vb, vbj, team, my_head, tmp_path):
    vbj("a", "push", "head", "my-head", "--to", "team")
    assert vb("b", "pull", "head", "team/my-head", "--backbone", "test_cnn", "--weights",
              "random", "--backbone-seed", "1").exit_code == 11
    assert "my-head" not in _pulled(tmp_path / "b")


# ---- 3. a pickle posing as a head -----------------------------------------------------------

class _Tripwire:
    """Unpickling this creates a directory: proof that pickle was loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def test_pickle_posing_as_a_head_is_refused_and_never_loaded(vb, vbj, team, my_head, tmp_path):
    vbj("a", "push", "head", "my-head", "--to", "team")
    tripwire = tmp_path / "unpickled"
    payload = pickle.dumps({"weight": _Tripwire(str(tripwire))})
    empty = _state(tmp_path, "b")

    # the head's own object replaced by the pickle: it no longer hashes to the head's id
    blob = team / "objects" / my_head["id"][:2] / my_head["id"][2:]
    os.chmod(blob, 0o644)
    blob.write_bytes(payload)
    swapped = vb("b", "pull", "head", "team/my-head")
    assert swapped.exit_code == 10, swapped.output
    assert "refused" in swapped.stderr
    assert my_head["id"][:12] in swapped.stderr
    assert "Traceback" not in swapped.output

    # a ref whose id is the pickle's own hash: the hash is right, the content is not a head
    oid = canonical.digest(payload)
    (team / "objects" / oid[:2]).mkdir(exist_ok=True)
    (team / "objects" / oid[:2] / oid[2:]).write_bytes(payload)
    entry = Entry(oid, "head", len(payload), (), None)
    (team / "refs" / "evil.json").write_bytes(ref_document("evil", entry, [entry]))
    disguised = vb("b", "pull", "head", "team/evil")
    assert disguised.exit_code == 10, disguised.output
    assert "claims kind head" in disguised.stderr

    assert not tripwire.exists()
    assert _state(tmp_path, "b") == empty
    assert list((tmp_path / "b" / "tmp").iterdir()) == []


# ---- 4. the binary cache -------------------------------------------------------------------

def test_pushed_result_is_a_cache_hit_in_another_store(vbj, shapes, team, counted, tmp_path,
                                                       monkeypatch):
    train = ("--train-data", shapes, "--train-split", "train")
    first = _evaluate(vbj, "a", shapes, *train)
    assert not first["from_cache"]
    assert first["source"] == "computed"
    assert counted["extract"] > 0
    assert counted["fit"] == 1
    pushed = vbj("a", "push", "results", "--to", "team")
    assert pushed["results"] == [first["id"]]
    # the result and its lineage documents only: no features, no head (see
    # test_push_results_says_what_it_sends); the cache hit below needs nothing more
    assert set(pushed["sent"]) <= {"result", "manifest", "backbone", "weights"}

    counted.update(extract=0, fit=0)
    import vbstore.backbones

    def no_build(*args, **kwargs):
        raise AssertionError("store b built a backbone to find a result its remote has")

    monkeypatch.setattr(vbstore.backbones, "build_backbone", no_build)
    monkeypatch.setattr("vbstore.engine._backbone.build_backbone", no_build)  # where it is called
    hit = _evaluate(vbj, "b", shapes, *train)
    assert hit["from_cache"] is True
    assert (hit["source"], hit["remote"]) == ("remote", "team")  # says from where
    assert hit["id"] == first["id"]
    assert hit["record"]["metrics"] == first["record"]["metrics"]
    assert counted == {"extract": 0, "fit": 0}
    again = _evaluate(vbj, "b", shapes, *train)  # now a plain local hit
    assert again["from_cache"]
    assert again["source"] == "store"
    assert "remote" not in again
    assert again["id"] == first["id"]
    with Store(tmp_path / "b") as b:
        assert b.verify(first["id"])
        assert b.derivation_of(first["id"]) is not None


def test_a_dry_run_says_a_result_on_a_remote_needs_nothing_under_it(vb, vbj, shapes, team):
    train = ("--train-data", shapes, "--train-split", "train")
    _evaluate(vbj, "a", shapes, *train)
    vbj("a", "push", "results", "--to", "team")
    plan = _evaluate(vbj, "b", shapes, *train, "--dry-run")
    steps = {(s["op"], s["role"]): s for s in plan["steps"]}
    assert (steps["result", ""]["status"], steps["result", ""]["remote"]) == ("remote", "team")
    under = [steps[k] for k in (("featureset", "eval"), ("featureset", "train"),
                                ("head", "seed 0"))]
    assert [(s["status"], s["remote"]) for s in under] == [("unneeded", "team")] * 3
    text = vb("b", "get", "result", *BACKBONE, "-t", "classification", "-d", shapes, "--split",
              "val", *train, "--dry-run").output
    assert "head (seed 0)          not needed (the result is on remote team)" in text


def test_pushed_featureset_is_fetched_instead_of_extracted(vbj, shapes, team, counted, tmp_path):
    features = ("get", "features", *BACKBONE, "-d", shapes, "--split", "val")
    made = vbj("a", *features)
    assert not made["from_cache"]
    assert counted["extract"] > 0
    vbj("a", "tag", "feats/val", made["featureset"])
    vbj("a", "push", "feats/val", "--to", "team")

    counted.update(extract=0)
    fetched = vbj("b", *features)
    assert fetched["from_cache"] is True
    assert fetched["featureset"] == made["featureset"]
    assert counted["extract"] == 0
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        packs = a.read_json(made["featureset"])["packs"]
        assert packs
        assert all(b.read_bytes(p, verify=True) == a.read_bytes(p) for p in packs)


# ---- 5. and 6. a head on the Hub -----------------------------------------------------------

@pytest.fixture
def hub_remote(hub, vbj, monkeypatch):
    """The test Hub with remote ``hub`` in stores a and b; records repo-creation payloads."""
    import hub_server

    created = []
    create = hub_server._Handler._create

    def recording(self, payload):
        created.append(payload)
        return create(self, payload)

    monkeypatch.setattr(hub_server._Handler, "_create", recording)
    for store in ("a", "b"):
        vbj(store, "remote", "add", "hub", f"hf://{HUB_REPO}")
    hub.created = created
    return hub


def _visibility(payload: dict) -> str | None:
    """What a repo-creation request asked for (huggingface_hub sends visibility or private)."""
    if "visibility" in payload:
        return payload["visibility"]
    if payload.get("private") is None:
        return None
    return "private" if payload["private"] else "public"


def test_head_pushed_to_the_hub_is_a_model_repo_and_pulls_by_revision(
        vbj, shapes, hub_remote, my_head, tmp_path):
    head = my_head["id"]
    pushed = vbj("a", "push", "head", "my-head", "--to", "hub", "--private")
    assert pushed["revision"] == hub_remote.head(HUB_REPO)
    assert [_visibility(c) for c in hub_remote.created] == ["private"]

    files = hub_remote.files(HUB_REPO)
    with Store(tmp_path / "a") as a:
        assert files["model.safetensors"] == a.read_bytes(head)
    info = json.loads(files["vbstore.json"])
    assert info["head"] == head
    assert info["compat"] == my_head["record"]
    front, _ = files["README.md"].decode().removeprefix("---\n").split("\n---", 1)
    card = yaml.safe_load(front)
    assert card["library_name"] == "vbstore"
    assert card["task"] == "classification"
    assert "test_cnn" in card["backbone"]
    assert "classification" in card["tags"]
    for name, data in files.items():
        assert HF_SECRET.encode() not in data, name

    # a second head replaces my-head on the Hub; the first push's commit still gives the first
    second = vbj("a", "get", "head", *BACKBONE, "-t", "classification", "--train-data", shapes,
                 "--train-split", "train", "--seed", "1")
    assert second["id"] != head
    vbj("a", "tag", "my-head", second["id"])
    later = vbj("a", "push", "head", "my-head", "--to", "hub")
    assert later["revision"] != pushed["revision"]

    pulled = vbj("b", "pull", "head", "hub/my-head", "--revision", pushed["revision"])
    assert pulled["id"] == head
    assert pulled["revision"] == pushed["revision"]
    assert vbj("b", "tag") == {"my-head": head}
    with Store(tmp_path / "b") as b:
        assert b.read_bytes(head, verify=True) == files["model.safetensors"]
        assert registry(b).pulled()["my-head"]["revision"] == pushed["revision"]
    assert HF_SECRET.encode() not in (tmp_path / "b" / "remotes.json").read_bytes()


def test_pull_head_offline_fails_at_once_and_changes_nothing(vb, vbj, hub_remote, my_head,
                                                             tmp_path, monkeypatch):
    vbj("a", "push", "head", "my-head", "--to", "hub")
    before = _state(tmp_path, "b")
    requests = len(hub_remote.state.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    offline = vb("b", "pull", "head", "hub/my-head")
    assert time.monotonic() - start < 5
    assert offline.exit_code == 6, offline.output
    assert "HF_HUB_OFFLINE" in offline.stderr
    assert len(hub_remote.state.requests) == requests  # not one request reached the Hub
    assert _state(tmp_path, "b") == before
    assert "my-head" not in _pulled(tmp_path / "b")


# ---- 7. fsck --repair re-fetches from a remote ---------------------------------------------

def test_fsck_repair_refetches_a_damaged_pack_from_the_remote(vb, vbj, shapes, team, tmp_path):
    train = ("--train-data", shapes, "--train-split", "train")
    result = _evaluate(vbj, "a", shapes, *train)
    vbj("a", "push", "results", "--to", "team", "--with", "features")
    with Store(tmp_path / "a") as a:
        pack = a.read_json(result["record"]["inputs"]["eval_features"])["packs"][0]
        path = a.path(pack)
        good = a.read_bytes(pack)
    assert (team / "objects" / pack[:2] / pack[2:]).is_file()
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))

    found = vb("a", "fsck")
    assert found.exit_code == 1
    assert "CORRUPT" in found.stdout
    assert pack in found.stdout

    repaired = vbj("a", "fsck", "--repair")
    assert repaired["corrupt"] == [pack]
    assert repaired["refetched"] == [pack]
    text = vb("a", "fsck")
    assert text.exit_code == 0, text.output
    assert "store is intact" in text.stdout
    with Store(tmp_path / "a") as a:
        assert a.read_bytes(pack, verify=True) == good
    again = _evaluate(vbj, "a", shapes, *train)
    assert again["from_cache"] is True
    assert again["id"] == result["id"]


def test_push_results_says_what_it_sends(vb, vbj, shapes, team, tmp_path):
    train = ("--train-data", shapes, "--train-split", "train")
    result = _evaluate(vbj, "a", shapes, *train)
    with Store(tmp_path / "a") as a:
        kinds = {o.id: (o.kind, o.size) for o in a.ls()}

    def on_remote() -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for path in (team / "objects").rglob("*"):
            if path.is_file():
                kind, size = kinds[path.parent.name + path.name]
                count, total = found.get(kind, (0, 0))
                found[kind] = (count + 1, total + size)
        return found

    pushed = vbj("a", "push", "results", "--to", "team")
    assert pushed["results"] == [result["id"]]
    sent = {k: (v["objects"], v["bytes"]) for k, v in pushed["sent"].items()}
    assert sent == on_remote()  # the summary counts exactly what went, by kind and bytes
    assert set(sent) == {"result", "manifest", "backbone", "weights"}
    assert {"pack", "featureset", "head"} <= set(pushed["left_out"])
    assert pushed["objects"] == sum(n for n, _ in sent.values())
    assert pushed["bytes"] == sum(b for _, b in sent.values())

    text = vb("a", "push", "results", "--to", "team", "--with", "features,heads")
    assert text.exit_code == 0, text.output
    first = text.stdout.splitlines()[0]
    assert first.startswith("pushed 1 results to team: ")
    assert f"{pushed['objects']} already there" in first
    assert re.search(r"^  pack +\d+ objects  ", text.stdout, re.M)
    assert re.search(r"^  head +1 objects  ", text.stdout, re.M)
    assert {"pack", "featureset", "head"} <= set(on_remote())
    bad = vb("a", "push", "results", "--to", "team", "--with", "everything")
    assert bad.exit_code == 2
    assert "features, heads, images" in bad.stderr


def test_a_finetuned_result_pushed_with_heads_is_pulled_and_its_head_applies(vb, vbj, shapes,
                                                                              team):
    """``--with heads`` carries the fine-tuned weights a head is applied through (and
    ``--with features`` the stored prefixes): the pulled head applies in another store."""
    data = ("-d", shapes, "--split", "val")
    made = vbj("a", "get", "result", *BACKBONE, "-t", "classification", *data, "--train-data",
               shapes, "--train-split", "train", "-p", "epochs=2", "-p", "batch_size=8",
               "--finetune-blocks", "1")
    pushed = vbj("a", "push", "results", "--to", "team", "--with", "heads")
    assert pushed["sent"]["finetuned"]["objects"] == 1
    assert "prefix" in pushed["left_out"]  # activations: --with features
    vbj("b", "pull", "ref", f"team/results/{made['id'][:16]}")
    applied = vbj("b", "get", "result", *BACKBONE, "-t", "classification", *data, "--head",
                  made["record"]["inputs"]["head"])
    assert applied["record"]["finetune"] == made["record"]["finetune"]
    assert applied["record"]["metrics"]["top1"] == made["record"]["metrics"]["top1"]
