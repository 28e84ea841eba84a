"""CLIP_benchmark 1.6.2's ``--save_clf`` / ``--load_clfs`` and its caption webdatasets against
its own code (installed for the test, never imported by vbstore): the classifier vbstore saves
is the one its ``zero_shot_classifier`` makes, in a file its ``--load_clfs`` reads back to the
same numbers; the files it saves (one, or several averaged) give vbstore's ``load_clfs`` its
numbers; a ``cb:wds/flickr30k`` copy written locally in its webdataset layout is read as its
builder reads it and scored as its retrieval scores it.
"""

from __future__ import annotations

import importlib
import io
import tarfile

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import datasets, transforms

import vbstore
from vbstore.backbones import register_clip_loader
from vbstore.data import load_manifest
from vbstore.engine import plan, result_request, save_classifier
from vbstore.errors import UsageError
from vbstore.tasks.zeroshot_classification import TEMPLATES

pytestmark = pytest.mark.slow
SIZE = 16
CLIP = "cbclf_clip:tiny@v1"
CLASSES = ["apple", "boat", "cat", "dog", "eagle", "fox"]


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
def _cbclf_clip():
    from vbstore.backbones import _clip_loaders
    from vbstore.backbones._registry import unregister_backbone

    register_clip_loader("cbclf_clip")(_load)
    yield
    unregister_backbone("cbclf_clip")
    _clip_loaders._LOADERS.pop("cbclf_clip")


