"""``captioning``: generated captions stored once per backbone, data and decoding, scored with
pycocoevalcap; refusals before the model writes a word. The scores equal CLIP_benchmark's own
evaluation in tests/interop/test_captioning_conformance.py."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time

import numpy as np
import open_clip
import pytest
import torch
from open_clip.tokenizer import _tokenizer
from PIL import Image
from torchvision import transforms

import vbstore
from vbstore.backbones import register_clip_loader
from vbstore.engine import BackboneRequest, DataRef, ProbeRequest, ResultRequest, plan
from vbstore.errors import MissingDependency, MissingTool, TaskInputError, UsageError
from vbstore.tasks import get_task

SIZE = 16
WORDS = ["a", "red", "dog", "on", "blue", "cat", "under", "green", "table", "the", "big", "box"]
# skipped only off CI: under CI (CI=true) a machine without them fails these tests instead
needs_scorers = pytest.mark.skipif(
    (shutil.which("java") is None or importlib.util.find_spec("pycocoevalcap") is None)
    and not os.environ.get("CI"),
    reason="needs pycocoevalcap (vbstore[captioning]) and java")


class TinyCaptioner(torch.nn.Module):
    """A CLIP-like model that also writes: each image's four best words, in open_clip's
    vocabulary (start and end tokens around them, zero padding), as CoCa's generate returns."""

    calls = 0

    def __init__(self) -> None:
        super().__init__()
        self.visual = torch.nn.Linear(3 * SIZE * SIZE, 4 * len(WORDS))
        self.text = torch.nn.Embedding(64, 8)
        self.project = torch.nn.Linear(4 * len(WORDS), 8)

    def encode_image(self, images):
        return self.project(self.visual(images.flatten(1)))

    def encode_text(self, tokens):
        return self.text(tokens).mean(dim=1)

    def generate(self, images, seq_len=30, **decoding):
        TinyCaptioner.calls += len(images)
        scores = self.visual(images.flatten(1)).view(len(images), 4, len(WORDS))
        rows = []
        for words in scores.argmax(dim=-1).tolist():
            ids = [49406, *(t for w in words for t in _tokenizer.encode(WORDS[w])), 49407]
            rows.append((ids + [0] * seq_len)[:seq_len])
        return torch.tensor(rows)


class Mute(torch.nn.Module):
    """A CLIP-like model that writes nothing (no generate)."""

    def __init__(self) -> None:
        super().__init__()
        self.visual = torch.nn.Linear(3 * SIZE * SIZE, 8)

    def encode_image(self, images):
        return self.visual(images.flatten(1))

    def encode_text(self, tokens):
        return torch.zeros(len(tokens), 8)


def _tokenize(texts):
    return torch.zeros(len(texts), 4, dtype=torch.long)


def _transform():
    return transforms.Compose([transforms.Resize(SIZE), transforms.CenterCrop(SIZE),
                               transforms.ToTensor(),
                               transforms.Normalize((0.5,) * 3, (0.25,) * 3)])


def load_captioner(model_name, pretrained, cache_dir=None, device="cpu"):
    torch.manual_seed(sum(map(ord, pretrained or "random")))
    model = Mute() if model_name == "mute" else TinyCaptioner()
    return model.to(device), _transform(), _tokenize


@pytest.fixture(scope="module", autouse=True)
def captioner():
    from vbstore.backbones import _clip_loaders
    from vbstore.backbones._registry import unregister_backbone

    register_clip_loader("cap_tiny")(load_captioner)
    yield
    unregister_backbone("cap_tiny")
    _clip_loaders._LOADERS.pop("cap_tiny")


@pytest.fixture(scope="module", autouse=True)
def one_meteor():
    """One running METEOR for the module's scorings. pycocoevalcap's ``Meteor()`` starts a JVM
    that loads METEOR's paraphrase tables before its first score (seconds: most of a scoring);
    its ``-stdio`` protocol scores each ``EVAL`` line from that line alone, so one process gives
    every scoring the numbers a fresh one gives. Each scoring still runs everything else afresh
    (the PTB tokenizer's java, Bleu, ROUGE_L, CIDEr), and the interop tests compare scores
    against CLIP_benchmark's with a fresh METEOR on both sides."""
    try:
        from pycocoevalcap.meteor import meteor
    except ImportError:  # the scorers' tests skip (or fail under CI) on their own
        yield
        return
    real, running = meteor.Meteor, []

    def shared():
        if not running:
            running.append(real())
        return running[0]

    patch = pytest.MonkeyPatch()
    patch.setattr(meteor, "Meteor", shared)
    yield
    patch.undo()
    running.clear()  # its __del__ ends the JVM


