"""``cb:`` caption and compositionality sets (COCO captions, Flickr, SugarCrepe) read through
CLIP_benchmark 1.6.2's own builder (installed for the test) from small files in its layout:
ordinary manifests with a ``captions`` column, whose zero-shot retrieval and caption selection
metrics equal CLIP_benchmark's own evaluation on the same data and model, and whose ``--language``
reaches the captions (and the ids) and nothing else. Offline, a missing file is one line."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms

import vbstore
from vbstore.backbones import register_clip_loader
from vbstore.data import load_manifest
from vbstore.errors import UsageError

pytestmark = pytest.mark.slow
SIZE = 16
CLIP = "cbt_clip:tiny@v1"
WORDS = ["a", "red", "dog", "on", "blue", "cat", "under", "green", "table", "the", "big", "box"]


class _TinyClip(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.visual = torch.nn.Linear(3 * SIZE * SIZE, 8)
        self.words = torch.nn.Embedding(64, 8)
        self.order = torch.nn.Linear(8, 8)

    def encode_image(self, images):
        return self.visual(images.flatten(1))

    def encode_text(self, tokens):
        emb = self.words(tokens)
        weights = torch.arange(1, tokens.shape[1] + 1, dtype=emb.dtype)[None, :, None]
        return self.order((emb * weights).mean(dim=1))


def _tokenize(texts):
    ids = [[sum(map(ord, w)) % 64 for w in t.split()][:8] for t in texts]
    return torch.tensor([row + [0] * (8 - len(row)) for row in ids])


def _load(model_name, pretrained, cache_dir=None, device="cpu"):
    torch.manual_seed(sum(map(ord, pretrained or "random")))
    transform = transforms.Compose([transforms.Resize(SIZE), transforms.CenterCrop(SIZE),
                                    transforms.ToTensor(),
                                    transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    return _TinyClip().to(device), transform, _tokenize


@pytest.fixture(scope="module", autouse=True)
def _cbt_clip():
    from vbstore.backbones import _clip_loaders
    from vbstore.backbones._registry import unregister_backbone

    register_clip_loader("cbt_clip")(_load)
    yield
    unregister_backbone("cbt_clip")
    _clip_loaders._LOADERS.pop("cbt_clip")


@pytest.fixture
def no_fetch(clip_benchmark, monkeypatch):
    """CLIP_benchmark's builder, with its shell calls (wget, unzip, kaggle) made failures."""
    builder = importlib.import_module("clip_benchmark.datasets.builder")

    def fetch(*args, **kwargs):
        raise AssertionError(f"CLIP_benchmark tried to fetch: {args[0]}")

    monkeypatch.setattr(builder, "call", fetch)
    return builder


def _caption(rng):
    return " ".join(rng.choice(WORDS, size=5))


