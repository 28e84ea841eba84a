"""Fine-tuning's artifacts carry their question and are checked on arrival and on use (issue 32):
a prefix names its manifest and the image of each row, a fine-tuned head's weights name their
parent. Each attack is the issue's, on test_vit's random weights and scikit-learn digits."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import vbstore
from vbstore import Store
from vbstore.engine import resolve_backbone
from vbstore.engine._finetune import prefix_spec
from vbstore.errors import HeadMismatch, MisfiledAnswer
from vbstore.heads import export_head, head_problems, head_record, import_head, save_head
from vbstore.remotes import add_remote, push
from vbstore.store import derivation_key, read_safetensors_header, to_safetensors_bytes

LIMIT = 3  # per class: 30 train and 30 eval digits
QUICK = {"epochs": 2, "batch_size": 16}


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _ask(store, **kw):
    kw.setdefault("finetune_blocks", 1)
    kw.setdefault("params", QUICK)
    return vbstore.get_result("test_vit", "classification", "sklearn:digits", "sklearn:digits",
                              split="val", train_split="train", limit=LIMIT, train_limit=LIMIT,
                              weights="random", store=store, progress=False, **kw)


def _eval_spec(store, result):
    return prefix_spec(result.record.inputs["backbone"], result.record.eval_data["manifest"], 1)


def _rolled(store, prefix: str, names: bool = True) -> str:
    """The prefix with its rows rolled by one, each row still naming the image it holds
    (``names=False``: the header's image ids left in the manifest's order)."""
    header, offset = read_safetensors_header(store.path(prefix))
    meta = {k: v for k, v in header["__metadata__"].items() if k != "vbstore.kind"}
    shape = header["activations"]["shape"]
    data = np.frombuffer(store.read_bytes(prefix)[offset:], np.float32).reshape(shape)
    if names:
        meta["images"] = json.dumps(list(np.roll(json.loads(meta["images"]), 1)),
                                    separators=(",", ":"))
    return store.put_bytes(to_safetensors_bytes({"activations": np.roll(data, 1, axis=0)},
                                                "prefix", meta), "prefix")


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """A store holding one honest fine-tuned result."""
    store = Store(tmp_path_factory.mktemp("gate") / "a")
    return store, _ask(store)


@pytest.mark.parametrize("forged", ["rolled", "rolled, names kept", "train prefix"])
def test_a_cache_remote_prefix_that_answers_another_question_is_refused(first, tmp_path,
                                                                        forged):
    """The issue: rolled rows gave 0.36/0.76 under the true result's key; a genuine train
    prefix served for the eval key was recorded. Each is refused (a cache miss: rows naming
    other images by the gate, rows holding other activations than their images give by the
    spot check) and the receiver computes the true eval prefix: the true numbers."""
    honest, result = first
    spec = _eval_spec(honest, result)
    evil = Store(tmp_path / "evil")
    truth = _ask(evil)
    bad = (truth.record.inputs["train_prefix"] if forged == "train prefix"
           else _rolled(evil, evil.lookup(derivation_key(spec)), forged == "rolled"))
    evil.record(spec, bad)  # the remote's derivation file names it as the eval prefix
    evil.tag("evil", bad)
    add_remote(evil, "team", str(tmp_path / "team"))
    push(evil, "team", "evil")

    receiver = Store(tmp_path / "b")
    add_remote(receiver, "team", str(tmp_path / "team"))
    got = _ask(receiver)
    assert got.metrics == result.metrics
    assert receiver.lookup(derivation_key(spec)) != bad
    assert receiver.lookup(derivation_key(spec)) == honest.lookup(derivation_key(spec))


@pytest.mark.parametrize("origin", ["pulled from team", "remote team"])
def test_a_prefix_from_outside_gets_the_activation_check_however_it_came(first, tmp_path,
                                                                         origin):
    """The activation spot check ran only on a prefix the binary cache answered in the same
    run: one a pull recorded, or a cache answer recorded by a run killed before its check,
    was used as it was (rolled rows whose header keeps the images in order: other numbers).
    Now the gate's row for prefixes runs it at first use whatever the recorded origin says,
    once; a plain pull of a prefix ref stores it but records no answer, so it is never used
    unchecked either."""
    from vbstore.remotes import pull

    honest, result = first
    spec = _eval_spec(honest, result)
    key = derivation_key(spec)
    evil = Store(tmp_path / "evil")
    _ask(evil)
    bad = _rolled(evil, evil.lookup(key), names=False)
    evil.record(spec, bad)
    evil.tag("evil", bad)
    add_remote(evil, "team", str(tmp_path / "team"))
    push(evil, "team", "evil")

    receiver = Store(tmp_path / "b")
    add_remote(receiver, "team", str(tmp_path / "team"), cache=False)
    pull(receiver, "team/evil")  # its image ids agree with the manifest: stored
    assert receiver.has(bad)
    assert receiver.lookup(key) is None  # a plain pull records no prefix answer
    # what a pull or an unfinished cache answer leaves: the answer recorded from outside
    _ask(receiver)
    receiver.record(spec, bad, origin=origin)
    got = _ask(receiver, backbone_lr=1e-3)  # a new head: the eval prefix is read
    assert got.record.inputs["eval_prefix"] == honest.lookup(key)
    assert got.metrics == _ask(honest, backbone_lr=1e-3).metrics
    assert receiver.origin(key) == "computed"
    # an honest one from outside is checked once, and the record says so
    receiver.record(spec, honest.lookup(key), origin=origin)
    _ask(receiver, backbone_lr=1e-2)
    assert receiver.origin(key) == f"{origin}, activations checked"


def test_a_recorded_train_prefix_under_the_eval_key_is_refused_found_and_repaired(tmp_path):
    """The issue: a recorded train prefix under the eval key made every later run fail (exit
    2), surviving fsck --repair. Now it is refused on use with the fix named, fsck finds it,
    --repair forgets it, and the next run computes the true prefix."""
    store = Store(tmp_path / "s")
    result = _ask(store)
    spec = _eval_spec(store, result)
    true_prefix = store.lookup(derivation_key(spec))
    store.record(spec, result.record.inputs["train_prefix"])
    with pytest.raises(MisfiledAnswer, match="manifest") as refused:
        _ask(store, backbone_lr=1e-3)  # a new head: the eval prefix is read
    assert refused.value.exit_code == 10
    assert "fsck --repair" in refused.value.hint
    store.close()

    from vbstore.cli import cli

    runner = CliRunner()
    found = runner.invoke(cli, ["--store", str(tmp_path / "s"), "fsck", "--json"])
    assert found.exit_code == 1, found.output
    assert derivation_key(spec) in found.output
    repaired = runner.invoke(cli, ["--store", str(tmp_path / "s"), "fsck", "--repair"])
    assert repaired.exit_code in (0, 1), repaired.output
    assert runner.invoke(cli, ["--store", str(tmp_path / "s"), "fsck"]).exit_code == 0

    store = Store(tmp_path / "s")
    again = _ask(store, backbone_lr=1e-3)
    assert store.lookup(derivation_key(spec)) == true_prefix
    assert again.record.inputs["eval_prefix"] == true_prefix


def _moved(store, head_id: str, seed: int) -> str:
    """The issue's edit: the head's compatibility record names backbone ``seed``'s weights,
    its fine-tuned weights (trained on seed 0) left as they are."""
    other = resolve_backbone(store, "test_vit", weights="random", seed=seed)
    record = head_record(store, head_id)
    weights = store.read_json(other.doc["weights"])["tensor_hash"]
    from safetensors.torch import load

    state = load(store.read_bytes(head_id))
    return save_head(store, state, {**record, "backbone": other.id, "weights": weights})


def test_a_finetuned_head_cannot_move_onto_another_parent(first, tmp_path):
    """The issue: applied to seed 1, the edited head was recorded comparable while its
    fine-tuned weights name seed 0 as parent."""
    store, result = first
    moved = _moved(store, result.record.inputs["head"], 1)
    problems = head_problems(store, moved)  # what pull head checks
    assert any("parent" in p for p in problems), problems
    export_head(store, moved, tmp_path / "moved.safetensors")
    with pytest.raises(HeadMismatch, match="parent backbone"):
        import_head(store, tmp_path / "moved.safetensors", name="moved")
    assert "moved" not in store.refs()
    with pytest.raises(HeadMismatch, match="parent backbone"):
        vbstore.get_result("test_vit", "classification", "sklearn:digits", split="val",
                           limit=LIMIT, weights="random", backbone_seed=1, head=moved,
                           store=store, progress=False)
    # the honest head still applies to its own parent
    applied = vbstore.get_result("test_vit", "classification", "sklearn:digits", split="val",
                                 limit=LIMIT, weights="random", head=result.record.inputs["head"],
                                 store=store, progress=False)
    assert applied.metrics == result.metrics


def test_a_moved_finetuned_head_is_refused_at_the_gate_of_a_pull(first, tmp_path):
    store, result = first
    moved = _moved(store, result.record.inputs["head"], 1)
    store.tag("heads/moved", moved)
    add_remote(store, "team2", str(tmp_path / "team"))
    push(store, "team2", "heads/moved", include=[*_needs(store, moved)])
    receiver = Store(tmp_path / "b")
    add_remote(receiver, "team", str(tmp_path / "team"))
    from vbstore.remotes import TamperedBlob

    with pytest.raises(TamperedBlob, match="parent backbone"):
        vbstore.remotes.pull(receiver, "team/heads/moved")
    assert "heads/moved" not in receiver.refs()
    assert not receiver.has(moved)


def _needs(store, head_id):
    from vbstore.heads import head_dependencies

    return head_dependencies(store, head_id)