@pytest.fixture(scope="module")
def captions_list(tmp_path_factory):
    """Six random images and three references each; shared by the module, read only."""
    tmp_path = tmp_path_factory.mktemp("captions")
    rng = np.random.default_rng(0)
    lines = []
    for i in range(6):
        pixels = rng.integers(0, 256, size=(SIZE, SIZE, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
        refs = [" ".join(rng.choice(WORDS, size=4)) for _ in range(3)]
        lines.append(json.dumps({"image": f"{i}.png", "captions": refs}))
    (tmp_path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "samples.jsonl")


@pytest.fixture(scope="module")
def captioned(captions_list, tmp_path_factory):
    """The module's one beam-search captioning (no SPICE), scored at seeds 0 and 1 in a store
    of its own (each scoring starts java: seconds), and the model's ``generate`` calls each
    took; a test reads or extends a copy of that store (:func:`stored`)."""
    from vbstore import Store

    root = tmp_path_factory.mktemp("captioned") / "store"
    with Store(root) as store:
        TinyCaptioner.calls = 0
        first = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                                   params={"spice": False}, progress=False)
        first_calls = TinyCaptioner.calls
        # another seed: a new result, the same captions (beam search ignores it)
        again = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list,
                                   store=store, params={"spice": False}, seed=1,
                                   progress=False)
        again_calls = TinyCaptioner.calls - first_calls
    return {"root": root, "first": first, "again": again, "first_calls": first_calls,
            "again_calls": again_calls}


@pytest.fixture
def stored(captioned, tmp_path):
    """A copy of :func:`captioned`'s store, this test's own."""
    from vbstore import Store

    with Store(shutil.copytree(captioned["root"], tmp_path / "stored")) as s:
        yield s


def _request(data, **params):
    return ResultRequest(BackboneRequest("cap_tiny:tiny@v1"),
                         ProbeRequest("captioning", params=params), DataRef(data))


# -- the declaration ------------------------------------------------------------------------


def test_declaration_names_clip_benchmarks_metrics_and_open_clips_decoding():
    task = get_task("captioning")
    assert task.shape_spec.name == "generate"
    assert [m.name for m in task.metrics] == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR",
                                              "ROUGE_L", "CIDEr", "SPICE"]
    params = task.resolve_params({})
    # open_clip's CoCa.generate defaults: what CLIP_benchmark's model.generate(images) uses
    assert task.decoding(params, seed=3) == {
        "generation_type": "beam_search", "seq_len": 30, "min_seq_len": 5, "num_beams": 6,
        "num_beam_groups": 3, "repetition_penalty": 1.0, "temperature": 1.0, "top_k": 1,
        "top_p": 0.1}
    sampled = task.resolve_params({"generation_type": "top_k"})
    assert task.decoding(sampled, seed=3)["seed"] == 3  # sampling draws from the seed
    assert task.uses_seed(sampled)
    assert not task.uses_seed(params)
    assert "SPICE" not in [m.name for m in task.metrics_for({**params, "spice": False})]
    assert task.check_data({**params, "spice": False}, {}, None)  # the record says so
    with pytest.raises(UsageError, match="generation_type"):
        task.resolve_params({"generation_type": "greedy"})


def test_spice_false_leaves_spice_out_of_what_suites_and_listings_read(captions_list, store):
    # metrics_for is what suites, boards, listings and the answer cache read: a suite pinned to
    # spice=false must not ask for a SPICE its results never hold
    from vbstore.suites._new import new_suite
    from vbstore.tasks import metric_order

    assert "SPICE" not in metric_order("captioning", {"spice": False})
    assert metric_order("captioning", {})[-1] == "SPICE"  # a record with SPICE keeps it
    doc = new_suite(store, slug="cap", task="captioning", data=captions_list, split="samples",
                    params={"spice": False})
    keys = [m["key"] for m in doc["protocol"]["metrics"]]
    assert "SPICE" not in keys
    assert [m["key"] for m in doc["protocol"]["metrics"] if m["headline"]] == ["CIDEr"]


