"""Bare names as VisBench users type them (``resnet18``, ``dinov2_vits14``, ``clip_vitb16``).

Each resolves to one pinned spec, the same weights VisBench 0.27 loads under that name (timm's
recipe tags, OpenAI's QuickGELU CLIP towers), so a bare name and its spec are one backbone with
one cache. A registered plugin of the same name wins: bare names are a fallback, never a shadow.
"""

from __future__ import annotations

# the DINOv2 hub models and their widths: bare names here, a catalog for the dinov2 source
# (``._builtins``)
DINOV2_CATALOG = {
    "dinov2_vits14": 384,
    "dinov2_vitb14": 768,
    "dinov2_vitl14": 1024,
    "dinov2_vitg14": 1536,
    "dinov2_vits14_reg": 384,
    "dinov2_vitb14_reg": 768,
    "dinov2_vitl14_reg": 1024,
    "dinov2_vitg14_reg": 1536,
}

# VisBench name -> vbstore spec. timm tags follow VisBench: in1k recipes, not the flattering
# 21k ones, so CNN and ViT rows compare architectures and objectives on one pretraining set.
BARE_NAMES: dict[str, str] = {
    "resnet18": "timm:resnet18.a1_in1k",
    "resnet50": "timm:resnet50.a1_in1k",
    "convnext_base": "timm:convnext_base.fb_in1k",
    "mae_vitb16": "timm:vit_base_patch16_224.mae",
    "supervised_vitb16": "timm:vit_base_patch16_224.augreg_in1k",
    "dino_vitb16": "timm:vit_base_patch16_224.dino",
    "dino_vitb8": "timm:vit_base_patch8_224.dino",
    "sam_vitb16": "timm:vit_base_patch16_224.sam_in1k",
    "siglip_vitb16": "timm:vit_base_patch16_siglip_gap_224.webli",
    "clip_vitb16": "open_clip:ViT-B-16-quickgelu@openai",
    "clip_vitb32": "open_clip:ViT-B-32-quickgelu@openai",
    **{name: f"dinov2:{name}" for name in DINOV2_CATALOG},
}


def bare_name(name: str) -> str | None:
    """The pinned spec a bare name stands for, or None."""
    return BARE_NAMES.get(name)
