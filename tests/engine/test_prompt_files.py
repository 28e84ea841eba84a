"""Template and class-name files: a result follows the file's content, never its path."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import vbstore
from vbstore import canonical
from vbstore.cli import cli
from vbstore.engine._requests import ProbeRequest, param_files, store_param_files
from vbstore.errors import UsageError
from vbstore.tasks import get_task

# open_clip's smallest built-in CLIP, random weights (no download): a real open_clip model whose
# towers cost a fifth of ViT-B-32's (the text tower, run on every prompt, most of it)
CLIP = "open_clip:ViT-S-32-alt"
TASK = get_task("zeroshot_classification")


def test_a_file_becomes_the_id_of_its_entries(store, tmp_path):
    one, two = tmp_path / "a.txt", tmp_path / "sub" / "b.json"
    two.parent.mkdir()
    one.write_text("une photo d'un {c}.\nun {c} dessiné.\n")
    two.write_text('["une photo d\'un {c}.", "un {c} dessiné."]')
    params = TASK.resolve_params({"language": "fr", "templates": str(one)})
    first = store_param_files(store, TASK, params)
    second = store_param_files(store, TASK, {**params, "templates": str(two)})
    # same entries under two paths and two spellings: one id, the blob of the entries
    assert first["templates"] == second["templates"]
    assert store.read_bytes(first["templates"]) == canonical.dumps(
        ["une photo d'un {c}.", "un {c} dessiné."])
    assert param_files(store, TASK, first) == {"templates": ["une photo d'un {c}.",
                                                             "un {c} dessiné."]}
    assert store_param_files(store, TASK, first) == first  # a resolved id is kept
    one.write_text("une photo d'un {c}.\n")  # an edited file is another id
    assert store_param_files(store, TASK, params)["templates"] != first["templates"]
    # built-in sets and the empty default name no file
    assert store_param_files(store, TASK, TASK.resolve_params()) == TASK.resolve_params()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"templates '.*missing.txt' is neither a built-in set "
               r"\(ensemble, photo, dataset\) nor a readable UTF-8 file "
               r"\(No such file or directory\)"),
        ("", "the templates file is empty"),
        ("une photo.\n", "template 1 'une photo.' has no {c} placeholder"),
        (b"\xff\xfe{c}", "nor a readable UTF-8 file"),
    ],
)
def test_bad_template_files_are_refused_before_anything_is_stored(store, tmp_path, content,
                                                                  message):
    path = tmp_path / "missing.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    before = len(store.ls())
    with pytest.raises(UsageError, match=message) as info:
        store_param_files(store, TASK, TASK.resolve_params({"templates": str(path)}))
    assert "\n" not in str(info.value)
    assert len(store.ls()) == before


def test_a_language_without_templates_is_refused_when_the_request_resolves():
    with pytest.raises(UsageError, match="no built-in 'ensemble' templates for language 'de'"):
        ProbeRequest("zeroshot_classification", params={"language": "de"}).resolved_params()


def test_the_flags_are_generated_and_errors_are_one_line(tmp_path):
    runner = CliRunner()
    shown = runner.invoke(cli, ["run", "zeroshot_classification", "--help"]).output
    for flag in ("--language", "--templates", "--classnames"):
        assert flag in shown
    assert "--language" in runner.invoke(cli, ["run", "zeroshot_retrieval", "--help"]).output
    store = ["--store", str(tmp_path / "s")]
    out = runner.invoke(cli, [*store, "get", "result", "-b", CLIP, "-t", "zeroshot_classification",
                              "-d", "shapes", "-p", "language=fr"])
    assert out.exit_code == 2
    assert "no built-in 'ensemble' templates for language 'fr'" in out.output
    out = runner.invoke(cli, [*store, "run", "zeroshot_classification", "-b", CLIP, "-d", "shapes",
                              "--templates", str(tmp_path / "nope.txt")])
    assert out.exit_code == 2
    assert "nope.txt' is neither a built-in set" in out.output


@pytest.mark.slow
def test_templates_change_the_result_and_the_prompts_the_text_tower_sees(store, shapes, tmp_path,
                                                                         monkeypatch):
    from vbstore.backbones.open_clip import OpenClipBackbone

    seen: list[str] = []
    real = OpenClipBackbone.encode_text

    def recording(self, texts, **kw):
        seen.extend(texts)
        return real(self, texts, **kw)

    monkeypatch.setattr(OpenClipBackbone, "encode_text", recording)
    kw = dict(weights="random", input_size=64, store=store, progress=False, split="val")
    default = vbstore.get_result(CLIP, "zeroshot_classification", shapes, **kw)
    assert "a photo of the small circle." in seen
    classes = store.read_json(default.record.inputs["eval_manifest"])["classes"]

    templates, names = tmp_path / "fr.txt", tmp_path / "noms.txt"
    templates.write_text("une photo d'un {c}.\n")
    names.write_text("".join(f"forme {i}\n" for i in range(len(classes))))
    seen.clear()
    params = {"language": "fr", "templates": str(templates), "classnames": str(names)}
    french = vbstore.get_result(CLIP, "zeroshot_classification", shapes, params=params, **kw)
    assert french.id != default.id
    assert seen == [f"une photo d'un forme {i}." for i in range(len(classes))]
    record = french.record
    assert record.params["language"] == "fr"
    assert store.read_bytes(record.inputs["templates"]) == canonical.dumps(["une photo d'un {c}."])
    assert record.params["templates"] == record.inputs["templates"]

    # the same content elsewhere: the same result, from the store
    copy = tmp_path / "copy" / "templates.json"
    copy.parent.mkdir()
    copy.write_text(json.dumps(["une photo d'un {c}."]))
    again = vbstore.get_result(CLIP, "zeroshot_classification", shapes,
                               params={**params, "templates": str(copy)}, **kw)
    assert (again.id, again.from_cache) == (french.id, True)

    # the CLI's flags and -p reach the same result; the export writes the language
    runner, home = CliRunner(), ["--store", str(store.root)]
    common = ["-b", CLIP, "--weights", "random", "--input-size", "64", "-d", shapes, "--split",
              "val", "--json"]
    flags = runner.invoke(cli, [*home, "run", "zeroshot_classification", *common, "--language",
                                "fr", "--templates", str(copy), "--classnames", str(names)])
    by_p = runner.invoke(cli, [*home, "get", "result", "-t", "zeroshot_classification", *common,
                               "-p", "language=fr", "-p", f"templates={templates}",
                               "-p", f"classnames={names}"])
    assert json.loads(flags.stdout)["id"] == json.loads(by_p.stdout)["id"] == french.id
    out = runner.invoke(cli, [*home, "export", "results", "--format", "clip-benchmark", "--json"])
    languages = {d["id"]: d["record"]["language"] for d in json.loads(out.stdout)}
    assert languages == {default.id: "en", french.id: "fr"}

    templates.write_text("une image d'un {c}.\n")  # an edited file: another result
    edited = vbstore.get_result(CLIP, "zeroshot_classification", shapes, params=params, **kw)
    assert edited.id != french.id
    assert not edited.from_cache
