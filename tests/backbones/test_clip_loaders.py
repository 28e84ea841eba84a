"""Any CLIP-like model: a loader registered through the public API is a backbone every zero-shot
task and the linear probe accept, with the weights identity and caching of every backbone."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from torchvision import transforms

import vbstore
from vbstore.backbones import (
    BackboneAlreadyRegistered,
    InvalidSpec,
    model_types,
    register_clip_loader,
    with_model_type,
)
from vbstore.cli import cli
from vbstore.errors import UsageError
from vbstore.store import gc, rebuild_registry

SIZE = 16


class TinyClip(torch.nn.Module):
    """A random CLIP-like model: a linear image tower and a bag-of-tokens text tower."""

    def __init__(self) -> None:
        super().__init__()
        self.visual = torch.nn.Linear(3 * SIZE * SIZE, 8)
        self.words = torch.nn.Embedding(64, 8)

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return self.visual(images.flatten(1))

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        TEXTS.append(len(tokens))
        return self.words(tokens).mean(dim=1)


def tokenize(texts: list[str]) -> torch.Tensor:
    # deterministic across processes (str hashes are salted)
    ids = [[sum(map(ord, w)) % 64 for w in text.split()][:6] for text in texts]
    return torch.tensor([row + [0] * (6 - len(row)) for row in ids])


LOADS: list[tuple[str, str | None]] = []
TEXTS: list[int] = []  # the batch size of each call of a text tower


def load_tiny_clip(model_name, pretrained, cache_dir=None, device="cpu"):
    LOADS.append((model_name, pretrained))
    if pretrained is not None:  # "weights" of a tag: a fixed draw per tag
        torch.manual_seed(sum(map(ord, pretrained)))
    model = TinyClip()
    transform = transforms.Compose([
        transforms.Resize(SIZE, interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.CenterCrop(SIZE), transforms.ToTensor(),
        transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
    return model.to(device), transform, tokenize


@pytest.fixture(autouse=True, scope="module")
def tiny_clip():
    """``tiny_clip`` registered through the public API for this module's tests only."""
    from vbstore.backbones import _clip_loaders
    from vbstore.backbones._registry import unregister_backbone

    register_clip_loader("tiny_clip")(load_tiny_clip)
    yield
    unregister_backbone("tiny_clip")
    _clip_loaders._LOADERS.pop("tiny_clip")


def test_a_model_type_is_a_backbone_source():
    assert "tiny_clip" in model_types()
    assert model_types()[0] == "open_clip"
    assert with_model_type("tiny@v1", "tiny_clip") == "tiny_clip:tiny@v1"
    assert with_model_type("tiny,v1", "tiny_clip") == "tiny_clip:tiny@v1"  # CLIP_benchmark's
    assert with_model_type("ViT-B-32@openai", "open_clip") == "open_clip:ViT-B-32@openai"
    with pytest.raises(UsageError, match="names the source 'timm'"):
        with_model_type("timm:resnet18", "tiny_clip")
    with pytest.raises(BackboneAlreadyRegistered):
        register_clip_loader("tiny_clip")(load_tiny_clip)


def test_zero_shot_tasks_and_the_linear_probe_run_on_it(store, shapes):
    kw = dict(store=store, progress=False, split="val")
    zero = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes, **kw)
    assert set(zero.metrics) == {"acc1", "acc5", "mean_per_class_recall"}
    backbone = store.read_json(zero.record.inputs["backbone"])
    assert (backbone["source"], backbone["architecture"]) == ("tiny_clip", "tiny")
    assert backbone["preprocessing"]["input_size"] == SIZE
    assert backbone["preprocessing"]["std"] == [0.25, 0.25, 0.25]
    weights = store.read_json(backbone["weights"])
    assert weights["origin"] == "pretrained"
    assert weights["upstream"] == "tiny_clip:tiny@v1"
    probe = vbstore.get_result("tiny_clip:tiny@v1", "linear_probe", shapes, shapes,
                               train_split="train", **kw)
    assert probe.record.inputs["eval_features"] == zero.record.inputs["eval_features"]
    loads = len(LOADS)
    again = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes, **kw)
    assert again.id == zero.id
    assert len(LOADS) == loads  # cached: the loader is not called again
    # other weights are another backbone, never the same numbers under one id
    other = vbstore.get_result("tiny_clip:tiny@v2", "zeroshot_classification", shapes, **kw)
    assert other.record.inputs["backbone"] != zero.record.inputs["backbone"]
    random = vbstore.get_result("tiny_clip:tiny", "zeroshot_classification", shapes,
                                weights="random", **kw)
    assert random.record.weights_kind == "random"
    assert LOADS[-1] == ("tiny", None)


