"""extract() across every adapter family: shapes, one forward for many layers, pooling, records."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vbstore import canonical
from vbstore.backbones import BackboneCfg, build_backbone, preprocess, spec_params
from vbstore.errors import UsageError


def _first_conv(module: torch.nn.Module) -> torch.nn.Module:
    # every image enters these networks through one first convolution (stem or patch embedding)
    return next(m for m in module.modules() if isinstance(m, torch.nn.Conv2d))


def test_several_layers_come_from_one_forward_pass(built, case, make_batch):
    backbone = built(case)
    calls = []
    handle = _first_conv(backbone.module).register_forward_hook(lambda *_: calls.append(1))
    layers = [0, backbone.num_blocks // 2, -1]
    try:
        out = backbone.extract(make_batch(backbone), layers=layers)
    finally:
        handle.remove()
    assert len(calls) == 1
    assert list(out["layers"]) == layers
    assert out["dense"] is out["layers"][-1]["dense"]
    assert out["pooled"] is out["layers"][-1]["pooled"]
    assert out["grid_hw"] == out["layers"][-1]["grid_hw"]


def test_layer_shapes_match_the_recorded_geometry(built, case, make_batch):
    backbone = built(case)
    geometry = backbone.geometry()
    size = backbone.cfg.input_size
    layers = list(range(backbone.num_blocks))
    out = backbone.extract(make_batch(backbone, n=3), layers=layers)
    for index in layers:
        feats = out["layers"][index]
        n, channels, height, width = feats["dense"].shape
        assert (n, channels) == (3, geometry["layer_dims"][index])
        assert (
            feats["grid_hw"] == (height, width) == (size // geometry["layer_strides"][index],) * 2
        )
        assert feats["pooled"].shape[0] == 3
    assert out["pooled"].shape == (3, geometry["embed_dim"])
    assert geometry["num_blocks"] == backbone.num_blocks


def test_each_layer_equals_its_single_layer_extraction(built, case, make_batch):
    backbone = built(case)
    images = make_batch(backbone)
    together = backbone.extract(images, layers=[-1, 0])
    for layer in (0, -1):
        alone = backbone.extract(images, layers=layer)
        torch.testing.assert_close(together["layers"][layer]["dense"], alone["dense"])
        torch.testing.assert_close(together["layers"][layer]["pooled"], alone["pooled"])
    assert not torch.equal(
        together["layers"][0]["pooled"][:, :4], together["layers"][-1]["pooled"][:, :4]
    )


def test_pooling_modes(built, case, make_batch):
    backbone = built(case)
    images = make_batch(backbone)
    dense = backbone.extract(images, pooling="none")
    assert dense["pooled"] is None
    for mode in ("mean", "gap"):
        torch.testing.assert_close(
            backbone.extract(images, pooling=mode)["pooled"], dense["dense"].mean(dim=(2, 3))
        )
    if backbone.has_cls_token:
        assert backbone.default_pooling == "cls"
        assert backbone.extract(images, pooling="cls")["pooled"].shape == (2, backbone.embed_dim)
    else:
        assert backbone.default_pooling == "gap"
        with pytest.raises(UsageError, match="gap"):
            backbone.extract(images, pooling="cls")


def test_bad_requests_name_the_fix(built, case, make_batch):
    backbone = built(case)
    images = make_batch(backbone)
    n = backbone.num_blocks
    with pytest.raises(UsageError, match=f"0..{n - 1}"):
        backbone.extract(images, layers=[n])
    with pytest.raises(UsageError, match="one of"):
        backbone.extract(images, pooling="max")
    with pytest.raises(UsageError, match="preprocess"):
        backbone.extract(images[0])
    assert backbone.resolve_layers([-1, 0]) == (n - 1, 0)


def test_record_is_canonical_and_complete(built, case):
    backbone = built(case)
    record = backbone.record()
    assert canonical.loads(canonical.dumps(record)) == record
    assert {
        "source",
        "architecture",
        "weights",
        "revision",
        "preprocessing",
        "geometry",
        "default_pooling",
    } <= set(record)
    weights = record["weights"]
    assert (weights["origin"], weights["seed"], len(weights["tensor_hash"])) == ("random", 0, 64)
    assert record["preprocessing"]["input_size"] == backbone.cfg.input_size
    assert record["default_pooling"] in record["poolings"]
    params = backbone.spec_params()
    assert (params["source"], params["weights"], params["seed"]) == (record["source"], "random", 0)


def test_spec_params_of_a_built_backbone_match_the_cheap_ones(built):
    backbone = built("timm_vit")
    assert backbone.spec_params() == spec_params("timm:test_vit", weights="random", input_size=64)


def test_timm_vit_matches_timms_own_features(built, make_batch):
    backbone = built("timm_vit")
    images = make_batch(backbone)
    with torch.inference_mode():
        tokens = backbone.module.forward_features(images)
    torch.testing.assert_close(backbone.extract(images, pooling="cls")["pooled"], tokens[:, 0])
    torch.testing.assert_close(
        backbone.extract(images)["dense"].flatten(2).transpose(1, 2), tokens[:, 1:]
    )


def test_torchvision_resnet_last_block_is_the_trunk_output(built, make_batch):
    backbone = built("torchvision_cnn")
    images = make_batch(backbone)
    trunk = torch.nn.Sequential(*list(backbone.module.children())[:-2])
    with torch.inference_mode():
        expected = trunk(images)
    torch.testing.assert_close(backbone.extract(images, layers=-1)["dense"], expected)


def test_torchvision_vit_cls_is_the_encoder_output(built, make_batch):
    backbone = built("torchvision_vit")
    model, images = backbone.module, make_batch(backbone)
    with torch.inference_mode():
        tokens = model._process_input(images)
        tokens = model.encoder(torch.cat([model.class_token.expand(2, -1, -1), tokens], dim=1))
    torch.testing.assert_close(backbone.extract(images)["pooled"], tokens[:, 0])


def test_open_clip_projection_is_part_of_identity(tiny_clip, built, make_batch):
    plain = built("open_clip")
    projected = build_backbone(f"open_clip:{tiny_clip}", weights="random", use_projection=True)
    assert plain.weights_record() == projected.weights_record()
    assert plain.record()["params"] == {"use_projection": False}
    assert projected.record()["params"] == {"use_projection": True}
    assert plain.spec_params() != projected.spec_params()
    images = make_batch(plain)
    with torch.inference_mode():
        expected = projected.module.encode_image(images)
    out = projected.extract(images, layers=[0, -1])
    torch.testing.assert_close(out["pooled"], expected)
    assert out["pooled"].shape == (2, 16)
    assert projected.embed_dim == 16
    assert plain.extract(images)["pooled"].shape == (2, 32)
    assert plain.embed_dim == 32
    torch.testing.assert_close(
        out["layers"][0]["pooled"], plain.extract(images, layers=0)["pooled"]
    )


def test_open_clip_text_tower(built):
    backbone = built("open_clip")
    text = backbone.encode_text(["a photo of a cat", "a photo of a dog"], normalize=True)
    assert text.shape == (2, 16)
    torch.testing.assert_close(text.norm(dim=-1), torch.ones(2))


def test_dinov2_drops_register_tokens_and_pins_the_commit(built, make_batch):
    from vbstore.backbones.dinov2 import DINOV2_COMMIT

    backbone = built("dinov2")
    out = backbone.extract(make_batch(backbone), layers=[0, 1, 2])
    assert out["grid_hw"] == (4, 4)  # 56 px / patch 14, registers excluded
    assert backbone.num_prefix_tokens == 5
    assert backbone.record()["revision"] == DINOV2_COMMIT


def test_preprocess_follows_the_cfg():
    cfg = BackboneCfg(
        input_size=8,
        resize=10,
        mean=(0.5, 0.25, 0.0),
        std=(0.5, 0.25, 1.0),
        interpolation="bilinear",
    )
    image = Image.new("RGB", (30, 20), (255, 0, 51))
    tensor = preprocess(cfg, image)
    assert tensor.shape == (3, 8, 8)
    assert tensor.dtype == torch.float32
    torch.testing.assert_close(tensor[:, 0, 0], torch.tensor([1.0, -1.0, 0.2]))
    assert cfg(image).shape == (3, 8, 8)
    squashed = preprocess(BackboneCfg(input_size=8, resize=8, crop="squash"), image)
    assert squashed.shape == (3, 8, 8)


@pytest.mark.parametrize(("mean", "std"), [((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
                                           ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
                                           ((0.48145466, 0.4578275, 0.40821073),
                                            (0.26862954, 0.26130258, 0.27577711))])
def test_preprocess_is_bit_for_bit_the_per_pixel_normalization(mean, std):
    """The table lookup gives exactly what ``(float32(v) / 255 - mean) / std`` per pixel gives
    (what preprocess computed before, and what every stored feature was made from): every 8-bit
    value in every channel, from a PIL image, an array and a grayscale image."""
    import numpy as np

    cfg = BackboneCfg(input_size=16, resize=16, mean=mean, std=std, interpolation="bilinear")
    rng = np.random.default_rng(0)
    pixels = rng.permutation(np.tile(np.arange(256, dtype=np.uint8), 3 * 16 * 16 // 256 + 3)
                             )[:16 * 16 * 3].reshape(16, 16, 3)
    pixels[0, :, :] = np.arange(16, dtype=np.uint8)[:, None] * 17  # 0 and 255 in each channel

    def per_pixel(array: np.ndarray) -> torch.Tensor:
        scaled = np.asarray(array, dtype=np.float32) / 255.0
        normalized = (scaled - np.asarray(mean, dtype=np.float32)) / np.asarray(std,
                                                                                 dtype=np.float32)
        return torch.from_numpy(np.ascontiguousarray(normalized.transpose(2, 0, 1)))

    gray = Image.fromarray(np.ascontiguousarray(pixels[..., 0]))
    for image in (Image.fromarray(pixels), pixels, gray):
        tensor = preprocess(cfg, image)
        expected = per_pixel(np.asarray(Image.fromarray(np.asarray(image)).convert("RGB")))
        assert tensor.dtype == torch.float32
        assert tensor.is_contiguous()
        assert torch.equal(tensor, expected)
    levels = np.arange(256, dtype=np.uint8)
    every = np.stack([np.tile(levels, (256, 1))] * 3, axis=-1)  # each value, each channel
    wide = BackboneCfg(input_size=256, resize=256, mean=mean, std=std, interpolation="nearest")
    assert torch.equal(preprocess(wide, every), per_pixel(every))


def test_cfg_input_size_override_keeps_the_crop_ratio():
    cfg = BackboneCfg(input_size=224, resize=256)
    assert cfg.with_input_size(64).resize == 73
    assert cfg.with_input_size(None) is cfg
    with pytest.raises(ValueError, match="crop"):
        BackboneCfg(crop="corner")
    with pytest.raises(ValueError, match="resize"):
        BackboneCfg(input_size=256, resize=224)


def test_backbone_preprocess_uses_its_input_size(built):
    backbone = built("torchvision_cnn")
    assert backbone.preprocess(Image.new("RGB", (100, 80))).shape == (3, 64, 64)


@pytest.mark.parametrize("timm_case", ["timm_vit", "timm_cnn"])
def test_timm_hook_fallback_matches_forward_intermediates(built, timm_case, make_batch):
    """Models without forward_intermediates go through hooks on feature_info modules."""
    native = built(timm_case)
    hooked = build_backbone(
        f"timm:{native.arch}", weights="random", input_size=native.cfg.input_size
    )
    hooked._native = False
    images = make_batch(native)
    layers = list(range(native.num_blocks))
    expected = native.extract(images, layers=layers)["layers"]
    got = hooked.extract(images, layers=layers)["layers"]
    for layer in layers:
        torch.testing.assert_close(got[layer]["dense"], expected[layer]["dense"])
        torch.testing.assert_close(got[layer]["pooled"], expected[layer]["pooled"])
