"""CLIP_benchmark's ``--fewshot_k`` and ``--language`` as flags of ``get result``, ``run`` and
``sweep``: each is the same request (the same result id) as its ``-p`` form, a flag and ``-p``
that disagree are refused, and a language that reaches nothing is refused rather than recorded."""

from __future__ import annotations

import json

import pytest
from clip_support import clip_loader, registered_clip

CLIP = "flags_clip:tiny@v1"


_load = clip_loader()


@pytest.fixture(scope="module", autouse=True)
def _flags_clip():
    with registered_clip("flags_clip", _load):
        yield


def _id(out) -> str:
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["id"]


def test_fewshot_k_is_the_parameter_under_every_command(run, shapes, tmp_path):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    common = ["-b", CLIP, *data, "--json"]
    by_p = _id(run("get", "result", "-t", "linear_probe", *common, "-p", "fewshot_k=2"))
    assert _id(run("get", "result", "-t", "linear_probe", *common, "--fewshot-k", "2")) == by_p
    assert _id(run("run", "linear_probe", *common, "--fewshot-k", "2")) == by_p
    out = run("get", "result", "-t", "linear_probe", *common, "--fewshot-k", "2", "-p",
              "fewshot_k=3")
    assert out.exit_code == 2
    assert "--fewshot-k 2 and -p fewshot_k=3 disagree" in out.output
    out = run("get", "result", "-t", "knn", *common, "--fewshot-k", "2")
    assert out.exit_code == 2
    assert "--fewshot-k does not apply to task 'knn'" in out.output

    models = tmp_path / "models.txt"
    models.write_text(f"{CLIP}\n")
    sweep = ["sweep", "--backbones", str(models), "--tasks", "linear_probe,knn", *data, "--json"]
    rows = json.loads(run(*sweep, "--fewshot-k", "2").stdout)
    assert [r["id"] for r in rows if r["task"] == "linear_probe"] == [by_p]
    out = run(*sweep, "--fewshot-k", "2", "-p", "fewshot_k=1")
    assert out.exit_code == 2
    assert "disagree" in out.output


def test_language_is_the_prompts_language_and_reaches_something(run, shapes, tmp_path):
    templates = tmp_path / "fr.txt"
    templates.write_text("une photo d'un {c}.\n")
    common = ["-b", CLIP, "-d", shapes, "--split", "val", "--json"]
    french = ["-t", "zeroshot_classification", *common, "--templates", str(templates)]
    by_p = _id(run("get", "result", *french[:-2], "-p", f"templates={templates}", "-p",
                   "language=fr"))
    assert _id(run("get", "result", *french[:-2], "-p", f"templates={templates}",
                   "--language", "fr")) == by_p
    assert _id(run("run", "zeroshot_classification", *common, "--templates", str(templates),
                   "--language", "fr")) == by_p
    # English is the default: --language en is the request without it
    english = _id(run("get", "result", "-t", "zeroshot_classification", *common))
    assert _id(run("get", "result", "-t", "zeroshot_classification", *common, "--language",
                   "en")) == english != by_p
    out = run("get", "result", "-t", "zeroshot_classification", *common, "--language", "fr",
              "-p", "language=de")
    assert out.exit_code == 2
    assert "-p language=de and --language fr disagree" in out.output
    # a folder read by a task that writes no prompts: the language would change nothing
    out = run("get", "result", "-t", "linear_probe", *common, "--train-data", shapes,
              "--train-split", "train", "--language", "fr")
    assert out.exit_code == 2
    assert "--language fr reaches nothing" in out.output
    out = run("run", "linear_probe", *common, "--train-data", shapes, "--train-split", "train",
              "--language", "fr")
    assert "--language fr reaches nothing" in out.output
    out = run("get", "result", "-t", "zeroshot_classification", *common, "--language", "F R")
    assert "is not a language code" in out.output

    models = tmp_path / "models.txt"
    models.write_text(f"{CLIP}\n")
    sweep = ["sweep", "--backbones", str(models), "-d", shapes, "--split", "val",
             "--train-data", shapes, "--train-split", "train", "--json"]
    rows = json.loads(run(*sweep, "--tasks", "zeroshot_classification,linear_probe",
                          "--language", "fr", "-p", f"templates={templates}").stdout)
    # the language goes where it reaches: the zero-shot task, not the linear probe
    by_task = {r["task"]: r for r in rows}
    assert by_task["zeroshot_classification"]["id"] == by_p
    assert "error" not in by_task["linear_probe"]
    out = run(*sweep, "--tasks", "linear_probe", "--language", "fr")
    assert out.exit_code == 2
    assert "no task of this sweep takes --language" in out.output
