"""``captioning`` equals CLIP_benchmark 1.6.2's own ``captioning.evaluate`` on the same model and
data: a small random model that writes, registered through ``register_clip_loader`` (in this
process), and a tiny random CoCa through ``open_clip:`` (in a process of its own, since open_clip's
``CoCa.generate`` needs transformers before 4.57 and that needs huggingface_hub before 1.0).

SPICE is compared where its Stanford CoreNLP jars are installed; elsewhere (offline: they cannot
be fetched) both sides run without it, CLIP_benchmark's scorer list with a SPICE that scores
nothing, and the other seven metrics are compared."""

from __future__ import annotations

import importlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from open_clip.tokenizer import _tokenizer
from PIL import Image
from torchvision import transforms

import vbstore
from vbstore.backbones import register_clip_loader

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("java") is None,
                                 reason="pycocoevalcap's scorers run Java")]
ROOT = Path(__file__).resolve().parents[2]
SIZE = 16
WORDS = ["a", "red", "dog", "on", "blue", "cat", "under", "green", "table", "the", "big", "box"]
# open_clip 3.3's CoCa.generate imports BeamSearchScorer, which transformers 4.57 stopped exporting
COCA_GENERATE = ("transformers==4.56.2", "tokenizers>=0.22,<0.23", "huggingface_hub>=0.34,<1.0")


class Writer(torch.nn.Module):
    """Writes each image's four best words, as CoCa's generate returns them (token ids)."""

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
        scores = self.visual(images.flatten(1)).view(len(images), 4, len(WORDS))
        rows = []
        for words in scores.argmax(dim=-1).tolist():
            ids = [49406, *(t for w in words for t in _tokenizer.encode(WORDS[w])), 49407]
            rows.append((ids + [0] * seq_len)[:seq_len])
        return torch.tensor(rows)


def load_writer(model_name, pretrained, cache_dir=None, device="cpu"):
    torch.manual_seed(sum(map(ord, pretrained or "random")))
    transform = transforms.Compose([transforms.Resize(SIZE), transforms.CenterCrop(SIZE),
                                    transforms.ToTensor(),
                                    transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    return Writer().to(device), transform, lambda texts: torch.zeros(len(texts), 4).long()


@pytest.fixture(scope="module", autouse=True)
def writer():
    from vbstore.backbones import _clip_loaders
    from vbstore.backbones._registry import unregister_backbone

    register_clip_loader("cap_writer")(load_writer)
    yield
    unregister_backbone("cap_writer")
    _clip_loaders._LOADERS.pop("cap_writer")


def _spice() -> bool:
    from vbstore.tasks.captioning import spice_ready

    return spice_ready()


class _NoSpice:
    """CLIP_benchmark's SPICE scorer, where its jars cannot be fetched: it scores nothing."""

    def method(self) -> str:
        return "SPICE"

    def compute_score(self, gts, res):
        return math.nan, []


def _compare(ours: dict[str, float], theirs: dict[str, float], spice: bool) -> None:
    shared = ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
    assert sorted(ours) == sorted(shared + (["SPICE"] if spice else []))
    for name in ours:
        assert ours[name] == pytest.approx(theirs[name], abs=1e-6), name
    assert ours["CIDEr"] > 0  # the data tells the metrics apart
    assert 0 < ours["Bleu_1"] < 1


def test_captioning_equals_clip_benchmark(clip_benchmark, store, tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    names, references, lines = [], [], []
    for i in range(8):
        pixels = rng.integers(0, 256, size=(SIZE, SIZE, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
        refs = [" ".join(rng.choice(WORDS, size=5)) for _ in range(1 + i % 3)]
        names.append(tmp_path / f"{i}.png")
        references.append(refs)
        lines.append(json.dumps({"image": f"{i}.png", "captions": refs}))
    (tmp_path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    spice = _spice()
    result = vbstore.get_result("cap_writer:tiny@v1", "captioning",
                                str(tmp_path / "samples.jsonl"), store=store,
                                params={"spice": spice}, progress=False)

    captioning = importlib.import_module("clip_benchmark.metrics.captioning")
    if not spice:
        monkeypatch.setattr(captioning, "Spice", _NoSpice)
    model, transform, _ = load_writer("tiny", "v1")
    model.eval()
    images = [transform(Image.open(p).convert("RGB")) for p in names]
    batches = [(torch.stack(images[i:i + 3]), references[i:i + 3]) for i in range(0, 8, 3)]
    theirs = captioning.evaluate(model, batches, batch_size=3, device="cpu",
                                 transform=transform)
    _compare(result.metrics, theirs, spice)


@pytest.fixture(scope="session")
def coca_site(tmp_path_factory) -> Path:
    """A folder holding transformers (and the huggingface_hub it needs) for CoCa.generate;
    ``VBSTORE_COCA_SITE`` may name one that already does."""
    given = os.environ.get("VBSTORE_COCA_SITE")
    if given:
        return Path(given)
    target = tmp_path_factory.mktemp("coca")
    # --no-compile: the run imports a few of transformers' thousands of modules
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                    "--disable-pip-version-check", "--target", str(target), *COCA_GENERATE],
                   check=True)
    return target


def test_coca_captioning_equals_clip_benchmark(clip_benchmark_site, coca_site, tmp_path):
    spice = _spice()
    path = os.pathsep.join([str(coca_site), *map(str, clip_benchmark_site), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": path, "VBSTORE_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("coca_captioning_run.py")),
                           str(tmp_path / "work"), "1" if spice else "0"],
                          env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    _compare(out["ours"], out["theirs"], spice)
    assert len(set(out["written"])) > 1  # the captions differ from image to image
    # the same decoding, the same captions: vbstore's stored ones are the model's generate,
    # decoded as CLIP_benchmark decodes it
    assert out["ours_written"] == out["written"]
