"""Zero-shot prompts: language, template files and class-name files (CLIP_benchmark's habits)."""

from __future__ import annotations

import pytest
import torch

from vbstore.errors import UsageError
from vbstore.tasks import get_task
from vbstore.tasks._prompts import read_classnames, read_templates

CLASSES = ["cat", "dog", "golden_retriever"]


def one_hot(indices, n):
    return torch.nn.functional.one_hot(torch.tensor(indices), n).float()


def test_template_files_read_lines_json_lists_and_one_dataset_objects():
    assert read_templates("une photo d'un {c}.\n\n  un dessin de {c}.  \n") == [
        "une photo d'un {c}.", "un dessin de {c}."]
    assert read_templates('["a {c}.", "the {c}!"]') == ["a {c}.", "the {c}!"]
    # CLIP_benchmark's custom template files map dataset names to lists
    assert read_templates('{"cifar10": ["a {c}."]}') == ["a {c}."]
    assert read_templates("braces {{literal}} around {c}") == ["braces {{literal}} around {c}"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the templates file is empty"),
        ("\n  \n", "the templates file is empty"),
        ("a photo of a cat.\n", "template 1 'a photo of a cat.' has no {c} placeholder"),
        ("a {c}.\na {label}.", "template 2 'a {label}.' has a placeholder other than {c}"),
        ("a {c} {0}", "placeholder other than {c}"),
        ('{"cifar10": ["a {c}."], "voc": ["b {c}"]}', "maps 2 datasets; vbstore reads one"),
        ('["a {c}.", 3]', "must hold a JSON list of strings"),
        ('["a {c}."', "not valid JSON"),
    ],
)
def test_bad_template_files_are_one_line_errors(text, message):
    with pytest.raises(UsageError, match=message) as info:
        read_templates(text)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_classname_files_refuse_a_name_twice_and_emptiness():
    assert read_classnames("chat\nchien\n") == ["chat", "chien"]
    with pytest.raises(UsageError, match="names 'chat' twice"):
        read_classnames("chat\nchat\n")
    with pytest.raises(UsageError, match="classnames file is empty"):
        read_classnames("")


@pytest.mark.parametrize("name", ["zeroshot_classification", "zeroshot_multilabel",
                                  "zeroshot_retrieval"])
def test_language_is_a_parameter_of_every_zero_shot_task(name):
    task = get_task(name)
    assert task.resolve_params()["language"] == "en"
    given = {"language": "pt-BR"}
    if "templates" in task.params:
        given["templates"] = "a" * 64  # a stored templates file: any language may have one
    assert task.resolve_params(given)["language"] == "pt-BR"
    with pytest.raises(UsageError, match="not a language code"):
        task.resolve_params({"language": "French"})


def test_a_language_without_built_in_templates_needs_a_file():
    task = get_task("zeroshot_classification")
    with pytest.raises(UsageError, match="no built-in 'photo' templates for language 'fr'") as info:
        task.resolve_params({"language": "fr", "templates": "photo"})
    assert "--templates FILE" in info.value.hint
    # a file (here its stored id, as the engine passes it) is accepted for any language
    assert task.resolve_params({"language": "fr", "templates": "a" * 64})["templates"] == "a" * 64
    # captions need no templates: retrieval takes any language
    assert get_task("zeroshot_retrieval").resolve_params({"language": "jp"})["language"] == "jp"


def test_the_text_tower_sees_the_file_templates_and_class_names(class_name_encoder):
    encoder = class_name_encoder(["chat", "chien", "golden"])
    files = {"templates": ["une photo d'un {c}.", "un {c} dessiné."],
             "classnames": ["chat", "chien", "golden"]}
    metrics = get_task("zeroshot_classification").evaluate_zero_shot(
        one_hot([0, 1, 2, 2], 3), torch.tensor([0, 1, 2, 0]),
        {"language": "fr", "templates": "a" * 64, "classnames": "b" * 64},
        {"text_encoder": encoder, "class_names": CLASSES, "files": files},
    )
    assert metrics["acc1"] == pytest.approx(3 / 4)
    assert [p for call in encoder.calls for p in call] == [
        "une photo d'un chat.", "un chat dessiné.", "une photo d'un chien.", "un chien dessiné.",
        "une photo d'un golden.", "un golden dessiné."]


def test_multilabel_reads_the_same_files(class_name_encoder):
    encoder = class_name_encoder(["chat", "chien"])
    targets = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    metrics = get_task("zeroshot_multilabel").evaluate_zero_shot(
        torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]), targets,
        {"templates": "a" * 64, "classnames": "b" * 64},
        {"text_encoder": encoder, "class_names": ["cat", "dog"],
         "files": {"templates": ["{c}"], "classnames": ["chat", "chien"]}},
    )
    assert metrics["mean_average_precision"] == 1.0
    assert encoder.calls == [["chat", "chien"]]


def test_a_classnames_file_must_name_every_class(class_name_encoder):
    task = get_task("zeroshot_classification")
    context = {"text_encoder": class_name_encoder(["chat", "chien"]), "class_names": CLASSES,
               "files": {"classnames": ["chat", "chien"]}}
    with pytest.raises(UsageError, match="has 2 names but the data has 3 classes") as info:
        task.evaluate_zero_shot(one_hot([0], 3), torch.tensor([0]), {"classnames": "b" * 64},
                                context)
    assert "cat, dog, golden_retriever" in info.value.hint


def test_a_file_path_given_straight_to_the_task_names_the_way_through_the_engine(
        class_name_encoder):
    with pytest.raises(UsageError, match="context\\['files'\\] lacks its entries"):
        get_task("zeroshot_classification").evaluate_zero_shot(
            one_hot([0], 3), torch.tensor([0]), {"templates": "mine.txt"},
            {"text_encoder": class_name_encoder(CLASSES), "class_names": CLASSES})
