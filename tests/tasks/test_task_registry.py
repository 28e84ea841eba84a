"""The task registry and the declarations of the built-in tasks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vbstore.canonical import dumps
from vbstore.data import get_target_kind
from vbstore.errors import UsageError, VbstoreError
from vbstore.tasks import (
    BUILTIN,
    Metric,
    Param,
    Task,
    UnknownTask,
    get_shape,
    get_task,
    list_tasks,
    register_task,
)

# every built-in, found by reading the modules (no copy of the list to keep in step)
BUILTINS = sorted(BUILTIN)


class _Probe(Task):
    level = "mid"
    op_version = 1
    target_kind = "class_index"
    zero_shot = True
    metrics = (Metric("score", "higher", "a score"),)
    headline = "score"

    def _evaluate_zero_shot(self, feats, targets, params, context):
        return {"score": float(len(feats))}


def test_builtins_are_registered():
    assert list_tasks() == BUILTINS
    assert {"classification", "knn", "depth", "relative_pose", "zeroshot_retrieval"} <= set(
        BUILTINS)  # the scan of the task modules finds them


def test_list_tasks_filters_with_fnmatch():
    assert list_tasks("zeroshot_*") == ["zeroshot_classification", "zeroshot_multilabel",
                                        "zeroshot_retrieval"]
    assert list_tasks("*retrieval") == ["retrieval", "zeroshot_retrieval"]
    assert list_tasks("nothing*") == []


def test_get_unknown_task_suggests_the_closest_and_is_a_key_error():
    with pytest.raises(UnknownTask, match="did you mean 'classification'") as info:
        get_task("clasification")
    assert isinstance(info.value, KeyError)
    assert info.value.exit_code == 9  # not found, as docs/cli.md says


@pytest.mark.usefixtures("registry_sandbox")
def test_class_registers_under_its_own_name():
    @register_task
    class my_probe(_Probe):  # the registered name is the class name
        pass

    task = get_task("my_probe")
    assert isinstance(task, my_probe)
    assert task.name == "my_probe"
    assert "my_probe" in list_tasks("my_*")


@pytest.mark.usefixtures("registry_sandbox")
def test_explicit_name_and_factory_function():
    register_task(name="probe_a")(_Probe)

    @register_task
    def probe_b() -> Task:
        return _Probe()

    assert get_task("probe_a").name == "probe_a"
    assert get_task("probe_b").name == "probe_b"
    assert get_task("probe_a") is not get_task("probe_b")


@pytest.mark.usefixtures("registry_sandbox")
def test_registering_a_name_twice_raises():
    register_task(name="probe_twice")(_Probe)
    with pytest.raises(UsageError, match="already registered"):
        register_task(name="probe_twice")(_Probe)
    with pytest.raises(UsageError, match="already registered"):
        register_task(name="knn")(_Probe)


@pytest.mark.usefixtures("registry_sandbox")
@pytest.mark.parametrize("name", ["Bad", "has-dash", "1st", ""])
def test_malformed_names_are_refused(name):
    with pytest.raises(UsageError, match="not a lower-case identifier"):
        register_task(name=name)(_Probe)


@pytest.mark.usefixtures("registry_sandbox")
def test_non_task_objects_are_refused():
    with pytest.raises(UsageError, match=r"not a vbstore\.tasks\.Task"):
        register_task(name="plain")(dict)
    with pytest.raises(UsageError, match="not a Task"):
        register_task(name="returns_int")(lambda: 3)


@pytest.mark.usefixtures("registry_sandbox")
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"headline": "missing"}, "headline 'missing' is not one of its metrics"),
        ({"trains_head": True}, "exactly one of trains_head and zero_shot"),
        ({"level": "extreme"}, "level must be"),
        ({"op_version": 0}, "op_version must be >= 1"),
        ({"op_version": True}, "op_version must be an int"),
        ({"params": {"k": Param(0, "k", minimum=1)}}, "must be >= 1"),
        ({"metrics": (Metric("a", "up", "a"),), "headline": "a"}, "direction"),
    ],
)
def test_malformed_declarations_are_refused_at_registration(override, message):
    broken = type("Broken", (_Probe,), override)
    with pytest.raises(UsageError, match=message):
        register_task(name="broken")(broken)
    assert "broken" not in list_tasks()


@pytest.mark.usefixtures("registry_sandbox")
def test_a_variant_with_other_defaults_keeps_the_class_schema():
    knn_class = type(get_task("knn"))

    @register_task
    def knn_k5() -> Task:
        return knn_class(defaults={"k": 5})

    assert get_task("knn_k5").resolve_params() == {"k": 5, "temperature": 0.07}
    assert get_task("knn").resolve_params() == {"k": 20, "temperature": 0.07}
    with pytest.raises(UsageError, match="no parameter 'kk'"):
        knn_class(defaults={"kk": 5})


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_declarations(name):
    task = get_task(name)
    info = task.describe()
    dumps(info)  # canonical JSON: no NaN, string keys only
    assert info["name"] == name
    shape = get_shape(info["shape"])
    assert info["level"] in ("high", "mid", "low")
    assert info["feature_mode"] == shape.feature_mode
    assert get_target_kind(info["target_kind"]).per_pixel == (
        shape.feature_mode == "dense" and shape.name != "pairs")
    assert info["trains_head"] != info["zero_shot"]
    assert info["headline"] in [m["name"] for m in info["metrics"]]
    assert task.resolve_params() == {k: v["default"] for k, v in info["params"].items()}


@pytest.mark.parametrize(
    ("name", "trains_head", "needs_text", "stochastic"),
    [
        ("classification", True, False, True),
        ("knn", True, False, False),
        ("multilabel", True, False, True),
        ("retrieval", False, False, False),
        ("similarity", False, False, False),
        ("zeroshot_classification", False, True, False),
        ("zeroshot_multilabel", False, True, False),
        ("zeroshot_retrieval", False, True, False),
    ],
)
def test_builtin_kinds(name, trains_head, needs_text, stochastic):
    task = get_task(name)
    assert (task.trains_head, task.needs_text, task.stochastic) == (
        trains_head,
        needs_text,
        stochastic,
    )


def test_task_errors_are_vbstore_errors():
    from vbstore import tasks

    for cls in (tasks.UnknownTask, tasks.TaskInputError, tasks.UndefinedMetric):
        assert issubclass(cls, VbstoreError)


def test_the_builtin_table_names_the_module_that_registers_each_task():
    from vbstore.tasks import BUILTIN, list_tasks

    names = list_tasks()  # imports every built-in module
    ours = {n for n in names if type(get_task(n)).__module__.startswith("vbstore.tasks.")}
    assert ours == set(BUILTIN)
    for name, module in BUILTIN.items():
        assert type(get_task(name)).__module__ == f"vbstore.tasks.{module}", name


def _fresh_python(code: str) -> str:
    """What ``code`` prints in a new interpreter (nothing registered or imported yet)."""
    return subprocess.run([sys.executable, "-c", code], check=True, timeout=60,
                          capture_output=True, text=True).stdout


def test_asking_for_a_task_imports_its_module_only():
    # a cached `get` loads the one task it answers for, not all of them
    code = (
        "import sys, vbstore.tasks as t\n"
        "t.get_task('knn')\n"
        "loaded = sorted(set(m.rpartition('.')[2] for m in sys.modules\n"
        "                    if m.startswith('vbstore.tasks.')) & set(t.BUILTIN.values()))\n"
        "print(loaded)\n"
    )
    assert _fresh_python(code).strip() == "['knn']"


def test_a_plugin_cannot_take_a_builtin_name_before_the_builtin_is_loaded():
    code = (
        "import vbstore.tasks as t\n"
        "from vbstore.errors import UsageError\n"
        "class P(t.Task): pass\n"
        "try:\n"
        "    t.register_task(name='depth')(P)\n"
        "except UsageError as e:\n"
        "    print(e)\n"
    )
    assert "'depth' is already registered (by vbstore.tasks.geometry)" in _fresh_python(code)


def test_reading_declarations_does_not_import_torch():
    # A cached `vbstore get` builds derivation keys from declarations: it must stay torch-free.
    code = (
        "import sys, vbstore.tasks as t\n"
        "for n in t.list_tasks():\n"
        "    task = t.get_task(n); task.resolve_params(); task.describe()\n"
        "t.aggregate_seeds([{'a': 1.0}, {'a': 2.0}])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.usefixtures("registry_sandbox")
@pytest.mark.parametrize(("mode", "kind", "missing"), [
    ("pooled", "class_index", "_fit, _evaluate"),
    ("dense", "label_map", "_fit_split, _evaluate_split"),
])
def test_a_task_without_the_hooks_it_needs_is_refused_at_registration(mode, kind, missing):
    class Hollow(Task):
        level = "mid"
        op_version = 1
        feature_mode = mode
        target_kind = kind
        trains_head = True
        metrics = (Metric("score", "higher", "a score"),)
        headline = "score"

    with pytest.raises(UsageError, match=f"implements no {missing}"):
        register_task(name="hollow")(Hollow)
