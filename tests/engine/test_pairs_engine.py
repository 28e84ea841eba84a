"""Probes on triplets and pairs end to end: stored features reused, records, the CLI."""

from __future__ import annotations

import csv
import json

import numpy as np
from click.testing import CliRunner

import vbstore
from vbstore.cli import cli
from vbstore.data import load_manifest

TINY = dict(weights="random", input_size=32, progress=False)


def test_similarity_reuses_features_of_any_probe_on_the_same_images(store, forwards):
    view = load_manifest(store, "triplets:count=8,size=32", split="test")
    listing = view.root / "images.csv"
    with open(listing, "w", newline="") as f:  # the same files as a plain labelled list
        writer = csv.writer(f)
        writer.writerow(["image", "label"])
        writer.writerows([name, name.split("/")[0]] for name in view.names)
    vbstore.get_features("test_vit", str(listing), store=store, **TINY)
    forwards.clear()
    result = vbstore.get_result("test_vit", "similarity", "triplets:count=8,size=32",
                                split="test", store=store, **TINY)
    assert forwards == []  # every image was extracted by the first probe
    assert set(result.metrics) == {"accuracy", "f1", "precision", "recall", "tie_rate"}
    assert 0.0 <= result.metrics["accuracy"] <= 1.0
    assert result.record.protocol == "midvision_2afc"
    assert result.record.data["eval"]["samples"] == 24
    again = vbstore.get_result("test_vit", "similarity", "triplets:count=8,size=32",
                               split="test", store=store, **TINY)
    assert again.from_cache
    assert again.metrics == result.metrics


