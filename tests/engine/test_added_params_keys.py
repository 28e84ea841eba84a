"""Parameters added for VisBench's flags (issue 23) keep every stored key: at its default an
``added`` parameter is left out of result and head keys (and records); set, it enters them."""

import pytest

from vbstore.engine._plan import head_spec, result_spec
from vbstore.features import ExtractorParams
from vbstore.store import derivation_key
from vbstore.tasks import get_task

A, B, C = "a" * 64, "b" * 64, "c" * 64
EXT = ExtractorParams(layers=(-1,), pooling="gap", mode="dense", precision="fp32", input_size=32)

# computed before the parameters were added (result key, head key)
BEFORE = {
    "depth": ("e5df2d54b9e2d9d36045616fe9c4e9be2a671ace387da9faca3097d44ac22433",
              "d87210a89641cf7297f97cec9b176a8058973f147faec77387d8d357bb1d01d0"),
    "detection": ("c7195288504d8c6af0cbe77d840d854e4542da53f83a9f5a0430e7f2ead4396e",
                  "8ddb6c64020e5aa32574a2320f0b2813b4f0cc0bb00dc7803d5848419f18c79b"),
    "instance_segmentation": (
        "f9748e9a8dba943d2c3344362b9dc45dd316eb714614c43418ab80352ff8ebd6",
        "fff8880ca4e6bc516b4dc2eac454453abcb4f508092c7589382afa8331650799"),
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