def _jpegs(folder, names, seed):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        pixels = rng.integers(0, 256, size=(SIZE + 4, SIZE + 4, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / name, quality=90)


def _coco(root, n=16, per_image=2, seed=0):
    """COCO captions as CLIP_benchmark reads them: val2014/ and coco_test_karpathy.json."""
    rng = np.random.default_rng(seed)
    names = [f"COCO_val2014_{i:012d}.jpg" for i in range(1, n + 1)]
    _jpegs(root / "val2014", names, seed)
    images = [{"id": i, "file_name": name} for i, name in enumerate(names, 1)]
    annotations = [{"id": 100 * i + j, "image_id": i, "caption": _caption(rng)}
                   for i in range(1, n + 1) for j in range(per_image)]
    (root / "coco_test_karpathy.json").write_text(json.dumps(
        {"images": images, "annotations": annotations}))


def _flickr(root, n=12, seed=1):
    """Flickr30k as CLIP_benchmark reads it: the images, and a Karpathy file per language."""
    rng = np.random.default_rng(seed)
    names = [f"{1000 + i}.jpg" for i in range(n)]
    _jpegs(root, names, seed)
    for suffix in ("karpathy", "zh"):
        lines = ["image,caption"] + [f"{name},{_caption(rng)}" for name in names for _ in (0, 1)]
        (root / f"flickr30k_test_{suffix}.txt").write_text("\n".join(lines) + "\n")


def _sugar_crepe(root, subset="add_att", n=12, seed=2):
    rng = np.random.default_rng(seed)
    names = [f"{i:012d}.jpg" for i in range(n)]
    _jpegs(root / "val2017", names, seed)
    ann = {str(3 * i): {"filename": name, "caption": _caption(rng),
                        "negative_caption": _caption(rng)} for i, name in enumerate(names)}
    (root / f"{subset}.json").write_text(json.dumps(ann))


def _their_loader(builder, name, root, transform, language="en"):
    dataset = builder.build_dataset(name, root=str(root), transform=transform, split="test",
                                    download=False, language=language,
                                    task=builder.get_dataset_default_task(name))
    return torch.utils.data.DataLoader(dataset, batch_size=5, shuffle=False,
                                       collate_fn=builder.get_dataset_collate_fn(name))


def test_coco_captions_are_a_retrieval_manifest_scored_as_clip_benchmark_scores_it(
        no_fetch, store, tmp_path):
    root = tmp_path / "data" / "mscoco_captions"
    _coco(root)
    options = {"dataset_root": str(tmp_path / "data" / "{dataset}")}
    view = load_manifest(store, "cb:mscoco_captions", split="test", **options)
    doc = view.doc
    assert (doc["source"]["kind"], doc["source"]["name"]) == ("cb", "mscoco_captions")
    theirs = no_fetch.build_dataset("mscoco_captions", root=str(root), split="test",
                                    download=False, task="zeroshot_retrieval")
    assert [s["captions"] for s in doc["samples"]] == [theirs[i][1] for i in range(len(theirs))]
    # each image kept with its own bytes: a list of the same files has the same image ids
    lines = [json.dumps({"image": f"val2014/{img['file_name']}", "captions": ["x"]})
             for img in json.loads((root / "coco_test_karpathy.json").read_text())["images"]]
    (root / "list.jsonl").write_text("\n".join(lines) + "\n")
    folder = load_manifest(store, str(root / "list.jsonl"))
    assert [s["image"] for s in folder.doc["samples"]] == [s["image"] for s in doc["samples"]]

    result = vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:mscoco_captions", split="test",
                                data_options=options, store=store, progress=False)
    model, transform, tokenizer = _load("tiny", "v1")
    model.eval()
    metric = importlib.import_module("clip_benchmark.metrics.zeroshot_retrieval")
    expected = metric.evaluate(model, _their_loader(no_fetch, "mscoco_captions", root, transform),
                               tokenizer, "cpu", amp=False, recall_k_list=[1, 5, 10])
    # 16 images, 32 captions: every recall is a multiple of 1/32, exact in float32 and float64
    assert result.metrics == expected
    assert 0 < result.metrics["image_retrieval_recall@1"] < 1


def test_sugar_crepe_is_a_caption_selection_manifest_scored_as_clip_benchmark_scores_it(
        no_fetch, store, tmp_path):
    root = tmp_path / "sc"
    _sugar_crepe(root)
    options = {"dataset_root": str(root)}
    doc = load_manifest(store, "cb:sugar_crepe/add_att", split="test", **options).doc
    assert all(len(s["captions"]) == 2 for s in doc["samples"])
    result = vbstore.get_result(CLIP, "image_caption_selection", "cb:sugar_crepe/add_att",
                                split="test", data_options=options, store=store, progress=False)
    model, transform, tokenizer = _load("tiny", "v1")
    model.eval()
    metric = importlib.import_module("clip_benchmark.metrics.image_caption_selection")
    expected = metric.evaluate(
        model, _their_loader(no_fetch, "sugar_crepe/add_att", root, transform), tokenizer,
        device="cpu", amp=False)
    assert result.metrics == expected
    assert 0 < result.metrics["text_acc"] < 1


def test_the_language_reaches_the_captions_the_texts_and_the_result_key(no_fetch, store,
                                                                         tmp_path):
    root = tmp_path / "flickr"
    _flickr(root)
    kw = dict(split="test", data_options={"dataset_root": str(root)}, store=store,
              progress=False)
    english = vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:flickr30k", **kw)
    chinese = vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:flickr30k", language="zh", **kw)
    assert chinese.record.params["language"] == "zh"
    assert english.record.params["language"] == "en"
    assert chinese.id != english.id
    # other captions: another manifest, other text-tower outputs; the same images: no forward
    # pass for the second language (the features' rows are shared by image id)
    manifests = [r.record.inputs["eval_manifest"] for r in (english, chinese)]
    assert manifests[0] != manifests[1]
    images = [[s["image"] for s in store.read_json(m)["samples"]] for m in manifests]
    assert images[0] == images[1]
    assert chinese.features["eval"]["extracted"] == 0

    def texts(result):
        return {c for role, c in store.children(result.id) if role == "text_embeddings"}

    assert texts(english).isdisjoint(texts(chinese))
    # @zh is --language zh: the same request
    again = vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:flickr30k@zh", **kw)
    assert (again.id, again.from_cache) == (chinese.id, True)
    with pytest.raises(UsageError, match=r"cb:flickr30k@zh is read in 'zh' but language= "
                                         r"says 'en'"):  # the keyword, as the API says it
        vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:flickr30k@zh", language="en", **kw)
    with pytest.raises(UsageError, match=r"en\}? and cb:flickr30k@zh disagree"):
        vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:flickr30k@zh",
                           params={"language": "en"}, **kw)
    with pytest.raises(UsageError, match="CLIP_benchmark refuses cb:flickr30k"):
        vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:flickr30k", language="fr", **kw)


