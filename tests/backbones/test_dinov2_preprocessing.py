"""DINOv2's preprocessing is VisBench's: the shorter side resized to 224, then a centre crop of
224 (before: resize 256, crop 224), and the alias key of a dinov2 spec names the version, so a
store that resolved the spec under the old preprocessing builds the new backbone."""

from vbstore.backbones import spec_params
from vbstore.backbones.dinov2 import DINOV2_CFG


def test_short_side_224_then_centre_crop_224_as_torchvision_does():
    # torchvision: Resize(224) keeps the aspect (long side int(224 * long / short)), then
    # CenterCrop(224) at int(round((size - 224) / 2)): on a 640 x 480 photo
    resized, box = DINOV2_CFG.geometry(640, 480)
    assert resized == (int(224 * 640 / 480), 224)
    left = round((int(224 * 640 / 480) - 224) / 2.0)
    assert box == (left, 0, left + 224, 224)
    assert (DINOV2_CFG.interpolation, DINOV2_CFG.crop) == ("bicubic", "center")
    # another input size resizes to it too (VisBench: Resize(image_size), CenterCrop(image_size))
    assert DINOV2_CFG.with_input_size(518).resize == 518


def test_the_alias_of_a_dinov2_spec_names_its_preprocessing_version():
    assert spec_params("dinov2_vits14", weights="random")["preprocessing"] == 2
    # other sources' aliases (and so their stored keys) are unchanged
    assert "preprocessing" not in spec_params("test_vit", weights="random")
