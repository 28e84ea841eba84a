"""An error names the request field it is about; the CLI spells it as a flag, the Python API
as a keyword, both from the one table (vbstore._fields)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import vbstore
from vbstore._fields import FIELDS, spell_flag, spell_keyword
from vbstore.cli import cli
from vbstore.errors import UsageError, field_ref, spell


@pytest.fixture(scope="module")
def words_store(tmp_path_factory):
    """A store folder where the named source ``shapes`` (the data the calls below name) is
    generated, once for the module: the calls are refused before anything else is stored, so
    they share it (the one test that stores a suite copies it)."""
    from vbstore.data import load_manifest

    root = tmp_path_factory.mktemp("words") / "s"
    with vbstore.Store(root) as store:
        for split in ("train", "val"):
            load_manifest(store, "shapes", split=split)
    return root


def test_a_field_is_spelled_by_each_front_end_from_its_row():
    text = (f"use {field_ref('seed')} instead of {field_ref('param:seed')}; drop "
            f"{field_ref('train_data')}; read them with {field_ref('target', 'depth')}; "
            f"{field_ref('strict')}")
    assert spell(text, spell_flag) == ("use --seed instead of -p seed; drop --train-data; read "
                                       "them with --target depth; --no-strict")
    assert spell(text, spell_keyword) == (
        "use seed= instead of params={'seed': ...}; drop train_data=; read them with "
        "data_options={'target': 'depth'}; strict=False")


def test_every_field_a_message_names_is_a_row_of_the_table():
    import ast

    import package_code

    named = set()
    for path in package_code.modules():
        for node in ast.walk(package_code.tree(path)):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "field_ref"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                named.add((node.args[0].value, path.name))
    assert len(named) > 100  # the messages of the engine, data, backbones, tasks and suites
    assert [(name, where) for name, where in sorted(named)
            if name not in FIELDS and not name.startswith("param:")] == []


def test_an_error_carries_its_field_and_says_it_as_a_flag_by_default():
    err = UsageError(f"{field_ref('input_size')} must be >= 1",
                     hint=f"e.g. {field_ref('input_size')} 224")
    assert err.field == "input_size"
    assert str(err) == "--input-size must be >= 1; e.g. --input-size 224"
    err.spell_fields(spell_keyword)
    assert str(err) == "input_size= must be >= 1; e.g. input_size= 224"
    assert UsageError("plain words").field is None
    assert UsageError("plain words", field="limit").field == "limit"


def test_every_flag_of_get_result_is_a_row_of_the_table():
    from vbstore.cli.get_cmds import get_result_cmd

    flags = {opt for param in get_result_cmd.params for opt in param.opts}
    for row in FIELDS.values():
        if row.flag is not None and row.within is None and row.name not in (
                "mode", "executor"):  # get features' only; --executor is the Ray flags'
            assert row.flag in flags, row.flag


def test_the_api_names_keywords_and_the_cli_flags(words_store):
    store = vbstore.Store(words_store)
    with pytest.raises(UsageError) as err:
        vbstore.get_result("test_cnn", "knn", "shapes", "shapes", store=store, split="val",
                           train_split="train", weights="random", params={"seed": 3})
    assert "use seed= instead of params={'seed': ...}" in str(err.value)
    assert "--seed" not in str(err.value)
    store.close()
    out = CliRunner().invoke(cli, ["--store", str(words_store), "get", "result", "-b",
                                   "test_cnn", "--weights", "random", "-t", "knn", "-d", "shapes",
                                   "--split", "val", "--train-data", "shapes", "--train-split",
                                   "train", "-p", "seed=3"])
    assert "use --seed instead of -p seed=..." in out.output


def test_an_unknown_keyword_is_refused_as_python_refuses_one():
    with pytest.raises(TypeError, match=r"get_result\(\) got an unexpected keyword argument "
                                        r"'input_sise'"):
        vbstore.get_result("test_cnn", "knn", "shapes", "shapes", input_sise=32)
    with pytest.raises(TypeError, match=r"sweep\(\) got an unexpected keyword argument "
                                        r"'device'"):
        list(vbstore.engine.sweep([], ["knn"], "shapes", device="cpu"))


def test_a_suite_contradicted_in_python_says_which_keyword_to_drop(words_store, tmp_path):
    import shutil

    from vbstore.suites import new_suite, push_suite

    store = vbstore.Store(shutil.copytree(words_store, tmp_path / "s"))
    push_suite(store, new_suite(store, slug="s", task="knn", data="shapes", split="val",
                                params={"k": 5}, weights="random"))
    with pytest.raises(UsageError) as err:
        vbstore.run_suite(store, "s@1", "test_cnn", weights="random", train_data="shapes",
                          train_split="train", params={"k": 20})
    assert "params={'k': 20} contradicts s@1, which pins k=5" in str(err.value)
    assert err.value.hint == "drop params={'k': ...}: s@1 sets it"
    store.close()


def test_each_option_type_takes_its_defaults_from_the_rows_of_its_names():
    import dataclasses

    from vbstore.engine import _options

    kinds = (_options.RunOptions, _options.ResultOptions, _options.HeadOptions,
             _options.FeatureOptions, _options.SweepOptions)
    for kind in kinds:
        for f in dataclasses.fields(kind):
            row = f.metadata.get("row")
            if row is None:  # FeatureOptions.layers: (-1,), not the CLI's text
                continue
            # get_features' seed is the backbone's (it has no probe): its one alias
            assert row.name == f.name or (kind, f.name, row.name) == (
                _options.FeatureOptions, "seed", "backbone_seed"), (kind, f.name)
            assert f.default == row.default, (kind, f.name)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: vbstore.get_head("test_cnn", "knn", "shapes", split="val"), "get_head"),
    (lambda: vbstore.get_features("test_cnn", "shapes", train_split="x"), "get_features"),
    (lambda: vbstore.engine.result_request("test_cnn", "knn", "shapes", device="cpu"),
     "result_request"),
    (lambda: vbstore.register_backbone(default_pool="cls"), "register_backbone"),
])
def test_every_keyword_function_refuses_a_keyword_it_has_no_field_for(call, name):
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument"):
        call()


def test_the_generated_commands_take_their_flags_from_the_rows():
    from vbstore.cli.get_cmds import get_features_cmd, get_head_cmd
    from vbstore.cli.results_cmds import sweep

    for command in (get_head_cmd, get_features_cmd, sweep):
        for param in command.params:
            row = FIELDS.get(param.name)
            if row is not None and row.flag is not None and not param.hidden:
                assert row.flag in param.opts, (command.name, param.name)


def test_a_hint_replaced_above_is_kept_when_the_api_spells_the_fields():
    err = UsageError(f"{field_ref('split')} is wrong", hint=f"choose one with {field_ref('split')}")
    err.refer_hint(field_ref("split"), field_ref("train_split"))
    assert str(err) == "--split is wrong; choose one with --train-split"
    err.hint = "something else entirely"  # as a caller that rewords an error's hint does
    err.spell_fields(spell_keyword)
    assert str(err) == "split= is wrong; something else entirely"


def test_a_hint_says_each_field_once_in_its_front_ends_words(tmp_path):
    # the seed's hint spelled the keyword in words of its own as well: "drop backbone_seed=
    # (backbone_seed= in Python)" once the API spelled the field itself
    from vbstore.backbones._weights import check_seed

    with pytest.raises(UsageError) as err:
        check_seed("default", 3)
    assert err.value.hint == "drop --backbone-seed, or use --weights random"
    err.value.spell_fields(spell_keyword)
    assert err.value.hint == "drop backbone_seed=, or use weights=random"


@pytest.mark.parametrize(("task", "params", "said"), [
    ("retrieval", {"topk": "0"}, "params={'topk': 1,5,10}"),
    ("retrieval", {"topk": ","}, "params={'topk': 1,5,10}"),
    ("correspondence", {"thresholds": "-1"}, "params={'thresholds': 1,2,5,10}"),
    ("correspondence", {"thresholds": ","}, "params={'thresholds': 1,2,5,10}"),
])
def test_a_task_parameter_hint_names_the_api_s_params_not_a_flag(words_store, task, params,
                                                                 said):
    # these hints said "e.g. --topk 1,5,10" in Python too: a flag no function takes
    store = vbstore.Store(words_store)
    with pytest.raises(UsageError) as err:
        vbstore.get_result("test_cnn", task, "shapes", store=store, split="val",
                           weights="random", params=params)
    store.close()
    assert said in err.value.hint
    assert "--" not in str(err.value)

@pytest.mark.parametrize(("keywords", "said"), [
    ({"input_size": -1}, "input_size= must be an integer >= 1, not -1"),
    ({"batch_size": 0}, "batch_size= must be an integer >= 1, not 0"),  # was range()'s crash
    ({"seeds": 0}, "seeds= must be an integer >= 1, not 0"),
    ({"train_limit": 0}, "train_limit= must be an integer >= 1, not 0"),
    ({"backbone_seed": -1}, "backbone_seed= must be an integer >= 0, not -1"),
    ({"precision": "fp16"}, "precision= must be one of fp32, bf16, not 'fp16'"),
    ({"notes": 3}, "notes= must be text, not int"),
    ({"layers": (1, 1)}, "layers= names a layer twice: [1, 1]"),
    ({"finetune_blocks": 1, "backbone_lr": 0},
     "backbone_lr= must be a number > 0, not 0; e.g. backbone_lr=1e-4"),
])
def test_a_bad_number_names_its_keyword_in_python_and_its_flag_on_the_cli(
        words_store, keywords, said):
    store = vbstore.Store(words_store)
    with pytest.raises(UsageError) as err:
        vbstore.get_result("test_cnn", "knn", "shapes", "shapes", store=store, split="val",
                           train_split="train", weights="random", **keywords)
    assert str(err.value) == said
    assert err.value.field == list(keywords)[-1]
    store.close()
    out = CliRunner().invoke(cli, ["--store", str(words_store), "get", "result", "-b",
                                   "test_cnn", "--weights", "random", "-t", "knn", "-d", "shapes",
                                   "--split", "val", "--train-data", "shapes", "--train-split",
                                   "train", "--input-size", "-1"])
    assert out.exit_code == 2
    assert "--input-size must be an integer >= 1, not -1" in out.output
