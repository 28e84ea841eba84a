"""Parameter resolution: defaults filled, values normalised, mistakes refused with the fix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vbstore.errors import UsageError
from vbstore.tasks import get_task, list_tasks


def test_defaults_are_filled():
    assert get_task("classification").resolve_params() == {
        "batch_size": 256,
        "epochs": 200,  # VisBench's defaults (classification op_version 2)
        "lr": 0.01,
        "standardize": False,
        "weight_decay": 1e-4,
    }
    assert get_task("knn").resolve_params({"k": 10}) == {"k": 10, "temperature": 0.07}
    assert get_task("similarity").resolve_params() == {}
    # VisBench's retrieval options, added later: filled here, left out of keys at their defaults
    assert get_task("retrieval").resolve_params() == {"metric": "cosine", "topk": "1,5,10"}


def test_unknown_key_names_the_valid_ones_and_the_closest():
    with pytest.raises(UsageError) as info:
        get_task("classification").resolve_params({"learning_rate": 0.1})
    message = str(info.value)
    assert "'learning_rate'" in message
    assert "valid: batch_size, epochs, lr, standardize, weight_decay" in message
    with pytest.raises(UsageError, match="did you mean 'epochs'"):
        get_task("classification").resolve_params({"epoch": 3})
    with pytest.raises(UsageError, match=r"valid: none"):
        get_task("similarity").resolve_params({"k": 3})


def test_numbers_are_normalised_so_equal_settings_hash_equal():
    knn = get_task("knn")
    assert knn.resolve_params({"k": 10.0, "temperature": 1}) == {"k": 10, "temperature": 1.0}
    resolved = knn.resolve_params({"k": 10.0, "temperature": 1})
    assert type(resolved["k"]) is int
    assert type(resolved["temperature"]) is float


@pytest.mark.parametrize(
    ("task", "params", "message"),
    [
        ("knn", {"k": 2.5}, "must be an integer"),
        ("knn", {"k": True}, "must be an integer"),
        ("knn", {"k": "20"}, "must be an integer"),
        ("knn", {"k": 0}, "must be >= 1"),
        ("knn", {"temperature": 0.0}, "must be > 0"),
        ("knn", {"temperature": float("nan")}, "finite"),
        ("classification", {"lr": -1e-3}, "must be > 0"),
        ("classification", {"weight_decay": -1}, "must be >= 0"),
        ("classification", {"epochs": 0}, "must be >= 1"),
        ("zeroshot_classification", {"language": "French!"}, "not a language code"),
        ("zeroshot_classification", {"language": "fr"}, "no built-in 'ensemble' templates"),
        ("zeroshot_classification", {"templates": 1}, "must be a string"),
    ],
)
def test_bad_values_are_refused(task, params, message):
    with pytest.raises(UsageError, match=message) as info:
        get_task(task).resolve_params(params)
    assert info.value.exit_code == 2
    assert "default" in str(info.value)  # the hint shows the default


@pytest.mark.parametrize("name", list_tasks())
def test_resolution_is_idempotent(name):
    task = get_task(name)
    once = task.resolve_params()
    assert task.resolve_params(once) == once


@given(k=st.integers(1, 10_000), t=st.floats(1e-6, 1e3, allow_nan=False))
def test_any_valid_value_round_trips(k, t):
    resolved = get_task("knn").resolve_params({"k": k, "temperature": t})
    assert resolved == {"k": k, "temperature": t}


def test_fit_resolves_params_too(blobs):
    x, y = blobs(n=40)
    with pytest.raises(UsageError, match="no parameter 'k'"):
        get_task("classification").fit(x, y, {"k": 3}, seed=0)
