"""Fine-tuning the last N blocks (docs/finetune.md): a derivation kept apart from frozen probes.

The frozen prefix is run once per image and stored; a second run with another backbone lr
runs no frozen block; seeded reruns are bit-identical, in another store too; the fine-tuned
weights hold only the tensors that changed; ``why``, gc and fsck know the new kinds.
"""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open

import vbstore
from vbstore import Store
from vbstore.engine import lineage
from vbstore.errors import CorruptObject, HeadMismatch, UsageError
from vbstore.heads import head_record, load_head
from vbstore.store import fsck, gc

LIMIT = 3  # per class: 30 train and 30 eval digits
QUICK = {"epochs": 3, "batch_size": 16}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: torch's thread pool only costs time on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A store holding one fine-tuned result (the last of test_vit's three blocks)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    store = Store(tmp_path_factory.mktemp("finetune") / "s")
    result = _ask(store)
    torch.set_num_threads(threads)
    return store, result


def _ask(store, **kw):
    kw.setdefault("finetune_blocks", 1)
    kw.setdefault("params", QUICK)
    return vbstore.get_result("test_vit", "classification", "sklearn:digits", "sklearn:digits",
                              split="val", train_split="train", limit=LIMIT, train_limit=LIMIT,
                              weights="random", store=store, progress=False, **kw)


@pytest.fixture
def patch_embeds(monkeypatch):
    """Counts data images through test_vit's patch embedding: every path through its frozen
    blocks starts there (the only Conv2d in the model). The zero image a model's construction
    and the split check pass through it is no data image and is not counted."""
    seen = []

    def hook(module, args, _output):
        if isinstance(module, torch.nn.Conv2d):
            seen.append(int((args[0].flatten(1).abs().sum(1) > 0).sum()))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    yield seen
    handle.remove()


def test_a_second_run_with_another_lr_runs_no_frozen_block(tuned, patch_embeds):
    store, first = tuned
    assert first.extracted == 60  # both splits through the frozen blocks, once per image
    assert first.record.finetune == {"blocks": 1, "backbone_lr": 1e-4}  # the task's lr / 100
    second = _ask(store, backbone_lr=1e-3)
    assert second.id != first.id
    assert second.extracted == 0
    assert sum(patch_embeds) == 0  # not one image through the frozen blocks again
    for role in ("train_prefix", "eval_prefix"):
        assert second.record.inputs[role] == first.record.inputs[role]
    assert second.record.finetune == {"blocks": 1, "backbone_lr": 1e-3}
    # another seed is another head over the same stored prefix
    third = _ask(store, backbone_lr=1e-3, seed=1)
    assert third.extracted == 0
    assert sum(patch_embeds) == 0


def test_the_frozen_blocks_are_counted_when_they_run(tmp_path, patch_embeds):
    _ask(Store(tmp_path / "s"))
    assert sum(patch_embeds) == 60  # the counter above sees what it is asked to count


def test_seeded_reruns_are_bit_identical_and_recompute_reproduces(tuned, tmp_path):
    one, first = tuned
    other = Store(tmp_path / "b")
    again = _ask(other)
    assert first.id == again.id  # every artifact under it is the same bytes in both stores
    weights = head_record(one, first.record.inputs["head"])["finetune"]["weights"]
    assert one.read_bytes(weights) == other.read_bytes(weights)
    redone = _ask(one, recompute=True)
    assert redone.id == first.id
    assert redone.reproduced is not None
    assert redone.reproduced["reproduced"]
    assert redone.reproduced["max_abs_diff"] == 0.0


def test_the_finetuned_weights_hold_only_the_last_blocks(tuned):
    store, result = tuned
    head = head_record(store, result.record.inputs["head"])
    weights_id = head["finetune"]["weights"]
    assert store.info(weights_id).kind == "finetuned"
    with safe_open(store.path(weights_id), "pt") as tensors:
        names = list(tensors.keys())
        meta = tensors.metadata()
    assert names
    assert all(name.startswith("blocks.2.") for name in names)
    parent = result.record.inputs["weights"]
    assert meta["weights"] == parent
    assert meta["blocks"] == "1"
    assert dict(store.children(weights_id))["weights"] == parent
    assert head["weights"] == store.read_json(parent)["tensor_hash"]  # pulled onto the parent
    # features under fine-tuned weights are their own featureset
    features = store.read_json(result.record.inputs["eval_features"])
    assert features["backbone"] == weights_id