def test_no_java_is_refused_in_one_line(monkeypatch):
    task = get_task("captioning")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(MissingTool, match="java") as info:
        task.check_tools(task.resolve_params({"spice": False}))
    assert info.value.exit_code == 2
    assert "Java runtime" in info.value.hint


def test_spice_without_its_jars_names_the_download_and_the_way_around(monkeypatch):
    from vbstore.tasks import captioning

    task = get_task("captioning")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/java")
    monkeypatch.setattr(captioning, "SPICE_JARS", ("no-such-corenlp.jar",))
    with pytest.raises(MissingTool, match="CoreNLP") as info:
        task.check_tools(task.resolve_params({}))
    assert "get_stanford_models" in info.value.hint
    assert "spice=false" in info.value.hint
    task.check_tools(task.resolve_params({"spice": False}))  # without SPICE: nothing missing


def test_missing_pycocoevalcap_names_the_extra(monkeypatch):
    from vbstore.tasks import captioning

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependency, match="pycocoevalcap") as info:
        captioning.spice_ready()
    assert "vbstore[captioning]" in info.value.hint


def test_a_language_reaches_captioning_only_through_cb_data(captions_list):
    # the scorers read the captions as they are: a language changes the numbers only by
    # choosing which captions cb: data holds, so elsewhere it is refused, not keyed
    from vbstore.engine._language import with_language

    task = get_task("captioning")
    assert "language" not in task.params
    with pytest.raises(UsageError, match="--language fr reaches nothing"):
        with_language(task, {}, captions_list, None, "fr")
    with pytest.raises(UsageError, match="language"):
        task.resolve_params({"language": "fr"})
    assert with_language(task, {}, "cb:mscoco_captions", None, "fr") == (
        {}, "cb:mscoco_captions@fr", None)


def test_one_caption_per_image_or_refused():
    task = get_task("captioning")
    with pytest.raises(TaskInputError, match="2 generated captions for 1 images"):
        task.evaluate_captions(["a", "b"], [["a dog"]], {"spice": False})
    with pytest.raises(TaskInputError, match="no reference"):
        task.evaluate_captions(["a"], [[]], {"spice": False})


@needs_scorers
def test_perfect_captions_score_one():
    refs = [["a red dog on the table"], ["the big blue box under a cat"]]
    metrics = get_task("captioning").evaluate_captions([r[0] for r in refs], refs,
                                                       {"spice": False})
    assert list(metrics) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
    for name in ("Bleu_1", "Bleu_4", "ROUGE_L", "METEOR"):
        assert metrics[name] == pytest.approx(1.0, abs=1e-6), name


# -- stored and reused --------------------------------------------------------------------


@pytest.mark.slow  # each scoring starts java (PTB tokenizer, METEOR): seconds
@needs_scorers
def test_captions_are_written_once_and_scored_again_without_the_model(captioned, captions_list,
                                                                      stored):
    store = stored
    first = captioned["first"]
    assert captioned["first_calls"] == 6
    record = first.record
    assert set(record.metrics) == {"Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR",
                                   "ROUGE_L", "CIDEr"}
    assert any("SPICE not computed" in w for w in record.warnings or [])
    assert "eval_features" not in record.inputs  # the model wrote; nothing was extracted
    doc = json.loads(store.read_bytes(record.inputs["captions"]))
    assert doc["manifest"] == record.inputs["eval_manifest"]
    assert len(doc["captions"]) == 6
    assert all(doc["captions"])
    assert set(doc["captions"][0].split()) <= set(WORDS)

    # another seed: a new result, the same captions (beam search ignores it), no generate call
    again = captioned["again"]
    assert captioned["again_calls"] == 0
    assert again.id != first.id
    assert again.record.inputs["captions"] == record.inputs["captions"]
    assert again.metrics == first.metrics

    # exported as CLIP_benchmark writes its captioning results
    from vbstore.interop.clip_benchmark import clip_benchmark_export

    row = clip_benchmark_export(store, [first.id])[0]["record"]
    assert row["task"] == "captioning"
    assert row["metrics"] == first.metrics
    assert row["language"] == "en"

    # another decoding: written again
    longer = plan(_request(captions_list, spice=False, seq_len=12), store)
    assert [s.status for s in longer.steps if s.op == "captions"] == ["compute"]
    same = plan(ResultRequest(BackboneRequest("cap_tiny:tiny@v1"),
                              ProbeRequest("captioning", params={"spice": False}, seed=2),
                              DataRef(captions_list)), store)
    assert same.steps[-1].status == "compute"
    assert [(s.status, s.id) for s in same.steps if s.op == "captions"] == [
        ("stored", record.inputs["captions"])]
    assert not [s for s in same.steps if s.op == "featureset"]


