"""Parameters added for VisBench's flags (issue 23) keep every stored key: at its default an
``added`` parameter is left out of result and head keys (and records); set, it enters them."""

import pytest

from vbstore.engine._plan import head_spec, result_spec
from vbstore.features import ExtractorParams
from vbstore.store import derivation_key
from vbstore.tasks import get_task

A, B, C = "a" * 64, "b" * 64, "c" * 64
EXT = ExtractorParams(layers=(-1,), pooling="gap", mode="dense", precision="fp32", input_size=32)

# computed without the parameters (the tree of issue 23's numbers, where depth, detection and the
# dense heads' default width had moved: op_version 2, hidden_dim 512), as (result key, head key)
BEFORE = {
    "depth": ("c352fa713922f53e0dac09c27196d4ad9c2f84b25bec92672cf147c30bc916f1",
              "41430f9a8ae7fbfe150d4af79941b1d7e060c8cd43b4879bfab55239365da7bd"),
    "detection": ("b60a89544f092c4122242fdda18bae55918614289fad9079fa22643f384fe4aa",
                  "8675b59cdbefc1fb8d61d8c5f2373959d27b26599cc5be5d4eb9385502c5c671"),
    "instance_segmentation": (
        "31328a5a0c09fc33329791d62f6263ffc086b364d257c207454acd1a88ec0426",
        "86c9521d074accca527c92ff665ef587a19e772f8490dd91f68262a45c9d73e3"),
}
# one non-default value of each added parameter
CHANGED = {"depth": {"n_bins": 64}, "detection": {"score_threshold": 0.3},
           "instance_segmentation": {"max_detections": 10}}


def _keys(name, params):
    task = get_task(name)
    resolved = task.resolve_params(params)
    result = derivation_key(result_spec(task, resolved, A, B, C if task.trains_head else None,
                                        None, [0], EXT, True))
    head = derivation_key(head_spec(task, resolved, C, 0)) if task.trains_head else None
    return result, head


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_defaults_keep_the_keys_and_a_set_value_changes_them(name):
    assert _keys(name, {}) == BEFORE[name]
    # the added parameter named at its default is the same request
    added = next(iter(CHANGED[name]))
    assert _keys(name, {added: get_task(name).params[added].default}) == BEFORE[name]
    changed = _keys(name, CHANGED[name])
    assert changed[0] != BEFORE[name][0]
    if name in ("detection", "instance_segmentation"):  # decoding: the same head scored again
        assert changed[1] == BEFORE[name][1]
    else:
        assert changed[1] != BEFORE[name][1] or BEFORE[name][1] is None