def test_offline_a_missing_file_is_named_in_one_line_and_nothing_is_fetched(no_fetch, store,
                                                                             tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    cases = [("mscoco_captions", r"val2014/, coco_test_karpathy\.json missing"),
             ("flickr30k", r"flickr30k_test_karpathy\.txt missing"),
             ("sugar_crepe/swap_obj", r"val2017/, swap_obj\.json missing"),
             ("winoground", r"facebook___winoground/ missing")]
    for name, missing in cases:
        with pytest.raises(UsageError, match=rf"cb:{name} \(test\) is not complete in "
                                             rf".*empty: {missing}") as caught:
            load_manifest(store, f"cb:{name}", split="test", dataset_root=str(root))
        assert "--download" in caught.value.hint
    with pytest.raises(UsageError, match="CLIP_benchmark refuses cb:sugar_crepe/nope"):
        load_manifest(store, "cb:sugar_crepe/nope", split="test", dataset_root=str(root))
    with pytest.raises(UsageError, match="cb:mscoco_captions has English captions only"):
        load_manifest(store, "cb:mscoco_captions@fr", split="test", dataset_root=str(root))
    # an image the annotations name but the root lacks
    _sugar_crepe(tmp_path / "sc")
    next((tmp_path / "sc" / "val2017").iterdir()).unlink()
    with pytest.raises(UsageError, match="an image the annotations name is not in"):
        load_manifest(store, "cb:sugar_crepe/add_att", split="test",
                      dataset_root=str(tmp_path / "sc"))


def _winoground(root, pairs=9, seed=3, tmp=None):
    """``facebook/winoground`` in a datasets cache at the root, as the Hub leaves it (written by
    the real parquet builder, then filed under a commit)."""
    import shutil

    import datasets

    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"image_0": [], "image_1": [], "caption_0": [], "caption_1": []}
    for _ in range(pairs):
        words = _caption(rng).split()
        swapped = [words[-1], *words[1:-1], words[0]]
        rows["caption_0"].append(" ".join(words))
        rows["caption_1"].append(" ".join(swapped))
        for j in (0, 1):
            pixels = rng.integers(0, 256, size=(SIZE, SIZE, 3), dtype=np.uint8)
            rows[f"image_{j}"].append(Image.fromarray(pixels))
    features = datasets.Features({"image_0": datasets.Image(), "image_1": datasets.Image(),
                                  "caption_0": datasets.Value("string"),
                                  "caption_1": datasets.Value("string")})
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(tmp / "w.parquet"))
    built = tmp / "built"
    datasets.load_dataset("parquet", data_files={"test": str(tmp / "w.parquet")},
                          cache_dir=str(built))
    source = next(p for p in (built / "parquet").glob("default-*/0.0.0/*") if p.is_dir())
    target = root / "facebook___winoground" / "default" / "0.0.0" / ("0" * 40)
    target.mkdir(parents=True)
    for file in source.iterdir():
        shutil.copy(file, target / file.name.replace("parquet-", "winoground-"))


def test_winoground_is_two_samples_per_instance_scored_as_clip_benchmark_scores_it(
        no_fetch, store, tmp_path):
    root = tmp_path / "wino"
    _winoground(root, tmp=tmp_path)
    options = {"dataset_root": str(root)}
    doc = load_manifest(store, "cb:winoground", split="test", **options).doc
    assert [s["name"].rsplit("/", 1)[-1][:8] for s in doc["samples"][:2]] == ["000000_0",
                                                                              "000000_1"]
    assert doc["samples"][0]["captions"] == doc["samples"][1]["captions"]
    result = vbstore.get_result(CLIP, "image_caption_selection", "cb:winoground", split="test",
                                data_options=options, store=store, progress=False)
    model, transform, tokenizer = _load("tiny", "v1")
    model.eval()
    metric = importlib.import_module("clip_benchmark.metrics.image_caption_selection")
    from vbstore.data._hf import _offline

    with _offline(True):
        loader = _their_loader(no_fetch, "winoground", root, transform)
        expected = metric.evaluate(model, loader, tokenizer, device="cpu", amp=False)
    assert result.metrics == expected
    assert result.metrics["acc"] < 1  # the data tells the metrics apart


