"""Backbone test fixtures: one small build per adapter family, shared across the session.

Builds are cached because a family's build (timm import, model init) dominates test time;
tests that change weights or environment build their own.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

from vbstore.backbones import _fetch, build_backbone, register_backbone
from vbstore.backbones._pins import record_code
from vbstore.backbones._registry import unregister_backbone
from vbstore.backbones.dinov2 import DINOV2_COMMIT

TINY_CLIP = "vbstore-test-clip"
TINY_CLIP_CONFIG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 3, "width": 32, "head_width": 16, "patch_size": 8},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}

# The contract the adapter relies on from facebookresearch/dinov2's hubconf, in miniature:
# entry points taking pretrained=, and
# get_intermediate_layers(n=list, reshape, return_class_token, norm).
FAKE_DINOV2_HUBCONF = textwrap.dedent("""
    import torch
    from torch import nn

    dependencies = ["torch"]


    class TinyDino(nn.Module):
        def __init__(self, num_register_tokens=0, depth=3, dim=24):
            super().__init__()
            self.patch_size, self.embed_dim, self.num_register_tokens = 14, dim, num_register_tokens
            self.patch_embed = nn.Conv2d(3, dim, 14, 14)
            self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
            self.register_tokens = nn.Parameter(torch.randn(1, max(num_register_tokens, 1), dim))
            self.mask_token = nn.Parameter(torch.zeros(1, dim))
            self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
            self.n_blocks = depth
            self.norm = nn.LayerNorm(dim)

        def get_intermediate_layers(
            self, x, n=1, reshape=False, return_class_token=False, norm=True
        ):
            b, _, h, w = x.shape
            t = self.patch_embed(x).flatten(2).transpose(1, 2)
            prefix = [self.cls_token.expand(b, -1, -1)]
            if self.num_register_tokens:
                prefix.append(self.register_tokens.expand(b, -1, -1))
            t = torch.cat(prefix + [t], dim=1)
            take = range(self.n_blocks - n, self.n_blocks) if isinstance(n, int) else n
            outs = []
            for i, blk in enumerate(self.blocks):
                t = t + torch.tanh(blk(t))
                if i in take:
                    outs.append(self.norm(t) if norm else t)
            cls = [o[:, 0] for o in outs]
            patches = [o[:, 1 + self.num_register_tokens:] for o in outs]
            if reshape:
                patches = [p.reshape(b, h // 14, w // 14, -1).permute(0, 3, 1, 2) for p in patches]
            return tuple(zip(patches, cls)) if return_class_token else tuple(patches)


    def dinov2_vits14(*, pretrained=True, **kwargs):
        assert not pretrained, "vbstore loads the weights itself"
        return TinyDino()


    def dinov2_vits14_reg(*, pretrained=True, **kwargs):
        assert not pretrained, "vbstore loads the weights itself"
        return TinyDino(num_register_tokens=4)
""")


def install_fake_dinov2(torch_home: Path) -> Path:
    """Put the miniature hub repo where torch.hub caches the pinned commit, as vbstore's own
    fetch of that commit would (its code digest remembered: see ``_pins.verify_code``)."""
    repo = Path(torch_home) / "hub" / f"facebookresearch_dinov2_{DINOV2_COMMIT}"
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "hubconf.py").write_text(FAKE_DINOV2_HUBCONF)
    record_code(repo, f"github:facebookresearch/dinov2@{DINOV2_COMMIT}")
    return repo


@pytest.fixture
def fake_dinov2():
    """``fake_dinov2(torch_home)``: install the miniature DINOv2 hub repo there."""
    return install_fake_dinov2


@pytest.fixture(autouse=True)
def _fresh_probes():
    """Network probe results are remembered per process; tests must not see each other's."""
    _fetch.forget_probes()
    yield
    _fetch.forget_probes()


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory) -> str:
    """Register a 3-block OpenCLIP config so the open_clip adapter runs in milliseconds."""
    import open_clip

    path = tmp_path_factory.mktemp("clip") / f"{TINY_CLIP}.json"
    path.write_text(json.dumps(TINY_CLIP_CONFIG))
    open_clip.add_model_config(path)
    return TINY_CLIP


# id -> (spec, build kwargs): the smallest real configuration of every adapter family
CASES = {
    "test_vit": ("test_vit", {}),
    "test_cnn": ("test_cnn", {}),
    "test_pixels": ("test_pixels", {}),
    "timm_vit": ("timm:test_vit", {"input_size": 64}),
    "timm_cnn": ("timm:test_resnet", {"input_size": 64}),
    "torchvision_cnn": ("torchvision:resnet18", {"input_size": 64}),
    "torchvision_vit": ("torchvision:vit_b_16", {"input_size": 32}),
    "open_clip": (f"open_clip:{TINY_CLIP}", {}),
    "dinov2": ("dinov2:dinov2_vits14_reg", {"input_size": 56}),
}


@pytest.fixture(scope="session")
def built(tmp_path_factory, tiny_clip):
    """``built(case_id)``: that case built once per session with random weights (seed 0)."""
    cache = {}
    torch_home = tmp_path_factory.mktemp("torch-home")
    install_fake_dinov2(torch_home)

    def get(case: str):
        if case not in cache:
            spec, kwargs = CASES[case]
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("TORCH_HOME", str(torch_home))
                cache[case] = build_backbone(spec, weights="random", **kwargs)
        return cache[case]

    return get


def pytest_generate_tests(metafunc):
    # a test taking `case` runs once per adapter family in CASES
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", list(CASES))


@pytest.fixture
def make_batch():
    """``make_batch(backbone, n=2, seed=0)``: a reproducible random batch at its input size."""

    def make(backbone, n: int = 2, seed: int = 0) -> torch.Tensor:
        size = backbone.cfg.input_size
        return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(seed))

    return make


@pytest.fixture
def plugin():
    """Register a user plugin for one test, then remove it."""
    names = []

    def register(fn, **kwargs):
        register_backbone(**kwargs)(fn)
        names.append(fn.__name__)
        return fn

    yield register
    for name in names:
        unregister_backbone(name)
