"""A tiny CLIP for tests of the zero-shot paths: a linear image tower over 16 px images and a
word-embedding text tower, registered under a loader name for one test module
(``vbstore.backbones.register_clip_loader``), so ``NAME:tiny@v1`` is a CLIP backbone offline.

```python
@pytest.fixture(scope="module", autouse=True)
def _clip():
    with registered_clip("mine_clip", clip_loader(ordered=True)):
        yield
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torchvision import transforms

from vbstore.backbones import register_clip_loader

SIZE = 16


class TinyClip(torch.nn.Module):
    """``ordered``: the text tower weighs each word by its position, so word order matters
    (Winoground's swaps, CuPL's sentences); otherwise a bag of words."""

    def __init__(self, ordered: bool = False) -> None:
        super().__init__()
        self.visual = torch.nn.Linear(3 * SIZE * SIZE, 8)
        self.words = torch.nn.Embedding(64, 8)
        self.ordered = ordered
        if ordered:
            self.order = torch.nn.Linear(8, 8)

    def encode_image(self, images):
        return self.visual(images.flatten(1))

    def encode_text(self, tokens):
        emb = self.words(tokens)
        if not self.ordered:
            return emb.mean(dim=1)
        weights = torch.arange(1, tokens.shape[1] + 1, dtype=emb.dtype)[None, :, None]
        return self.order((emb * weights).mean(dim=1))


def word_tokens(width: int) -> Callable[[list[str]], torch.Tensor]:
    """A tokenizer: each word's character sum modulo 64, the first ``width`` words, 0-padded."""
    def tokenize(texts):
        ids = [[sum(map(ord, w)) % 64 for w in t.split()][:width] for t in texts]
        return torch.tensor([row + [0] * (width - len(row)) for row in ids])

    return tokenize


def clip_loader(*, ordered: bool = False, normalize: bool = False,
                tokenize: Callable[[list[str]], torch.Tensor] | None = None) -> Callable[..., Any]:
    """An open_clip-style loader of :class:`TinyClip`, its weights seeded by the pretrained
    tag (``tiny@v1`` and ``tiny@v2`` differ); ``normalize``: the transform normalizes."""
    tokenize = tokenize or word_tokens(8 if ordered else 6)
    steps = [transforms.Resize(SIZE), transforms.CenterCrop(SIZE), transforms.ToTensor()]
    if normalize:
        steps.append(transforms.Normalize((0.5,) * 3, (0.25,) * 3))

    def load(model_name, pretrained, cache_dir=None, device="cpu"):
        torch.manual_seed(sum(map(ord, pretrained or "random")))
        return TinyClip(ordered).to(device), transforms.Compose(steps), tokenize

    return load


@contextmanager
def registered_clip(name: str, load: Callable[..., Any]) -> Iterator[None]:
    """``load`` registered as CLIP loader ``name`` for the block, unregistered after it."""
    from vbstore.backbones import _clip_loaders
    from vbstore.backbones._registry import unregister_backbone

    register_clip_loader(name)(load)
    try:
        yield
    finally:
        unregister_backbone(name)
        _clip_loaders._LOADERS.pop(name)
