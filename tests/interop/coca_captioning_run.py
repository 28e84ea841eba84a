"""Run by test_captioning_conformance.py in a process of its own (transformers 4.x before 4.57
and its huggingface_hub on sys.path): a tiny random CoCa checkpoint through ``open_clip:`` in
vbstore, and the same model in CLIP_benchmark 1.6.2's ``captioning.evaluate`` (loaded as its
open_clip loader loads a checkpoint); prints both metrics, the captions the model writes (decoded
as CLIP_benchmark decodes them) and the captions vbstore stored, as JSON.

Usage: ``python coca_captioning_run.py WORKDIR SPICE`` (SPICE: 1 to score it, 0 to leave it
out of both).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import open_clip
import torch
from open_clip.tokenizer import _tokenizer
from PIL import Image

SIZE = 32
TINY_COCA = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": SIZE, "layers": 2, "width": 32, "head_width": 16,
                   "patch_size": 16, "attentional_pool": True, "attn_pooler_heads": 2,
                   "attn_pooler_queries": 8, "output_tokens": True},
    "text_cfg": {"context_length": 76, "vocab_size": 49408, "width": 32, "heads": 2,
                 "layers": 1, "embed_cls": True, "output_tokens": True},
    "multimodal_cfg": {"context_length": 76, "vocab_size": 49408, "width": 32, "heads": 2,
                       "layers": 1, "attn_pooler_heads": 2},
    "custom_text": True,
}
DECODING = {"seq_len": 12}  # CoCa's beam search, shorter captions: a quick run on CPU


def _images(folder: Path, n: int) -> list[str]:
    """Flat colours with a band of noise: images a random tower tells apart."""
    rng = np.random.default_rng(3)
    names = []
    for i in range(n):
        pixels = np.broadcast_to(rng.integers(0, 256, size=3, dtype=np.uint8),
                                 (SIZE, SIZE, 3)).copy()
        pixels[: SIZE // 4] = rng.integers(0, 256, size=(SIZE // 4, SIZE, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i}.png")
        names.append(f"{i}.png")
    return names


def _checkpoint(path: Path) -> None:
    """A tiny CoCa whose matrices are drawn at unit gain: open_clip's own random init writes
    the same caption for every image."""
    from safetensors.torch import save_file

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = open_clip.create_model("tiny_coca")
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0, p.shape[-1] ** -0.5)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))


def _write_list(folder: Path, names: list[str], references: list[list[str]]) -> str:
    lines = [json.dumps({"image": n, "captions": refs})
             for n, refs in zip(names, references, strict=True)]
    path = folder / "samples.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def main(work: Path, spice: bool) -> None:
    import vbstore  # after sys.path is set: the caller's order

    configs = work / "configs"
    configs.mkdir(parents=True)
    (configs / "tiny_coca.json").write_text(json.dumps(TINY_COCA))
    open_clip.add_model_config(configs)
    data = work / "data"
    data.mkdir()
    names = _images(data, 4)
    params = {"spice": spice, **DECODING}
    store = vbstore.Store(work / "store")
    weights = work / "tiny_coca.safetensors"
    _checkpoint(weights)

    model, _, transform = open_clip.create_model_and_transforms("tiny_coca",
                                                                pretrained=str(weights))
    model.eval()
    generate = model.generate
    model.generate = lambda images: generate(images, **DECODING)  # CoCa's defaults, but these
    images = torch.stack([transform(Image.open(data / n).convert("RGB")) for n in names])

    # 1: the captions the model writes, decoded as CLIP_benchmark decodes them, so that the
    # references can share words with them
    with torch.no_grad():
        written = [_tokenizer.decode(row).split("<end_of_text>")[0]
                   .replace("<start_of_text>", "").strip()
                   for row in model.generate(images).cpu().numpy()]
    references = [[" ".join(c.split()[: max(1, len(c.split()) // 2)]) + " on a table",
                   "a photo of something"] for c in written]

    # 2: vbstore and CLIP_benchmark on the same data
    ours = vbstore.get_result("open_clip:tiny_coca", "captioning",
                              _write_list(data, names, references), weights=str(weights),
                              store=store, params=params, progress=False)

    from clip_benchmark.metrics import captioning

    if not spice:  # offline its CoreNLP jars cannot be fetched: its scorer list without it
        class NoSpice:
            def method(self) -> str:
                return "SPICE"

            def compute_score(self, gts, res):
                return math.nan, []

        captioning.Spice = NoSpice
    theirs = captioning.evaluate(model, [(images, references)], batch_size=4, device="cpu",
                                 transform=transform)
    print(json.dumps({"ours": ours.metrics, "theirs": theirs, "written": written,
                      "ours_written": json.loads(store.read_bytes(
                          ours.record.inputs["captions"]))["captions"]}, default=float))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] == "1")