def test_the_cli_takes_model_type_and_refuses_what_it_cannot_read(shapes, tmp_path):
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    out = run("get", "result", "-b", "tiny,v1", "--model-type", "tiny_clip", "-t",
              "zeroshot_classification", "-d", shapes, "--split", "val", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["record"]["backbone"]["spec"] == "tiny_clip:tiny@v1"
    out = run("get", "result", "-b", "tiny", "--model-type", "nope_clip", "-t",
              "zeroshot_classification", "-d", shapes, "--split", "val")
    assert out.exit_code != 0
    assert "nope_clip" in out.output
    out = run("get", "result", "-b", "tiny_clip:tiny", "-t", "zeroshot_classification", "-d",
              shapes, "--split", "val")
    assert out.exit_code != 0
    assert "named by a tag" in out.output


def test_a_transform_vbstore_cannot_reproduce_is_refused():
    from vbstore.backbones.clip_model import cfg_from_transform

    flip = transforms.Compose([transforms.Resize(SIZE), transforms.RandomHorizontalFlip()])
    with pytest.raises(InvalidSpec, match="RandomHorizontalFlip"):
        cfg_from_transform(flip, "tiny_clip:tiny")
    cfg = cfg_from_transform(transforms.Compose([transforms.Resize((24, 24)),
                                                 transforms.ToTensor()]), "tiny_clip:tiny")
    assert (cfg.crop, cfg.input_size, cfg.mean) == ("squash", 24, (0.0, 0.0, 0.0))


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(6, 3)


def test_a_clip_benchmark_model_list_takes_the_model_type(tmp_path):
    from vbstore.engine import read_backbones_file

    models = tmp_path / "models.txt"
    models.write_text("tiny,v1\ntiny,v2\ntest_cnn\n")
    assert [e.backbone for e in read_backbones_file(models, "tiny_clip")] == [
        "tiny_clip:tiny@v1", "tiny_clip:tiny@v2", "test_cnn"]
    assert read_backbones_file(models)[0].backbone == "open_clip:tiny@v1"


def test_text_tower_outputs_are_stored_and_reused(store, shapes):
    kw = dict(store=store, progress=False)
    TEXTS.clear()
    first = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                               split="val", **kw)
    prompts = sum(TEXTS)
    assert prompts == 5 * 7  # five classes x the seven-prompt ensemble, embedded once
    # another split of the same classes, and another task on the same prompts: no text tower
    vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes, split="train",
                       **kw)
    vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes, split="val",
                       params={"classnames": ""}, seeds=2, **kw)
    assert sum(TEXTS) == prompts
    # other templates are other texts: embedded once more
    again = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                               split="val", params={"templates": "photo"}, **kw)
    assert sum(TEXTS) == prompts + 5
    assert again.id != first.id


def test_gc_keeps_the_text_tower_outputs_a_stored_result_used(store, shapes):
    from vbstore.engine._textcache import StoredTextEncoder

    kw = dict(store=store, progress=False, split="val")
    first = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes, **kw)
    used = [child for role, child in store.children(first.id) if role == "text_embeddings"]
    assert used
    assert {store.info(oid).kind for oid in used} == {"tensors"}
    # an edge, not a record input: the result document (and its id) is as it was
    assert not any(key.startswith("text") for key in first.record.inputs)
    # `vbstore why` shows them, with their shape and the derivation that made them
    from vbstore.engine import lineage

    shown = [n for n in lineage(store, first.id, depth=1)["inputs"]
             if n["role"] == "text_embeddings"]
    assert [n["id"] for n in shown] == used
    assert shown[0]["op"] == "text-embeddings v1"
    assert shown[0]["summary"].startswith("embeddings [")
    gc(store, grace=0)
    assert all(store.has(oid) for oid in used)
    # computed afresh (features and text read back): the text tower does not run
    TEXTS.clear()
    again = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                               recompute=True, **kw)
    assert (again.id, TEXTS) == (first.id, [])

    # an output no stored result used is a cache: collected, unless a ref pins it
    ref = type("Ref", (), {"id": first.record.inputs["backbone"],
                           "load": staticmethod(lambda: _TextOnly())})()
    encoder = StoredTextEncoder(store, ref)
    encoder(["a loose text"])
    encoder(["a pinned text"])
    loose, pinned = encoder.used
    store.tag("pinned-text", pinned)
    gc(store, grace=0)
    assert (store.has(loose), store.has(pinned)) == (False, True)
    assert all(store.has(oid) for oid in used)