def _accuracy(output, target, topk=(1,)):
    # clip_benchmark.metrics.zeroshot_classification.accuracy, its float() on numpy 2
    pred = output.topk(max(topk), 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [float(correct[:k].reshape(-1).float().sum(0).item()) / len(target) for k in topk]


def test_the_language_of_a_classification_set_reaches_its_names_templates_and_keys(
        no_fetch, store, tmp_path, monkeypatch):
    root = tmp_path / "imagenet"
    for split, seed in (("train", 4), ("val", 5)):  # CLIP_benchmark's test split is val/
        for wnid in ("n01440764", "n01443537", "n01484850"):
            _jpegs(root / split / wnid, [f"{wnid}_{i}.jpg" for i in range(3)], seed)
            seed += 1
    kw = dict(split="test", data_options={"dataset_root": str(root)}, store=store,
              progress=False)
    name = "cb:imagenet1k-unverified"
    english = vbstore.get_result(CLIP, "zeroshot_classification", name,
                                 params={"templates": "dataset"}, **kw)
    japanese = vbstore.get_result(CLIP, "zeroshot_classification", name, language="jp",
                                  params={"templates": "dataset"}, **kw)
    docs = [store.read_json(r.record.inputs["eval_manifest"]) for r in (english, japanese)]
    assert docs[0]["classes"][:2] == ["tench", "goldfish"]
    assert docs[1]["classes"][:2] == ["テンチ", "金魚"]
    assert docs[1]["source"]["templates"][0] == "{c}の悪い写真"
    # CLIP_benchmark names two classes "missile": told apart as labels, verbatim in the prompts
    assert docs[0]["source"]["classnames"].count("missile") == 2
    assert "missile (2)" in docs[0]["classes"]
    assert (japanese.record.params["language"], japanese.id != english.id) == ("jp", True)
    # in either language, CLIP_benchmark's own evaluation on its own dataset object
    model, transform, tokenizer = _load("tiny", "v1")
    model.eval()
    metric = importlib.import_module("clip_benchmark.metrics.zeroshot_classification")
    monkeypatch.setattr(metric, "accuracy", _accuracy)
    for result, language in ((english, "en"), (japanese, "jp")):
        theirs = no_fetch.build_dataset("imagenet1k-unverified", root=str(root), split="test",
                                        transform=transform, download=False, language=language)
        loader = torch.utils.data.DataLoader(theirs, batch_size=4, shuffle=False)
        expected = metric.evaluate(model, loader, tokenizer, theirs.classes, theirs.templates,
                                   "cpu", amp=False)
        assert result.metrics == expected, language
    # the same images: the same image ids, and no forward pass for the second language
    assert [s["image"] for s in docs[0]["samples"]] == [s["image"] for s in docs[1]["samples"]]
    assert japanese.features["eval"]["extracted"] == 0
    texts = [{c for role, c in store.children(r.id) if role == "text_embeddings"}
             for r in (english, japanese)]
    assert texts[0].isdisjoint(texts[1])
    # CLIP_benchmark's Japanese templates are the data's: the English built-ins are refused
    with pytest.raises(UsageError, match="no built-in 'ensemble' templates for language 'jp'"
                       ) as caught:
        vbstore.get_result(CLIP, "zeroshot_classification", name, language="jp", **kw)
    assert "--templates dataset" in caught.value.hint
    # a task that reads no text takes the language only as the data's: the export names it
    probe = vbstore.get_result(CLIP, "linear_probe", f"{name}@jp", f"{name}@jp",
                               train_split="train", **kw)
    assert "language" not in probe.record.params
    from vbstore.interop import clip_benchmark_record
    from vbstore.records import ManifestRecord

    manifest = ManifestRecord.from_dict(store.read_json(probe.record.inputs["eval_manifest"]))
    row = clip_benchmark_record(probe.record, manifest)
    assert (row["dataset"], row["language"]) == ("imagenet1k-unverified", "jp")