def _accuracy(output, target, topk=(1,)):
    # clip_benchmark.metrics.zeroshot_classification.accuracy, its float() on numpy 2
    pred = output.topk(max(topk), 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [float(correct[:k].reshape(-1).float().sum(0).item()) / len(target) for k in topk]


def _folder(root):
    rng = np.random.default_rng(7)
    for name in CLASSES:  # a colour per class, so the scores follow the class
        (root / "val" / name).mkdir(parents=True)
        colour = rng.integers(0, 256, size=3)
        for i in range(4):
            noise = rng.integers(-40, 41, size=(SIZE + 4, SIZE + 4, 3))
            pixels = np.clip(colour + noise, 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / "val" / name / f"{name}{i}.png")
    return root


def test_classifiers_go_both_ways_with_clip_benchmark(clip_benchmark, store, tmp_path,
                                                      monkeypatch):
    root = _folder(tmp_path / "data")
    kw = dict(split="val", store=store, progress=False)
    ours = vbstore.get_result(CLIP, "zeroshot_classification", str(root), **kw)
    mine = tmp_path / "mine.pt"
    save_classifier(plan(result_request(CLIP, "zeroshot_classification", str(root),
                                        split="val"), store), mine)
    model, transform, tokenizer = _load("tiny", "v1")
    model.eval()
    metric = importlib.import_module("clip_benchmark.metrics.zeroshot_classification")
    monkeypatch.setattr(metric, "accuracy", _accuracy)
    images = datasets.ImageFolder(str(root / "val"), transform=transform)
    assert images.classes == CLASSES == store.read_json(
        ours.record.inputs["eval_manifest"])["classes"]
    loader = torch.utils.data.DataLoader(images, batch_size=4, shuffle=False)

    def theirs(**kwargs):
        templates = kwargs.pop("templates", list(TEMPLATES["ensemble"]))
        return metric.evaluate(model, loader, tokenizer, CLASSES, templates, "cpu", amp=False,
                               **kwargs)

    # their text tower and their --save_clf: our numbers, our classifier
    saved = tmp_path / "theirs.pt"
    expected = theirs(save_clf=str(saved))
    assert ours.metrics == expected
    their_clf, my_clf = torch.load(saved), torch.load(mine, weights_only=True)
    assert (my_clf.shape, my_clf.dtype) == (their_clf.shape, their_clf.dtype) == ((8, 6),
                                                                                 torch.float32)
    torch.testing.assert_close(my_clf, their_clf, rtol=0, atol=1e-6)
    # the bytes are torch.save's of that tensor under that name
    again = tmp_path / "again" / "mine.pt"
    again.parent.mkdir()
    torch.save(my_clf, again)
    assert mine.read_bytes() == again.read_bytes()
    # our file through their --load_clfs: the same numbers, no text tower
    assert theirs(load_clfs=[str(mine)], templates=[]) == expected
    # their file through ours
    loaded = vbstore.get_result(CLIP, "zeroshot_classification", str(root),
                                params={"load_clfs": str(saved)}, **kw)
    assert loaded.metrics == expected
    assert loaded.id != ours.id
    # a classifier of class prototypes (the mean image embedding of each class, unnormalised
    # columns) tells apart what the tiny text tower cannot: read by both, alone and averaged
    # with the text one, as it averages (A / n + B / n, not normalised again)
    with torch.no_grad():
        feats = torch.nn.functional.normalize(
            model.encode_image(torch.stack([x for x, _ in images])), dim=-1)
    labels = torch.tensor(images.targets)
    protos = tmp_path / "protos.pt"
    torch.save(torch.stack([feats[labels == c].mean(0) for c in range(len(CLASSES))], dim=1),
               protos)
    for files in ([protos], [saved, protos]):
        expected_here = theirs(load_clfs=[str(f) for f in files], templates=[])
        got = vbstore.get_result(CLIP, "zeroshot_classification", str(root),
                                 params={"load_clfs": ",".join(map(str, files))}, **kw)
        assert got.metrics == expected_here, files
        assert got.metrics != expected
        assert got.id not in (ours.id, loaded.id)


WORDS = ["a", "red", "dog", "on", "blue", "cat", "under", "green", "table", "the", "big", "box"]


def _caption_shards(root, n=16, per_image=2, kind="retrieval"):
    """CLIP_benchmark's webdataset layout of a caption set (what its convert_retrieval_dataset
    writes): dataset_type.txt, test/nshards.txt, test/0.tar of PNG + TXT (a caption a line)."""
    rng = np.random.default_rng(3)
    (root / "test").mkdir(parents=True)
    (root / "test" / "nshards.txt").write_text("1\n")
    (root / "dataset_type.txt").write_text(f"{kind}\n")
    with tarfile.open(root / "test" / "0.tar", "w") as tar:
        for i in range(n):
            image = io.BytesIO()
            pixels = rng.integers(0, 256, (SIZE + 4, SIZE + 4, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(image, "png")
            captions = [" ".join(rng.choice(WORDS, size=5)) for _ in range(per_image)]
            label = "\n".join(captions) if kind == "retrieval" else str(i % 2)
            for ext, data in (("png", image.getvalue()),
                              ("txt" if kind == "retrieval" else "cls", label.encode())):
                info = tarfile.TarInfo(f"s{i:07d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def test_a_caption_webdataset_is_read_and_scored_as_clip_benchmark_does(clip_benchmark, store,
                                                                        tmp_path):
    pytest.importorskip("webdataset")
    root = tmp_path / "wds_flickr30k"
    _caption_shards(root)
    options = {"dataset_root": str(tmp_path / "wds_{dataset_cleaned}")}
    doc = load_manifest(store, "cb:wds/flickr30k", split="test", **options).doc
    builder = importlib.import_module("clip_benchmark.datasets.builder")
    theirs = list(builder.build_dataset("wds/flickr30k", root=str(root), split="test",
                                        transform=None, download=False,
                                        task="zeroshot_retrieval"))
    assert [s["captions"] for s in doc["samples"]] == [captions for _, captions in theirs]
    assert len(doc["samples"]) == 16
    assert all(len(s["captions"]) == 2 for s in doc["samples"])

    result = vbstore.get_result(CLIP, "zeroshot_retrieval", "cb:wds/flickr30k", split="test",
                                data_options=options, store=store, progress=False)
    model, transform, tokenizer = _load("tiny", "v1")
    model.eval()
    metric = importlib.import_module("clip_benchmark.metrics.zeroshot_retrieval")
    pairs = [(transform(image), captions) for image, captions in theirs]
    loader = torch.utils.data.DataLoader(pairs, batch_size=4, shuffle=False,
                                         collate_fn=builder.image_captions_collate_fn)
    expected = metric.evaluate(model, loader, tokenizer, "cpu", amp=False,
                               recall_k_list=[1, 5, 10])
    # 16 images, 32 captions: every recall a multiple of 1/32, exact in float32 and float64
    assert result.metrics == expected
    assert 0 < result.metrics["image_retrieval_recall@1"] < 1


def test_class_shards_under_a_caption_set_name_are_refused(clip_benchmark, store, tmp_path):
    pytest.importorskip("webdataset")
    _caption_shards(tmp_path / "wds_flickr30k", kind="classification")
    with pytest.raises(UsageError, match="cb:wds/flickr30k sample 0 has int where captions "
                                         "belong") as caught:
        load_manifest(store, "cb:wds/flickr30k", split="test",
                      dataset_root=str(tmp_path / "wds_{dataset_cleaned}"))
    assert "dataset_type.txt must say retrieval" in caught.value.hint
