import pytest
from suites_support import evidence, road_test

from vbstore.suites import build, judge, push_suite, record


def verdict(suite, **overrides):
    return build(suite, **evidence(**overrides))["verdict"]


def test_complete_evidence_is_eligible_and_observed(suite):
    doc = build(suite, **evidence())
    assert doc["verdict"]["state"] == "eligible"
    assert doc["verdict"]["ranked"]
    assert doc["evidence"] == "observed"
    assert doc["missing"] == []
    assert doc["verdict"]["scores"]["overall"]["miou"] == pytest.approx((0.8 + 0.7) / 2)


@pytest.mark.parametrize(
    ("overrides", "state", "reason"),
    [
        (
            {"results": {"day": {"overall": {"miou": 0.8, "pixel_acc": 0.9}}}},
            "incomplete",
            "missing-condition(night)",
        ),
        (
            {"sample_counts": {"day": 1199, "night": 800}},
            "incomplete",
            "sample-count(day: 1199 != 1200)",
        ),
        ({"sample_counts": {"day": 1200}}, "incomplete", "sample-count(night: unknown)"),
        (
            {"data": {"kind": "external", "manifestSha256": "b" * 64}},
            "incompatible",
            "data-mismatch(manifestSha256)",
        ),
        (
            {"protocol": {"task": "segmentation", "params": {"lr": 0.01}}},
            "incompatible",
            "protocol-mismatch: lr(0.01 != 0.001)",
        ),
        (
            {"protocol": {"task": "depth", "params": {"lr": 0.001}}},
            "incompatible",
            "protocol-mismatch: task(depth != segmentation)",
        ),
        (
            {
                "results": {
                    "day": {"overall": {"pixel_acc": 0.9}},
                    "night": {"overall": {"miou": 0.7, "pixel_acc": 0.8}},
                }
            },
            "incompatible",
            "metric-missing(miou)",
        ),
        (
            {"checkpoint": {"id": "r" * 64, "label": "rand", "weights": "random"}},
            "incompatible",
            "weights(random)",
        ),
        (
            {"checkpoint": {"id": "f" * 64, "label": "test_pixels", "weights": "fixed"}},
            "incompatible",
            "weights(fixed)",
        ),
        ({"comparable": False}, "incompatible", "not-comparable(--no-strict)"),
        (
            {"evaluator": {"package": "vbstore", "version": "0.0.9"}},
            "incompatible",
            "evaluator(vbstore<0.1)",
        ),
        (
            {"evaluator": {"package": "visbench", "version": "0.27.0"}},
            "incompatible",
            "evaluator(visbench!=vbstore)",
        ),
    ],
)
def test_every_reason_is_named(suite, overrides, state, reason):
    got = verdict(suite, **overrides)
    assert got["state"] == state
    assert not got["ranked"]
    assert reason in got["reasons"], got["reasons"]


def test_all_reasons_at_once_and_incompatible_wins(suite):
    got = verdict(suite, comparable=False, sample_counts={"day": 3})
    assert got["state"] == "incompatible"
    assert got["reasons"] == [
        "not-comparable(--no-strict)",
        "sample-count(day: 3 != 1200)",
        "sample-count(night: unknown)",
    ]


def test_equal_counts_on_other_data_do_not_pass(suite):
    assert (
        verdict(suite, data={"kind": "external", "manifestSha256": "c" * 64})["state"]
        == "incompatible"
    )


def test_evidence_levels(suite):
    reported = build(suite, **evidence(data=None, evaluator=None))
    assert reported["evidence"] == "reported"
    assert reported["missing"] == ["data", "evaluator"]
    assert reported["verdict"]["ranked"]  # reported is still ranked, with what is missing named


def test_random_weights_rank_only_on_a_random_weights_suite(store):
    suite = push_suite(store, road_test(weights="random"))[0]
    assert verdict(suite, checkpoint={"id": "r" * 64, "label": "r", "weights": "random"})["ranked"]
    assert verdict(suite)["reasons"] == ["weights(pretrained)"]


def test_fixed_weights_rank_with_random_baselines_never_as_pretrained(store, suite):
    """Fixed weights (set by construction, nothing learned) are an untrained baseline."""
    fixed = {"id": "f" * 64, "label": "test_pixels", "weights": "fixed"}
    assert verdict(suite, checkpoint=fixed)["reasons"] == ["weights(fixed)"]
    baselines = push_suite(store, road_test(version=2, weights="random"))[0]
    assert verdict(baselines, checkpoint=fixed)["ranked"]
    for other in ("checkpoint", "unknown"):
        got = verdict(baselines, checkpoint={**fixed, "weights": other})
        assert got["reasons"] == [f"weights({other})"]


def test_judging_is_pure_and_recording_is_idempotent(store, suite):
    doc = build(suite, **evidence())
    assert judge(suite, doc) == doc["verdict"]
    dry = record(store, doc, dry_run=True)
    assert dry.id is None
    assert not store.ls("evaluation")
    first = record(store, doc, recorded=100.0)
    again = record(store, doc, recorded=200.0)
    assert first.new
    assert not again.new
    assert again.id == first.id
    assert again.recorded == 100.0


def test_a_parameter_added_after_results_were_stored_reads_as_its_default(store):
    """A result leaves out a parameter added later at its default (Task.keyed_params): a suite
    pinning that default takes it; another value is still a mismatch."""
    pinned = {"lr": 0.001, "n_bins": 256}  # depth's n_bins: added, default 256
    suite = push_suite(store, road_test(task="depth", params=pinned))[0]
    ran = {"task": "depth", "params": {"lr": 0.001}}
    assert verdict(suite, protocol=ran)["state"] == "eligible"
    ran = {"task": "depth", "params": {"lr": 0.001, "n_bins": 128}}
    assert "protocol-mismatch: n_bins(128 != 256)" in verdict(suite, protocol=ran)["reasons"]