def test_a_registry_rebuild_loses_the_text_tower_edges_as_documented(store, shapes):
    # docs/store.md (fsck --rebuild, what is lost): no blob names the text-tower outputs a
    # result read (an edge, not a record input, and a tensors object names no result), so a
    # rebuilt registry has no such edge; gc may then collect them, and a rerun recomputes them
    kw = dict(store=store, progress=False, split="val")
    first = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes, **kw)
    used = [child for role, child in store.children(first.id) if role == "text_embeddings"]
    assert used
    rebuild_registry(store, force=True)
    assert store.has(first.id)
    assert not [c for role, c in store.children(first.id) if role == "text_embeddings"]
    gc(store, grace=0)
    assert not any(store.has(oid) for oid in used)
    TEXTS.clear()
    again = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                               recompute=True, **kw)
    assert again.id == first.id
    assert sum(TEXTS) == 5 * 7  # the text tower ran again, to the same result
    assert sorted(c for role, c in store.children(again.id) if role == "text_embeddings") \
        == sorted(used)


def test_a_results_push_with_features_carries_the_text_tower_outputs(store, shapes, tmp_path):
    from vbstore.remotes import add_remote, push_results

    result = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                                split="val", store=store, progress=False)
    add_remote(store, "team", str(tmp_path / "team"))
    assert "tensors" in push_results(store, "team", [result.id]).left_out
    pushed = push_results(store, "team", [result.id], with_=("features",))
    used = [child for role, child in store.children(result.id) if role == "text_embeddings"]
    assert pushed.sent["tensors"]["objects"] == len(used)

    # what carrying them gives the receiver (docs/remotes.md): the result's lineage, whole...
    from vbstore import Store

    with Store(tmp_path / "b") as receiver:
        add_remote(receiver, "team", str(tmp_path / "team"))
        kw = dict(store=receiver, progress=False)
        hit = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                                 split="val", **kw)
        assert (hit.id, hit.from_cache) == (result.id, True)
        assert sorted(c for role, c in receiver.children(hit.id)
                      if role == "text_embeddings") == sorted(used)
        # ...not a cache: no derivation names them there, so the same prompts on another
        # split run the receiver's text tower again
        TEXTS.clear()
        vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                           split="train", **kw)
        assert sum(TEXTS) == 5 * 7


class _TextOnly:
    def encode_text(self, texts):
        return torch.full((len(texts), 8), float(len(texts[0])))  # other texts, other bytes


def test_a_text_row_pointed_at_another_prompt_sets_output_is_not_served(store, shapes,
                                                                        tmp_path):
    """Issue 32: text-tower outputs declared no question, so pointing one prompt set's row at
    another set's output (same count) gave other numbers under the same key, and fsck said
    intact. Each output now names its model and texts: the row is found by fsck, never
    served, and the text tower runs again to the true result."""
    import json

    from click.testing import CliRunner

    from vbstore.cli import cli

    other = tmp_path / "other.txt"
    other.write_text("art of the {c}.\n")
    kw = dict(store=store, progress=False, split="val")
    photo = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                               params={"templates": "photo"}, **kw)
    vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                       params={"templates": str(other)}, **kw)
    rows = store.db.query("SELECT key, spec, output FROM derivations WHERE op = ?",
                          ("text-embeddings",))
    assert len(rows) == 2
    assert len({json.loads(r[1])["params"]["count"] for r in rows}) == 1
    mine = next(r for r in rows if r[2] in {c for role, c in store.children(photo.id)
                                              if role == "text_embeddings"})
    theirs = next(r for r in rows if r is not mine)
    with store.db.write() as conn:  # the photo prompts' row now names the other set's output
        conn.execute("UPDATE derivations SET output = ? WHERE key = ?", (theirs[2], mine[0]))
    found = CliRunner().invoke(cli, ["--store", str(store.root), "fsck", "--json"])
    assert found.exit_code == 1, found.output
    assert mine[0] in found.output
    TEXTS.clear()
    again = vbstore.get_result("tiny_clip:tiny@v1", "zeroshot_classification", shapes,
                               params={"templates": "photo"}, recompute=True, **kw)
    assert (again.id, again.metrics) == (photo.id, photo.metrics)
    assert sum(TEXTS) == 5  # the photo prompts embedded again, not read from the other set's
    assert store.lookup(mine[0]) == mine[2]
