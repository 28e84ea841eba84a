"""Weights: seeded random init, checkpoints in any format, warm caches, and their identity."""

from __future__ import annotations

import blake3
import pytest
import torch
from safetensors.torch import save_file

from vbstore.backbones import (
    CheckpointError,
    CheckpointNotFound,
    UnknownBackbone,
    WeightsUnavailable,
    build_backbone,
    spec_params,
)
from vbstore.backbones.dinov2 import DINOV2_COMMIT, weights_url
from vbstore.store._tensors import safetensors_identity, tensor_identity


class NotWeights:
    """A pickled object that is not a tensor: weights-only loading must refuse it."""


def _save_both(state: dict, tmp_path, stem: str = "w"):
    state = {k: v.detach().clone().contiguous() for k, v in state.items()}
    pth, st = tmp_path / f"{stem}.pth", tmp_path / f"{stem}.safetensors"
    torch.save(state, pth)
    save_file(state, str(st))
    return pth, st


@pytest.mark.parametrize(
    ("spec", "kwargs"),
    [
        ("test_vit", {}),
        ("timm:test_vit", {"input_size": 32}),
        ("torchvision:mobilenet_v3_small", {"input_size": 32}),
    ],
)
def test_random_init_is_deterministic_per_seed(spec, kwargs, make_batch):
    rng_before = torch.random.get_rng_state()
    first = build_backbone(spec, weights="random", seed=7, **kwargs)
    assert torch.equal(torch.random.get_rng_state(), rng_before), (
        "building must not move the caller's RNG"
    )
    again = build_backbone(spec, weights="random", seed=7, **kwargs)
    other = build_backbone(spec, weights="random", seed=8, **kwargs)
    assert first.weights_record() == again.weights_record()
    assert first.weights_record()["seed"] == 7
    assert first.weights_record()["origin"] == "random"
    assert other.weights_record()["tensor_hash"] != first.weights_record()["tensor_hash"]
    images = make_batch(first)
    torch.testing.assert_close(
        first.extract(images)["pooled"], again.extract(images)["pooled"], rtol=0, atol=0
    )


@pytest.mark.parametrize(
    ("spec", "kwargs"),
    [
        ("test_vit", {}),
        ("test_cnn", {}),
        ("timm:test_vit", {"input_size": 32}),
        ("torchvision:mobilenet_v3_small", {"input_size": 32}),
    ],
)
def test_same_weights_in_pth_and_safetensors_are_one_identity(spec, kwargs, tmp_path, make_batch):
    source = build_backbone(spec, weights="random", seed=3, **kwargs)
    pth, st = _save_both(source.module.state_dict(), tmp_path)
    from_pth = build_backbone(spec, weights=str(pth), **kwargs)
    from_st = build_backbone(spec, weights=st, **kwargs)
    expected = source.weights_record()["tensor_hash"]
    assert (
        from_pth.weights_record()["tensor_hash"]
        == from_st.weights_record()["tensor_hash"]
        == expected
    )
    assert safetensors_identity(st) == expected
    assert from_pth.weights_record() == {
        "tensor_hash": expected,
        "origin": "checkpoint",
        "upstream": None,
        "revision": None,
        "path": None,
        "seed": None,
    }
    images = make_batch(source)
    torch.testing.assert_close(from_st.extract(images)["pooled"], source.extract(images)["pooled"])

    perturbed = {k: v.clone() for k, v in source.module.state_dict().items()}
    name = next(k for k, v in perturbed.items() if v.is_floating_point())
    perturbed[name].view(-1)[0] += 1e-3
    _, changed = _save_both(perturbed, tmp_path, "changed")
    assert (
        build_backbone(spec, weights=changed, **kwargs).weights_record()["tensor_hash"] != expected
    )


def test_training_wrappers_do_not_change_identity(tmp_path):
    source = build_backbone("test_vit", weights="random", seed=1)
    wrapped = {
        "epoch": 3,
        "state_dict": {f"module.{k}": v for k, v in source.module.state_dict().items()},
    }
    path = tmp_path / "trainer.ckpt"
    torch.save(wrapped, path)
    built = build_backbone("test_vit", weights=path)
    assert built.weights_record()["tensor_hash"] == source.weights_record()["tensor_hash"]


def test_spec_params_name_a_checkpoint_by_its_bytes(tmp_path):
    pth, st = _save_both(build_backbone("test_cnn", weights="random").module.state_dict(), tmp_path)
    params = spec_params("test_cnn", weights=pth)
    assert params["weights"] == "checkpoint"
    assert params["checkpoint"] == blake3.blake3(pth.read_bytes()).hexdigest()
    assert str(tmp_path) not in str(params), "the alias key must not depend on where the file lives"
    assert spec_params("test_cnn", weights=st)["checkpoint"] != params["checkpoint"]


def test_checkpoint_of_another_architecture_is_refused(tmp_path):
    pth, _ = _save_both(build_backbone("test_cnn", weights="random").module.state_dict(), tmp_path)
    with pytest.raises(CheckpointError, match="missing") as info:
        build_backbone("test_vit", weights=pth)
    assert isinstance(info.value, ValueError)
    assert "architecture" in str(info.value)
    with pytest.raises(CheckpointError, match="does not fit"):
        build_backbone("timm:test_vit", weights=pth, input_size=32)


def test_checkpoint_that_needs_unpickling_code_is_refused(tmp_path):
    path = tmp_path / "pickled.pth"
    torch.save({"model": NotWeights()}, path)
    with pytest.raises(CheckpointError, match="weights only"):
        build_backbone("test_vit", weights=path)


