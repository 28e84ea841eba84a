"""CLIP_benchmark's per-dataset class-name and template files (``--custom_classname_file``,
``--custom_template_file``, CuPL's class-specific prompts among them) on ``cb:`` data: read by
its own builder, so the classes and prompts are the ones it uses in its own process."""

from __future__ import annotations

import json

import pytest
from test_cb_data import _mnist

import vbstore
from vbstore.data import load_manifest
from vbstore.errors import UsageError

pytestmark = pytest.mark.slow

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]

_THEIRS = """
import json, sys
from clip_benchmark.datasets.builder import build_dataset
ds = build_dataset("mnist", root=sys.argv[1], split="test", transform=None, download=False,
                   custom_classname_file=sys.argv[2], custom_template_file=sys.argv[3])
print(json.dumps({"classes": ds.classes, "templates": ds.templates}))
"""


def test_custom_files_are_read_as_clip_benchmark_reads_them(clip_benchmark, clip_benchmark_peer,
                                                            store, tmp_path):
    _mnist(tmp_path / "mnist")
    names, templates = tmp_path / "names.json", tmp_path / "templates.json"
    names.write_text(json.dumps({"mnist": NAMES, "cifar10": ["a", "b"]}))
    templates.write_text(json.dumps({"mnist": ["a digit {c}.", "the number {c}."]}))
    view = load_manifest(store, "cb:mnist", split="test", dataset_root=str(tmp_path / "mnist"),
                         custom_classname_file=str(names), custom_template_file=str(templates))
    out = clip_benchmark_peer(_THEIRS, str(tmp_path / "mnist"), str(names), str(templates))
    theirs = json.loads(out.strip().splitlines()[-1])
    assert view.doc["classes"] == theirs["classes"] == NAMES
    assert view.doc["source"]["templates"] == theirs["templates"]
    assert view.doc["source"]["custom_template_file"].startswith("sha256:")
    # another file content is another sample list and manifest
    templates.write_text(json.dumps({"mnist": ["a {c}."]}))
    again = load_manifest(store, "cb:mnist", split="test", dataset_root=str(tmp_path / "mnist"),
                          custom_classname_file=str(names), custom_template_file=str(templates))
    assert again.doc["source"]["templates"] == ["a {c}."]


def test_class_specific_prompts_make_the_classifier(clip_benchmark, store, tmp_path):
    _mnist(tmp_path / "mnist")
    cupl = tmp_path / "cupl.json"
    per_class = {str(i): [f"a handwritten {i}.", f"the digit {i}"][:1 + i % 2] for i in range(10)}
    cupl.write_text(json.dumps({"mnist": per_class}))
    options = {"dataset_root": str(tmp_path / "mnist"), "custom_template_file": str(cupl)}
    view = load_manifest(store, "cb:mnist", split="test", **options)
    prompts = view.doc["source"]["class_prompts"]
    assert prompts[0] == ["a handwritten 0."]
    assert prompts[1] == ["a handwritten 1.", "the digit 1"]
    assert "templates" not in view.doc["source"]
    kw = dict(store=store, progress=False, split="test", weights="random", input_size=32)
    clip = "open_clip:ViT-S-32-alt"  # the smallest built-in CLIP, random weights
    result = vbstore.get_result(clip, "zeroshot_classification", "cb:mnist",
                                params={"templates": "dataset"}, data_options=options, **kw)
    assert set(result.metrics) == {"acc1", "acc5", "mean_per_class_recall"}
    names = tmp_path / "n.txt"
    names.write_text("\n".join(NAMES))
    with pytest.raises(UsageError, match="class-specific prompts name their classes"):
        vbstore.get_result(clip, "zeroshot_classification", "cb:mnist",
                           params={"templates": "dataset", "classnames": str(names)},
                           data_options=options, **kw)


def test_a_file_clip_benchmark_ships_is_found_by_it(clip_benchmark, store, tmp_path):
    _mnist(tmp_path / "mnist")
    # cupl_prompts.json holds ImageNet's classes only: CLIP_benchmark falls back to them for
    # mnist, whose classes they do not name
    with pytest.raises(UsageError, match="gives class '0' no list of prompts"):
        load_manifest(store, "cb:mnist", split="test", dataset_root=str(tmp_path / "mnist"),
                      custom_template_file="cupl_prompts.json")