def test_no_extractor_is_keyed_or_recorded(captions_list, store, monkeypatch):
    # nothing is extracted, so no pooling/layers/mode names the result (export, suite variants)
    from vbstore.tasks import captioning

    monkeypatch.setattr(captioning.Captioning, "check_tools", lambda self, params: None)
    monkeypatch.setattr(captioning.Captioning, "_evaluate_captions",
                        lambda self, generated, references, params: {
                            name: 0.5 for name in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4",
                                                   "METEOR", "ROUGE_L", "CIDEr")})
    planned = plan(_request(captions_list, spice=False), store)
    assert "extractor" not in planned.spec["params"]
    assert "features_op_version" not in planned.spec["params"]
    result = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                                params={"spice": False}, progress=False)
    assert result.record.extractor is None
    assert "extractor" not in store.read_json(result.id)


def test_a_model_that_writes_nothing_is_refused(captions_list, store, monkeypatch):
    from vbstore.tasks import captioning

    monkeypatch.setattr(captioning.Captioning, "check_tools", lambda self, params: None)
    with pytest.raises(UsageError, match="writes no captions") as info:
        vbstore.get_result("cap_tiny:mute@v1", "captioning", captions_list, store=store,
                           params={"spice": False}, progress=False)
    assert "coca_ViT-B-32" in info.value.hint
    assert not store.ls("result")


def test_no_java_refused_before_the_model_writes(captions_list, store, monkeypatch):
    TinyCaptioner.calls = 0
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(MissingTool, match="java"):
        vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                           params={"spice": False}, progress=False)
    assert TinyCaptioner.calls == 0


def _counts(store):
    """The store's objects and every registry table's rows."""
    tables = [t for (t,) in store.db.query("SELECT name FROM sqlite_master WHERE type='table'")]
    return len(store.ls()), {t: store.db.one(f"SELECT COUNT(*) FROM {t}")[0]  # noqa: S608
                             for t in tables}


@pytest.mark.parametrize("dry_run", [False, True])
def test_missing_scorers_refused_at_plan_before_anything_is_stored_or_built(
        captions_list, store, monkeypatch, dry_run):
    built = []
    init = TinyCaptioner.__init__
    monkeypatch.setattr(TinyCaptioner, "__init__", lambda self: (built.append(1), init(self))[1])
    monkeypatch.setattr(shutil, "which", lambda name: None)
    before = _counts(store)
    with pytest.raises(MissingTool, match="java"):
        plan(_request(captions_list, spice=False), store, dry_run=dry_run)
    assert _counts(store) == before
    assert built == []


def test_open_clip_without_transformers_refused_at_plan_before_anything_is_stored(
        captions_list, store, monkeypatch):
    from vbstore.backbones import _clip_loaders
    from vbstore.tasks import captioning

    monkeypatch.setattr(captioning.Captioning, "check_tools", lambda self, params: None)
    monkeypatch.setattr(_clip_loaders, "coca_generate_ready", lambda: False)
    before = _counts(store)
    request = ResultRequest(BackboneRequest("open_clip:coca_ViT-B-32", weights="random"),
                            ProbeRequest("captioning", params={"spice": False}),
                            DataRef(captions_list))
    start = time.monotonic()
    with pytest.raises(MissingDependency, match="transformers") as info:
        plan(request, store)
    assert time.monotonic() - start < 5  # no CoCa was built
    assert "vbstore[captioning]" in info.value.hint
    assert _counts(store) == before
    # a loader's model brings its own generate: nothing to refuse
    plan(_request(captions_list, spice=False), store, dry_run=True)