def test_a_frozen_request_is_what_it_always_was(tuned):
    store, result = tuned
    frozen = _ask(store, finetune_blocks=0)
    assert frozen.record.finetune is None
    assert "finetune" not in store.read_json(frozen.id)
    assert result.id != frozen.id
    assert result.record.inputs["eval_features"] != frozen.record.inputs["eval_features"]


def test_why_gc_and_fsck_know_the_chain(tuned):
    store, result = tuned
    kinds = set()

    def walk(node):
        kinds.add(node["kind"])
        for child in node.get("inputs", []):
            walk(child)

    walk(lineage(store, result.id))
    assert {"prefix", "finetuned", "head", "weights", "manifest"} <= kinds
    gc(store, grace=0)
    again = _ask(store)
    assert again.from_cache
    assert again.id == result.id
    weights = head_record(store, result.record.inputs["head"])["finetune"]["weights"]
    assert store.has(weights)
    assert store.has(result.record.inputs["train_prefix"])
    report = fsck(store)
    assert not report.corrupt
    assert not report.missing
    assert not report.dangling_edges
    assert not report.unsafe
    assert not report.registry_errors


def test_multilabel_fine_tunes_on_the_same_stored_prefix(tuned):
    store, result = tuned
    labels = vbstore.get_result("test_vit", "multilabel", "sklearn:digits", "sklearn:digits",
                                split="val", train_split="train", limit=LIMIT,
                                train_limit=LIMIT, weights="random", params=QUICK, store=store,
                                progress=False, finetune_blocks=1)
    assert labels.record.finetune == {"blocks": 1, "backbone_lr": 1e-4}
    assert 0.0 <= labels.metrics["mean_average_precision"] <= 1.0
    assert labels.extracted == 0  # the prefix belongs to backbone, data and blocks, not a task
    assert labels.record.inputs["train_prefix"] == result.record.inputs["train_prefix"]


def test_a_cached_answer_with_notes_and_pooling_builds_no_model(tuned, monkeypatch):
    """The blocks check looks the answer up under the same key the plan does: notes and a
    requested pooling included, so a stored answer never builds the backbone to check it."""
    from vbstore.engine import _plan

    store, _ = tuned
    first = _ask(store, notes="run A", pooling="mean")
    built = []
    monkeypatch.setattr(_plan, "check_backbone_blocks", lambda *a: built.append(a))
    again = _ask(store, notes="run A", pooling="mean")
    assert again.from_cache
    assert again.id == first.id
    assert built == []


def _head_stats(store, result):
    from safetensors.torch import load

    state = load(store.read_bytes(result.record.inputs["head"]))
    return state["mean"], state["std"]


def test_finetuning_standardises_as_the_frozen_probe_does(tuned):
    """Classification's ``standardize`` (off by default) reaches the fine-tuned head, as it
    does the frozen one's; multilabel standardises, as its frozen probe always does."""
    store, result = tuned
    assert result.record.params["standardize"] is False
    mean, std = _head_stats(store, result)
    assert bool((mean == 0).all())
    assert bool((std == 1).all())
    on = _ask(store, params={**QUICK, "standardize": True})
    mean, std = _head_stats(store, on)
    assert not bool((mean == 0).all())
    assert not bool((std == 1).all())
    assert on.id != result.id
    labels = vbstore.get_result("test_vit", "multilabel", "sklearn:digits", "sklearn:digits",
                                split="val", train_split="train", limit=LIMIT,
                                train_limit=LIMIT, weights="random", params=QUICK, store=store,
                                progress=False, finetune_blocks=1)
    mean, std = _head_stats(store, labels)
    assert not bool((std == 1).all())


def test_a_damaged_prefix_is_found_by_fsck_and_never_trained_on(tmp_path):
    store = Store(tmp_path / "s")
    prefix = _ask(store).record.inputs["train_prefix"]
    path = store.path(prefix)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one activation changed
    path.write_bytes(bytes(data))
    assert prefix in fsck(store).corrupt
    with pytest.raises(CorruptObject):
        _ask(store, backbone_lr=1e-3)  # verified before a row is read