def test_run_similarity_from_the_cli(tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["--store", str(tmp_path / "s"), "run", "similarity", "-b",
                              "test_cnn", "--weights", "random", "--input-size", "32",
                              "--data", "triplets:count=4,size=32", "--split", "test", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["record"]["metrics"]["tie_rate"] == 0.0
    help_text = runner.invoke(cli, ["run", "similarity", "--help"]).output
    assert "data.csv" in help_text


def _flat_images(root, count=6, size=48):
    """A flat folder of unlabelled images (the first views of generated scenes)."""
    from PIL import Image

    from vbstore.data import make_scenes

    scenes = make_scenes(root / "scenes", per_split=count, seed=5, size=size)
    flat = root / "flat"
    flat.mkdir()
    for i in range(count):
        Image.open(scenes / "val" / "images" / f"{i:04d}.png").save(flat / f"{i:02d}.png")
    return flat


def test_correspondence_reuses_dense_features_and_its_derived_views(store, forwards, tmp_path):
    flat = _flat_images(tmp_path)
    vbstore.get_features("test_vit", str(flat), store=store, mode="dense", **TINY)
    forwards.clear()
    request = vbstore.engine.result_request("test_vit", "correspondence", str(flat),
                                            weights="random", input_size=32)
    plan = vbstore.engine.plan(request, store, dry_run=True)
    steps = {(s.op, s.role): s for s in plan.steps}
    assert steps[("featureset", "eval")].status == "stored"
    assert steps[("manifest", "views")].status == "compute"
    assert steps[("featureset", "views")].work["forward_passes"] == 6
    result = vbstore.get_result("test_vit", "correspondence", str(flat), store=store, **TINY)
    # the warped views only (a batch of one is the backbone's geometry probe on a blank input)
    assert [n for n in forwards if n > 1] == [6]
    assert result.record.protocol == "probe3d_homography_correspondence"
    assert result.metrics["ceiling_recall@10px"] >= result.metrics["recall@10px"]
    forwards.clear()
    other = vbstore.get_result("test_vit", "correspondence", str(flat), store=store,
                               params={"ratio": 0.8, "mutual": True}, **TINY)
    assert forwards == []  # the views are a stored dataset with stored features
    assert other.metrics["num_matches"] <= result.metrics["num_matches"]
    again = vbstore.get_result("test_vit", "correspondence", str(flat), store=store, **TINY)
    assert again.from_cache
    assert again.metrics == result.metrics
    vbstore.get_result("test_vit", "correspondence", str(flat), store=store,
                       params={"warp_seed": 1}, **TINY)
    assert [n for n in forwards if n > 1] == [6]  # another seed: other views, extracted once


def test_correspondence_beats_random_matching(store, tmp_path):
    import numpy as np
    import torch

    from vbstore.backbones import BackboneCfg
    from vbstore.data import image_sizes, load_manifest, view_homographies
    from vbstore.tasks import TensorSplit, WarpPairs, get_task

    flat = _flat_images(tmp_path, count=12, size=64)
    result = vbstore.get_result("test_vit", "correspondence", str(flat), store=store,
                                weights="random", input_size=64, progress=False)
    view = load_manifest(store, str(flat))
    g = torch.Generator().manual_seed(0)

    def noise():
        return TensorSplit([torch.randn(12, 32, 8, 8, generator=g)], torch.zeros(12, 3, 64, 64),
                           target_kind="image")

    cfg = BackboneCfg(input_size=64, resize=64)
    chance = get_task("correspondence").evaluate_views(WarpPairs(
        noise(), noise(), view_homographies(view, 0, 0.2), image_sizes(view), cfg.geometry, 64))
    assert np.isclose(chance["ceiling_recall@10px"], 1.0)
    assert result.metrics["recall@10px"] > 2 * chance["recall@10px"] + 0.1
    assert result.metrics["auc@10px"] > 2 * chance["auc@10px"]


def test_run_relative_pose_and_correspondence_from_the_cli(tmp_path):
    runner = CliRunner()
    base = ["--store", str(tmp_path / "s"), "run"]
    tiny = ["-b", "test_vit", "--weights", "random", "--input-size", "32", "--json"]
    out = runner.invoke(cli, [*base, "relative_pose", *tiny, "--data", "scenes:per_split=6,size=32",
                              "--split", "val", "--train-data", "scenes:per_split=6,size=32",
                              "--train-split", "train", "-p", "epochs=5"])
    assert out.exit_code == 0, out.output
    record = json.loads(out.output)["record"]
    assert set(record["metrics"]) == {"rotation_error", "translation_error", "acc@15deg",
                                      "acc@30deg"}
    assert record["extractor"]["mode"] == "dense"
    flat = _flat_images(tmp_path, count=3, size=32)
    out = runner.invoke(cli, [*base, "correspondence", *tiny, "--data", str(flat)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["record"]["metrics"]["num_matches"] >= 0
    empty = tmp_path / "empty"
    empty.mkdir()
    out = runner.invoke(cli, [*base, "correspondence", *tiny, "--data", str(empty)])
    assert out.exit_code == 2
    assert str(empty) in out.output


def test_keypoint_correspondence_on_a_spair_tree(store, tmp_path):
    """Identical images: every keypoint's own patch is its best match, and the error is the
    distance from the keypoint to its patch's centre: 1.41, 0 and 2.24 px here."""
    from PIL import Image

    root = tmp_path / "spair"
    (root / "JPEGImages" / "cat").mkdir(parents=True)
    (root / "PairAnnotation" / "test").mkdir(parents=True)
    pixels = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    for name in ("a.jpg", "b.png"):
        Image.fromarray(pixels).save(root / "JPEGImages" / "cat" / name.replace("jpg", "png"))
    points = [[3.0, 3.0], [20.0, 12.0], [30.0, 29.0]]
    doc = {"src_imname": "a.png", "trg_imname": "b.png", "category": "cat", "src_kps": points,
           "trg_kps": points, "trg_bndbox": [0, 0, 32, 30]}
    (root / "PairAnnotation" / "test" / "0-a-b:cat.json").write_text(json.dumps(doc))
    result = vbstore.get_result("test_vit", "keypoint_correspondence", str(root), split="test",
                                store=store, **TINY)
    # within 0.1 x 32 = 3.2 px: all three; within 1.6 px: two of three
    assert result.metrics == {"pck@0.1": 1.0, "pck@0.05": 2 / 3, "num_keypoints": 3.0}
    assert result.record.protocol == "spair_pck_bbox"