@pytest.mark.slow  # each scoring starts java (PTB tokenizer, METEOR): seconds
@needs_scorers
def test_a_stored_result_is_answered_without_the_scorers(captioned, captions_list, stored,
                                                        monkeypatch):
    store = stored
    first = captioned["first"]
    monkeypatch.setattr(shutil, "which", lambda name: None)
    again = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                               params={"spice": False}, progress=False)
    assert again.id == first.id
    assert [s.status for s in plan(_request(captions_list, spice=False), store,
                                   dry_run=True).steps][-1] == "stored"


def test_a_backbone_without_a_text_decoder_family_is_refused_at_plan(captions_list, store):
    with pytest.raises(UsageError, match="CLIP backbone"):
        plan(ResultRequest(BackboneRequest("timm:vit_tiny_patch16_224"),
                           ProbeRequest("captioning"), DataRef(captions_list)), store,
             dry_run=True)


@pytest.mark.parametrize(("setting", "flag"), [({"pooling": "mean"}, "--pooling"),
                                               ({"layers": (-2,)}, "--layers"),
                                               ({"precision": "bf16"}, "--precision")])
def test_feature_settings_are_refused(captions_list, store, setting, flag):
    request = ResultRequest(BackboneRequest("cap_tiny:tiny@v1", **setting),
                            ProbeRequest("captioning"), DataRef(captions_list))
    with pytest.raises(UsageError, match="reads no features") as info:
        plan(request, store, dry_run=True)
    assert flag in info.value.hint


def test_pretrained_coca_fails_fast_offline(captions_list, store, monkeypatch):
    from vbstore.backbones import WeightsUnavailable, _clip_loaders
    from vbstore.tasks import captioning

    # the scorers and transformers are checked first (plan time): here they are there, the
    # weights are not
    monkeypatch.setattr(captioning.Captioning, "check_tools", lambda self, params: None)
    monkeypatch.setattr(_clip_loaders, "coca_generate_ready", lambda: True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(WeightsUnavailable) as info:
        vbstore.get_result("open_clip:coca_ViT-B-32@mscoco_finetuned_laion2b_s13b_b90k",
                           "captioning", captions_list, store=store, progress=False)
    assert time.monotonic() - start < 10
    assert info.value.exit_code == 6
    assert "coca_ViT-B-32" in str(info.value)


def test_a_captions_answer_must_declare_its_question(store):
    from vbstore import canonical
    from vbstore.engine._captions import captions_spec
    from vbstore.errors import MisfiledAnswer
    from vbstore.records import StoreReader, check_answer

    a, b = "a" * 64, "b" * 64
    doc = {"backbone": a, "manifest": b, "decoding": {"seq_len": 30}, "captions": ["a dog"]}
    oid = store.put_bytes(canonical.dumps(doc), "blob")
    check_answer(captions_spec(a, b, {"seq_len": 30}), oid, StoreReader(store), "here")
    with pytest.raises(MisfiledAnswer, match="decoding"):
        check_answer(captions_spec(a, b, {"seq_len": 12}), oid, StoreReader(store), "here")
    with pytest.raises(MisfiledAnswer, match="manifest"):
        check_answer(captions_spec(a, a, {"seq_len": 30}), oid, StoreReader(store), "here")


@pytest.mark.skipif(open_clip.coca_model._has_transformers,
                    reason="transformers is installed: CoCa.generate runs (tests/interop)")
def test_coca_without_transformers_names_the_extra(captions_list, store, tmp_path, monkeypatch):
    from vbstore.backbones import _clip_loaders
    from vbstore.tasks import captioning

    config = {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16,
                       "patch_size": 16, "attentional_pool": True, "attn_pooler_heads": 2,
                       "attn_pooler_queries": 4, "output_tokens": True},
        "text_cfg": {"context_length": 76, "vocab_size": 49408, "width": 32, "heads": 2,
                     "layers": 1, "embed_cls": True, "output_tokens": True},
        "multimodal_cfg": {"context_length": 76, "vocab_size": 49408, "width": 32, "heads": 2,
                           "layers": 1, "attn_pooler_heads": 2},
        "custom_text": True,
    }
    (tmp_path / "vbstore_test_coca.json").write_text(json.dumps(config))
    open_clip.add_model_config(tmp_path)
    monkeypatch.setattr(captioning.Captioning, "check_tools", lambda self, params: None)
    # past the plan's check (transformers found), the built CoCa still refuses without it
    monkeypatch.setattr(_clip_loaders, "coca_generate_ready", lambda: True)
    monkeypatch.setattr(open_clip.coca_model, "_has_transformers", False)
    with pytest.raises(MissingDependency, match="transformers") as info:
        vbstore.get_result("open_clip:vbstore_test_coca", "captioning", captions_list,
                           weights="random", store=store, params={"spice": False},
                           progress=False)
    assert "vbstore[captioning]" in info.value.hint
    assert not store.ls("result")