def test_an_unknown_timm_tag_names_the_known_ones():
    # timm raises RuntimeError for an unknown tag; that must not escape as a traceback
    for spec, weights in [("timm:test_vit.nope", "default"), ("timm:test_vit", "nope")]:
        with pytest.raises(UnknownBackbone, match=r"timm has no weights 'test_vit\.nope'") as info:
            build_backbone(spec, weights=weights)
        assert "r160_in1k" in str(info.value)
    with pytest.raises(UnknownBackbone, match=r"--weights names another \('randm'\)"):
        build_backbone("timm:test_vit.r160_in1k", weights="randm")


def test_a_mistyped_weights_word_on_a_backbone_without_pretrained_weights_is_named():
    with pytest.raises(WeightsUnavailable, match=r"--weights 'randm' reads as a pretrained tag"):
        build_backbone("test_vit", weights="randm")


def test_missing_checkpoint(tmp_path):
    with pytest.raises(CheckpointNotFound) as info:
        build_backbone("test_vit", weights=tmp_path / "nope.safetensors")
    assert isinstance(info.value, FileNotFoundError)
    assert info.value.exit_code == 9


def test_fine_tuned_heads_load_into_the_backbone(tmp_path, make_batch):
    import timm

    tuned = timm.create_model("test_vit", num_classes=10, img_size=32).eval()
    path = tmp_path / "tuned.safetensors"
    save_file({k: v.contiguous() for k, v in tuned.state_dict().items()}, str(path))
    backbone = build_backbone("timm:test_vit", weights=path, input_size=32)
    images = make_batch(backbone)
    with torch.inference_mode():
        expected = tuned.forward_features(images)[:, 0]
    torch.testing.assert_close(backbone.extract(images)["pooled"], expected)
    assert backbone.weights_record()["tensor_hash"] == tensor_identity(tuned.state_dict())


def test_pretrained_weights_from_a_warm_hugging_face_cache(monkeypatch, tmp_path):
    import timm

    hf_home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = hf_home / "hub" / "models--timm--test_vit.r160_in1k"
    (repo / "snapshots" / sha).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    model = timm.create_model("test_vit")
    file = repo / "snapshots" / sha / "model.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(file))

    backbone = build_backbone("timm:test_vit", input_size=32)
    assert backbone.weights_record() == {
        "tensor_hash": safetensors_identity(file),
        "origin": "pretrained",
        "upstream": "hf://timm/test_vit.r160_in1k",
        "revision": sha,
        "path": None,
        "seed": None,
    }
    assert backbone.cfg.mean == (0.5, 0.5, 0.5)


def test_random_weights_named_like_a_pinned_torch_hub_file_are_refused(monkeypatch, tmp_path):
    """Issue 21: random weights saved as torchvision's resnet18 file were recorded as
    pretrained IMAGENET1K_V1; the name pins a sha256 prefix, which they do not have."""
    import torchvision

    from vbstore.errors import TamperedWeights

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    checkpoints = tmp_path / "torch" / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    torch.save(torchvision.models.resnet18().state_dict(), checkpoints / "resnet18-f37072fd.pth")
    with pytest.raises(TamperedWeights) as info:
        build_backbone("torchvision:resnet18", input_size=32)
    assert info.value.exit_code == 10
    assert "\n" not in str(info.value)
    assert "resnet18-f37072fd.pth" in str(info.value)
    assert "not the pinned f37072fd" in str(info.value)


def test_dinov2_pretrained_from_cache_at_the_pinned_commit(monkeypatch, tmp_path, fake_dinov2):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    fake_dinov2(tmp_path / "torch")
    source = build_backbone("dinov2:dinov2_vits14", weights="random", seed=5)
    url = weights_url("dinov2_vits14")
    assert url.endswith("/dinov2_vits14/dinov2_vits14_pretrain.pth")
    assert weights_url("dinov2_vitl14_reg").endswith(
        "/dinov2_vitl14/dinov2_vitl14_reg4_pretrain.pth"
    )
    checkpoints = tmp_path / "torch" / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    torch.save(source.module.state_dict(), checkpoints / "dinov2_vits14_pretrain.pth")
    backbone = build_backbone("dinov2:dinov2_vits14")
    assert backbone.weights_record() == {
        "tensor_hash": source.weights_record()["tensor_hash"],
        "origin": "pretrained",
        "upstream": url,
        "revision": DINOV2_COMMIT,
        "path": None,
        "seed": None,
    }


def test_pth_and_safetensors_of_one_state_dict_are_one_stored_backbone(tmp_path):
    """Docs promise one identity: the weights record, hence the backbone and its features, too.

    The .pth is saved the way training code often saves: with a ``module.`` prefix, in a
    wrapper, with non-contiguous tensors; the .safetensors holds plain contiguous copies.
    """
    from vbstore import Store
    from vbstore.engine import resolve_backbone

    state = build_backbone("test_cnn", weights="random", seed=5).module.state_dict()
    pth = tmp_path / "run" / "last.pth"
    pth.parent.mkdir()
    strided = {f"module.{k}": (v.t().contiguous().t() if v.dim() == 2 else v)
               for k, v in state.items()}
    torch.save({"epoch": 9, "state_dict": strided}, pth)
    st = tmp_path / "export.safetensors"
    save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, str(st))
    with Store(tmp_path / "store") as store:
        from_pth = resolve_backbone(store, "test_cnn", weights=str(pth))
        from_st = resolve_backbone(store, "test_cnn", weights=str(st))
        assert from_pth.doc["weights"] == from_st.doc["weights"]
        assert from_pth.id == from_st.id