@pytest.mark.parametrize(("kw", "words"), [
    ({"backbone_lr": 1e-3, "finetune_blocks": 0}, "without finetune_blocks="),
    ({"finetune_blocks": 4}, "test_vit has 3 blocks"),
    ({"finetune_blocks": 1, "precision": "bf16"}, "fp32"),
])
def test_refusals_name_the_fix_and_store_nothing(tmp_path, kw, words):
    store = Store(tmp_path / "s")
    with pytest.raises(UsageError, match=words):
        _ask(store, **kw)
    assert not [row for row in store.db.query("SELECT kind FROM objects")
                if row[0] in ("manifest", "prefix", "finetuned", "head")]


def test_a_task_that_cannot_fine_tune_is_refused(tmp_path):
    with pytest.raises(UsageError, match="'knn' cannot fine-tune"):
        vbstore.get_result("test_vit", "knn", "sklearn:digits", "sklearn:digits", split="val",
                           train_split="train", limit=LIMIT, train_limit=LIMIT,
                           weights="random", store=Store(tmp_path / "s"), progress=False,
                           finetune_blocks=1)


def test_a_backbone_without_blocks_is_refused_before_anything_is_stored(tmp_path):
    store = Store(tmp_path / "s")
    with pytest.raises(UsageError, match="cannot be fine-tuned"):
        vbstore.get_result("test_pixels", "classification", "sklearn:digits", "sklearn:digits",
                           split="val", train_split="train", limit=LIMIT, train_limit=LIMIT,
                           store=store, progress=False, finetune_blocks=1)
    assert not [row for row in store.db.query("SELECT kind FROM objects")
                if row[0] in ("manifest", "prefix")]


def test_a_finetuned_head_is_applied_through_its_blocks_never_on_frozen_features(tuned):
    store, result = tuned
    head = vbstore.get_head("test_vit", "classification", "sklearn:digits", train_split="train",
                            train_limit=LIMIT, weights="random", params=QUICK, store=store,
                            progress=False, finetune_blocks=1)
    assert head.record.finetune["blocks"] == 1
    assert head.id == result.record.inputs["head"]  # the same derivation as a result's
    assert head.from_cache
    applied = vbstore.get_result("test_vit", "classification", "sklearn:digits", split="val",
                                 limit=LIMIT, weights="random", head=head.id, store=store,
                                 progress=False)
    assert applied.metrics == result.metrics
    assert applied.record.finetune == result.record.finetune
    assert applied.extracted == 0  # the stored eval prefix, through the fine-tuned block
    with pytest.raises(HeadMismatch, match="fine-tuned weights"):
        load_head(store, head.id, {"finetune": None})  # what frozen features expect


@pytest.mark.slow
def test_finetuning_the_last_block_beats_the_frozen_probe_where_features_are_weak(tmp_path):
    """A random test_vit on 10-class digits: its frozen last layer is weak (0.35 top1);
    training the last of its three blocks with the head lifts it (0.57 measured, +0.22 on
    450 eval digits, bootstrap low 0.52). Like for like: both heads on raw features
    (classification's ``standardize`` off, its default, reaches the fine-tuned head too)."""
    store = Store(tmp_path / "s")
    common = {"split": "val", "train_split": "train", "limit": 50, "train_limit": 50,
              "weights": "random", "store": store, "progress": False,
              "params": {"epochs": 30, "batch_size": 50, "standardize": False}}
    frozen = vbstore.get_result("test_vit", "classification", "sklearn:digits", "sklearn:digits",
                                **common)
    tuned = vbstore.get_result("test_vit", "classification", "sklearn:digits", "sklearn:digits",
                               finetune_blocks=1, backbone_lr=3e-3, **common)
    assert frozen.record.params["standardize"] is tuned.record.params["standardize"] is False
    margin = tuned.metrics["top1"] - frozen.metrics["top1"]
    assert frozen.metrics["top1"] < 0.5  # weak frozen features
    assert margin > 0.1, (frozen.metrics, tuned.metrics)
    assert tuned.record.sample_ci["top1"]["ci_low"] > frozen.metrics["top1"]