@pytest.mark.slow  # each scoring starts java (PTB tokenizer, METEOR): seconds
@needs_scorers
def test_sampling_writes_captions_per_seed_and_beam_search_once(captioned, captions_list,
                                                                 stored):
    store = stored  # beam search's captions and seeds 0 and 1 already there: `captioned`
    TinyCaptioner.calls = 0
    sampled = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                                 params={"spice": False, "generation_type": "top_k"}, seeds=2,
                                 progress=False)
    assert TinyCaptioner.calls == 12  # one set of captions per seed's draws
    inputs = sampled.record.inputs
    assert inputs["captions.0"] != inputs["captions.1"]
    assert not any("ignores the seed" in w for w in sampled.record.warnings or [])
    beams = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                               params={"spice": False}, seeds=2, progress=False)
    assert TinyCaptioner.calls == 12  # beam search: the one set already stored, for both seeds
    assert beams.record.inputs["captions"] == captioned["first"].record.inputs["captions"]
    assert any("ignores the seed" in w for w in beams.record.warnings or [])


@pytest.mark.slow  # each scoring starts java (PTB tokenizer, METEOR): seconds
@needs_scorers
def test_a_sweeps_pooling_goes_past_a_task_that_reads_no_features(captioned, captions_list,
                                                                   stored):
    # sweep --pooling goes "to the tasks that read pooled vectors"; captioning reads none, so
    # it runs as without --pooling (as run captioning offers no --pooling), not as an error row
    from click.testing import CliRunner

    from vbstore.cli import cli
    from vbstore.engine import sweep
    from vbstore.engine._sweep import SweepEntry

    store = stored  # the result asked without --pooling is there (`captioned`)
    rows = list(sweep([SweepEntry("cap_tiny:tiny@v1")], ["captioning"], captions_list,
                      params={"spice": False}, pooling="mean", store=store, progress=False))
    assert [row.get("error") for row in rows] == [None]
    assert rows[0]["id"] == captioned["first"].id  # the same question: --pooling keys nothing
    alone = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                               params={"spice": False}, progress=False)
    assert rows[0]["id"] == alone.id
    assert alone.from_cache
    shown = CliRunner().invoke(cli, ["run", "captioning", "--help"])
    assert shown.exit_code == 0
    assert "--batch-size" in shown.output
    assert "--pooling" not in shown.output


@pytest.mark.slow  # each scoring starts java (PTB tokenizer, METEOR): seconds
@needs_scorers
def test_a_results_push_with_features_carries_the_captions(captioned, captions_list, stored,
                                                           tmp_path):
    # the captions are the model's output, as features and text-tower outputs are: they travel
    # with --with features (a teammate then scores them again without the model), not with
    # --with images (the files behind manifests), and the summary names them
    from vbstore import Store
    from vbstore.remotes import add_remote, push_results

    store = stored
    TinyCaptioner.calls = 0
    result = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=store,
                                params={"spice": False}, progress=False)
    assert result.id == captioned["first"].id  # stored: `captioned` computed it
    captions = result.record.inputs["captions"]
    add_remote(store, "team", str(tmp_path / "team"))
    assert push_results(store, "team", [result.id]).left_out["captions"]["objects"] == 1
    assert "captions" not in push_results(store, "team", [result.id], with_=("images",)).sent
    pushed = push_results(store, "team", [result.id], with_=("features",))
    assert pushed.sent["captions"] == {"objects": 1, "bytes": store.info(captions).size}

    with Store(tmp_path / "mate") as mate:  # the remote as a cache: its derivations answer
        add_remote(mate, "team", str(tmp_path / "team"))
        again = vbstore.get_result("cap_tiny:tiny@v1", "captioning", captions_list, store=mate,
                                   params={"spice": False}, seed=1, progress=False)
        assert again.record.inputs["captions"] == captions
    assert TinyCaptioner.calls == 0  # scored again from the pushed captions: no model ran
    assert again.metrics == result.metrics
