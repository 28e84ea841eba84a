"""CLIP_benchmark's ``--dump_classnames`` / ``--dump_templates`` on a clip-benchmark export: the
class names and templates the result's prompts were made of."""

from __future__ import annotations

import json

import pytest

# open_clip's smallest built-in CLIP, random weights (no download): a real open_clip model whose
# towers cost a fifth of ViT-B-32's (the text tower, run on every prompt, most of it)
CLIP = "open_clip:ViT-S-32-alt"
COMMON = ("-b", CLIP, "--weights", "random", "--input-size", "32", "--split", "val")

pytestmark = pytest.mark.slow


def _rows(run, *flags):
    out = run("export", "results", "--format", "clip-benchmark", *flags)
    assert out.exit_code == 0, out.output
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_dumps_name_the_prompts_each_result_used(run, shapes, tmp_path):
    templates = tmp_path / "t.txt"
    templates.write_text("a drawing of a {c}.\nart of the {c}.\n")
    names = tmp_path / "names.txt"
    names.write_text("\n".join(f"shape {i}" for i in range(5)) + "\n")
    for extra in (("-p", "templates=photo"),
                  ("-p", f"templates={templates}", "-p", f"classnames={names}")):
        out = run("get", "result", *COMMON, "-t", "zeroshot_classification", "-d", shapes, *extra)
        assert out.exit_code == 0, out.output
    plain = _rows(run)
    assert all("classnames" not in r and "templates" not in r for r in plain)
    rows = sorted(_rows(run, "--dump-classnames", "--dump-templates"),
                  key=lambda r: len(r["templates"]))
    photo, custom = rows
    assert photo["templates"] == ["a photo of a {c}."]
    assert photo["classnames"] == sorted(photo["classnames"])  # the folder's classes, in order
    assert len(photo["classnames"]) == 5
    assert custom["templates"] == ["a drawing of a {c}.", "art of the {c}."]
    assert custom["classnames"] == [f"shape {i}" for i in range(5)]
    only = _rows(run, "--dump-templates")
    assert all("classnames" not in r for r in only)
    refused = run("export", "results", "--dump-templates")
    assert refused.exit_code == 2
    assert "add --format clip-benchmark" in refused.output
