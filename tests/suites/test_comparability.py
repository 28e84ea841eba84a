"""Comparability keys: every setting that changes a number is pinned by the suite or labelled on
the board; data identity by content where both sides are vbstore manifests; Visin's checks."""

import dataclasses
import json
from pathlib import Path

import pytest
from suites_support import evidence, road_test

from vbstore.errors import UsageError
from vbstore.features import ExtractorParams
from vbstore.heads import head_record
from vbstore.records import ManifestRecord, ResultRecord
from vbstore.store import fsck
from vbstore.suites import (
    build,
    content_sha256,
    leaderboard,
    list_evaluations,
    manifest_sha256,
    push_suite,
    record,
)
from vbstore.suites._settings import (
    EXTRACTOR_FIELDS,
    INPUT_ROLES,
    NAMES,
    RESULT_FIELDS,
    rules_table,
)

ROOT = Path(__file__).resolve().parents[2]
# a setting's default value and another value it could take
VALUES = {
    "op_version": (1, 2),
    "layers": ([-1], [-2]),
    "pooling": ("cls", "mean"),
    "mode": ("pooled", "dense"),
    "input_size": (224, 48),
    "preprocessing": ({"mean": [0.5], "std": [0.5]}, {"mean": [0.4], "std": [0.5]}),
    "precision": ("fp32", "bf16"),
    "dense_dtype": ("float16", "float32"),
    "finetune": (None, {"blocks": 2, "backbone_lr": 1e-5}),
    "seeds": (1, 3),
    "train_data": ("a" * 64, "b" * 64),
}


def settings(**changed):
    out = {name: default for name, (default, _) in VALUES.items()}
    out["params"] = {"lr": 0.001}
    out.update(changed)
    return out


def pinned_suite(store, **pins):
    doc = road_test()
    doc["vbstore"] = {"settings": pins}
    return push_suite(store, doc)[0]


def test_the_table_covers_every_setting_it_compares():
    assert set(VALUES) == set(NAMES)


# ---- every field of the result record is pinned, labelled, the result or provenance ---------

_KINDS = ("setting:", "pinned:", "result", "provenance", "identity:", "attempt:", "see ")


def _named_settings(text):
    return [
        word.strip("(),;")
        for part in text.split(";")
        if part.strip().startswith("setting:")
        for word in part.split(":", 1)[1].split(",")
        for word in [word.strip().split(" ")[0]]
    ]


def test_every_result_field_that_changes_a_number_is_pinned_or_labelled():
    typed = {f.name for f in dataclasses.fields(ResultRecord)} - {"extra"}
    schema = json.loads((ROOT / "vbstore/_schemas/result.schema.json").read_text())
    walked = typed | set(schema["properties"])
    unclassified = sorted(walked - set(RESULT_FIELDS))
    assert not unclassified, (
        f"result fields {unclassified} are not in vbstore/suites/_settings.py RESULT_FIELDS: "
        "say whether each changes a number (then pin or label it) or not"
    )
    for field, rule in RESULT_FIELDS.items():
        assert rule.startswith(_KINDS), (field, rule)
        for name in _named_settings(rule):
            assert name in NAMES or name == "params", (field, name)
    # the extractor's every key, dense and bf16 included
    params = ExtractorParams(mode="dense", precision="bf16", input_size=64)
    for key in params.to_dict():
        assert EXTRACTOR_FIELDS.get(key) in NAMES, key
    for f in dataclasses.fields(ExtractorParams):
        assert f.name in EXTRACTOR_FIELDS, f.name


def test_a_stored_result_has_no_field_or_input_the_rules_miss(store, tmp_path):
    from vbstore import get_result
    from vbstore.data import make_shapes

    data = str(make_shapes(tmp_path / "shapes", per_class=3, seed=1, size=32))
    result = get_result("test_cnn", "classification", data, data, store=store, split="val",
                        train_split="train", weights="random", progress=False,
                        params={"epochs": 2})
    doc = store.read_json(result.id)
    assert set(doc) - {"extra"} <= set(RESULT_FIELDS)
    assert {role.split(".")[0] for role in doc["inputs"]} <= set(INPUT_ROLES)
    assert set(doc["extractor"]) <= set(EXTRACTOR_FIELDS)
    from vbstore.suites import settings_of

    read = settings_of(store, ResultRecord.from_dict(doc))
    assert read["layers"] == [-1]
    assert read["input_size"]  # the backbone's own size when no --input-size was given
    assert read["preprocessing"]
    assert "input_size" not in read["preprocessing"]
    assert read["finetune"] is None  # no finetune field: frozen
    assert read["train_data"] == doc["data"]["train"]["manifest"]
    # a fine-tuned result (two seeds): its prefixes and per-seed fine-tuned weights are inputs
    tuned = get_result("test_cnn", "classification", data, data, store=store, split="val",
                       train_split="train", weights="random", progress=False,
                       params={"epochs": 1}, finetune_blocks=1, seeds=2)
    doc = store.read_json(tuned.id)
    assert set(doc) - {"extra"} <= set(RESULT_FIELDS)
    roles = {role.split(".")[0] for role in doc["inputs"]}
    assert {"train_prefix", "eval_prefix", "finetuned"} <= roles <= set(INPUT_ROLES)
    assert {doc["inputs"]["finetuned.0"], doc["inputs"]["finetuned.1"]} == {
        head_record(store, doc["inputs"][f"head.{i}"])["finetune"]["weights"] for i in (0, 1)}
    assert settings_of(store, ResultRecord.from_dict(doc))["finetune"] == {
        "blocks": 1, "backbone_lr": 1e-4}


def test_the_docs_print_the_rule_table():
    assert rules_table() in (ROOT / "docs/suites.md").read_text()


# ---- verdicts -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_pinned_setting_that_differs_is_incompatible_naming_both_values(store, name):
    default, other = VALUES[name]
    suite = pinned_suite(store, **{name: default})
    same = build(suite, **evidence(settings=settings()))["verdict"]
    assert same["state"] == "eligible"
    assert same["variant"] == {k: v for k, v in settings().items()
                               if k not in (name, "params") and (v is not None or k == "finetune")}
    verdict = build(suite, **evidence(settings=settings(**{name: other})))["verdict"]
    assert verdict["state"] == "incompatible"
    reason = next(r for r in verdict["reasons"] if r.startswith(f"{name}("))
    assert " != " in reason


def test_reasons_print_values_as_the_issue_reads_them(store):
    suite = pinned_suite(store, layers=[-1], precision="fp32", input_size=224, finetune=None)
    reasons = build(suite, **evidence(settings=settings(
        layers=[-2], precision="bf16", input_size=48,
        finetune={"blocks": 2, "backbone_lr": 1e-5})))["verdict"]["reasons"]
    assert reasons[:4] == [
        "layers(-2 != -1)",
        "input_size(48 != 224)",
        "precision(bf16 != fp32)",
        'finetune({"backbone_lr":1e-05,"blocks":2} != none)',
    ]


def test_pin_finetune_none_is_frozen_and_suite_new_pins_it(store, tmp_path):
    """``--pin finetune=none`` is null (the string would refuse every frozen result), and
    ``suite new`` pins frozen by default: a fine-tuned result never ranks beside frozen ones."""
    from vbstore.data import make_shapes
    from vbstore.suites import new_suite

    suite = pinned_suite(store, finetune="none")
    frozen = build(suite, **evidence(settings=settings()))["verdict"]
    assert frozen["state"] == "eligible", frozen["reasons"]
    tuned = build(suite, **evidence(settings=settings(
        finetune={"blocks": 1, "backbone_lr": 1e-4})))["verdict"]
    assert tuned["state"] == "incompatible"
    data = str(make_shapes(tmp_path / "shapes", per_class=2, seed=1, size=32))
    for pin in ({}, {"finetune": "none"}):
        doc = new_suite(store, slug="shapes", task="classification", data=data, split="val",
                        pin=pin)
        assert doc["vbstore"]["settings"]["finetune"] is None


def test_a_frozen_variant_names_finetune_null_and_its_label_says_none(store):
    suite = push_suite(store, road_test())[0]  # leaves finetune open
    verdict = build(suite, **evidence(settings=settings()))["verdict"]
    assert verdict["variant"]["finetune"] is None
    _attempt(store, suite, 1.0)
    _attempt(store, suite, 2.0, finetune={"blocks": 1, "backbone_lr": 0.001})
    labels = sorted(r["label"] for r in leaderboard(store, "road-test@1").rows)
    assert labels == ["model-a [finetune.backbone_lr=0.001 finetune.blocks=1]",
                      "model-a [finetune=none]"]


def test_evidence_from_elsewhere_without_settings_is_not_judged_on_them(store):
    suite = pinned_suite(store, layers=[-1])
    verdict = build(suite, **evidence())["verdict"]
    assert verdict["state"] == "eligible"
    assert verdict["variant"] == {}


def test_unpinned_task_params_join_the_variant(store):
    suite = push_suite(store, road_test())[0]  # pins lr only
    verdict = build(suite, **evidence(settings=settings(params={"lr": 0.001, "epochs": 5})))[
        "verdict"]
    assert verdict["variant"]["params.epochs"] == 5
    assert "params.lr" not in verdict["variant"]


# ---- the board: one row per checkpoint and variant, never two variants under one label -------


def _attempt(store, suite, when, day=0.8, **changed):
    return record(store, build(suite, **evidence(day=day, settings=settings(**changed))),
                  recorded=when)


def test_board_ranks_each_variant_under_a_label_that_shows_it(store):
    suite = push_suite(store, road_test())[0]  # leaves every setting open
    _attempt(store, suite, 1.0, day=0.8)
    _attempt(store, suite, 2.0, day=0.6, layers=[-2], precision="bf16")
    _attempt(store, suite, 3.0, day=0.7)  # a later attempt of the first variant
    board = leaderboard(store, "road-test@1")
    assert [(r["label"], r["attempts"]) for r in board.rows] == [
        ("model-a [layers=-1 precision=fp32]", 2),
        ("model-a [layers=-2 precision=bf16]", 1),
    ]
    assert board.rows[0]["headline"] == pytest.approx((0.7 + 0.7) / 2)  # latest, not best
    labels = {}
    for row in board.rows + board.unranked:
        assert labels.setdefault(row["label"], row["variant"]) == row["variant"]


def test_a_pinned_setting_never_shares_a_label_it_leaves_the_board(store):
    suite = pinned_suite(store, layers=[-1], precision="fp32")
    _attempt(store, suite, 1.0)
    _attempt(store, suite, 2.0, layers=[-2], precision="bf16")
    board = leaderboard(store, "road-test@1")
    # the incompatible attempt is an attempt of the same row, never a row of its own
    assert [(r["label"], r["attempts"]) for r in board.rows] == [("model-a", 2)]
    assert board.unranked == []
    latest = list_evaluations(store)[0]
    assert latest["reasons"] == ["layers(-2 != -1)", "precision(bf16 != fp32)"]


# ---- data identity --------------------------------------------------------------------------


def _manifest(split, image):
    return ManifestRecord.from_dict({
        "kind": "manifest", "layout": "image_folder", "split": split, "classes": ["a"],
        "samples": [{"name": "a/0.png", "image": image, "label": 0}],
    })


def test_content_digest_tells_apart_what_names_cannot():
    train = {"test": ("train", _manifest("train", "1" * 64))}
    val = {"test": ("val", _manifest("val", "2" * 64))}
    same_pixels_other_split = {"test": ("val", _manifest("val", "1" * 64))}
    assert manifest_sha256({"test": ["a/0.png"]}) == manifest_sha256({"test": ["a/0.png"]})
    digests = {content_sha256(train), content_sha256(val),
               content_sha256(same_pixels_other_split)}
    assert len(digests) == 3


def test_verdict_says_which_data_identity_it_checked(store):
    doc = road_test()
    doc["vbstore"] = {"contentSha256": "c" * 64}
    suite = push_suite(store, doc)[0]
    names_only = build(suite, **evidence())["verdict"]
    assert names_only["checked"] == ["data(names)"]
    same = build(suite, **evidence(data={"kind": "external", "manifestSha256": "a" * 64,
                                         "contentSha256": "c" * 64}))["verdict"]
    assert same["checked"] == ["data(content)"]
    assert same["state"] == "eligible"
    # the names match, what the samples are does not: a val split filed under a train condition
    other = build(suite, **evidence(data={"kind": "external", "manifestSha256": "a" * 64,
                                          "contentSha256": "d" * 64}))["verdict"]
    assert other["reasons"] == ["data-mismatch(content)"]


@pytest.mark.parametrize(
    ("pinned", "given", "reason"),
    [
        ({"kind": "hf", "repo": "org/road", "commit": "1" * 40},
         {"kind": "hf", "repo": "org/road", "commit": "2" * 40}, "data-mismatch(commit)"),
        ({"kind": "visin", "archiveSha256": "1" * 64},
         {"kind": "visin", "archiveSha256": "2" * 64}, "data-mismatch(archiveSha256)"),
        ({"kind": "external", "manifestSha256": "a" * 64},
         {"kind": "hf", "repo": "org/road", "commit": "1" * 40},
         "data-mismatch(kind: hf != external)"),
    ],
)
def test_visin_data_kinds_are_compared(store, pinned, given, reason):
    suite = push_suite(store, road_test(data=pinned))[0]
    assert build(suite, **evidence(data=given))["verdict"]["reasons"] == [reason]


# ---- Visin's workflow -----------------------------------------------------------------------


@pytest.mark.parametrize(("suite_task", "ran"), [
    ("semantic-segmentation", "semantic_segmentation"),
    ("semantic_segmentation", "semantic-segmentation"),
])
def test_task_names_are_aliases_both_ways(store, suite_task, ran):
    suite = push_suite(store, road_test(task=suite_task))[0]
    verdict = build(suite, **evidence(protocol={"task": ran, "params": {"lr": 0.001}}))["verdict"]
    assert verdict["state"] == "eligible"
    other = build(suite, **evidence(protocol={"task": "depth", "params": {"lr": 0.001}}))
    assert other["verdict"]["reasons"] == [f"protocol-mismatch: task(depth != {suite_task})"]


def test_classes_scored_and_ignored_are_checked_when_both_say(store):
    suite = push_suite(store, road_test(classes={"scored": ["road", "car"], "ignored": ["sky"]}))[0]
    assert build(suite, **evidence())["verdict"]["state"] == "eligible"  # not given: not checked
    same = build(suite, **evidence(classes={"scored": ["car", "road"], "ignored": ["sky"]}))
    assert same["verdict"]["state"] == "eligible"
    fewer = build(suite, **evidence(classes={"scored": ["road"], "ignored": ["sky", "car"]}))
    assert fewer["verdict"]["reasons"] == ["classes(scored)", "classes(ignored)"]


def test_a_protocol_digest_that_differs_is_incompatible(store):
    suite = push_suite(store, road_test())[0]
    good = build(suite, **evidence(protocol={"digest": suite.digest}))["verdict"]
    assert good["state"] == "eligible"
    bad = build(suite, **evidence(protocol={"digest": "0" * 64}))["verdict"]
    assert bad["reasons"] == ["protocol-mismatch(digest)"]


def test_a_correction_takes_the_replaced_evaluation_off_the_board(store):
    suite = push_suite(store, road_test())[0]
    first = record(store, build(suite, **evidence()), recorded=1.0)
    assert [r["evaluation"] for r in leaderboard(store, "road-test@1").rows] == [first.id]
    # the correction cannot be ranked yet (a count is missing): the first leaves the ranking
    fix = record(store, build(suite, **evidence(sample_counts={"day": 1200}),
                              supersedes=first.id[:12]), recorded=2.0)
    assert fix.doc["supersedes"] == first.id
    board = leaderboard(store, "road-test@1")
    assert board.rows == []
    assert board.unranked[0]["attempts"] == 2
    rows = {r["id"]: r for r in list_evaluations(store)}
    assert rows[first.id]["superseded_by"] == fix.id
    assert not rows[first.id]["ranked"]


def test_a_correction_must_be_of_the_same_checkpoint_and_suite(store):
    suite = push_suite(store, road_test())[0]
    first = record(store, build(suite, **evidence()), recorded=1.0)
    other = {"id": "z" * 64, "label": "b", "weights": "pretrained"}
    with pytest.raises(UsageError, match="same checkpoint"):
        record(store, build(suite, **evidence(checkpoint=other), supersedes=first.id))


def test_diff_a_missing_condition_exits_5_even_when_a_score_dropped():
    from vbstore.suites import Change, Diff

    dropped = Change("day", "miou", "max", 0.9, 0.1, -0.8, "regressed")
    gone = Change("night", "miou", "max", 0.8, None, None, "missing")
    assert Diff("s@1", "a", "b", 0.01, (dropped,), ()).exit_code == 4
    assert Diff("s@1", "a", "b", 0.01, (dropped, gone), ()).exit_code == 5
    assert Diff("s@1", "a", "b", 0.01, (dropped,), ("the candidate is not ranked",)).exit_code == 5


def test_fsck_knows_a_correction_and_a_variant_edited_in_sql(store):
    from vbstore.suites import reindex

    suite = push_suite(store, road_test())[0]
    first = _attempt(store, suite, 1.0)
    fix = record(store, build(suite, **evidence(settings=settings()), supersedes=first.id),
                 recorded=2.0)
    assert fsck(store).clean  # the corrected one's ranked 0 is what its correction says
    with store.db.write() as conn:
        conn.execute("UPDATE evaluations SET variant='' WHERE id=?", (fix.id,))
    assert fsck(store).mismatched
    fsck(store, repair=True)
    reindex(store)
    assert fsck(store).clean
    rows = {r["id"]: r for r in list_evaluations(store)}
    assert rows[first.id]["superseded_by"] == fix.id  # a rebuilt index keeps the correction
    assert [r["evaluation"] for r in leaderboard(store, "road-test@1").rows] == [fix.id]


def test_promote_judges_the_settings_on_the_target_suite(store):
    from vbstore.suites import promote

    open_suite = push_suite(store, road_test())[0]
    original = _attempt(store, open_suite, 1.0, layers=[-2])
    pinned = road_test(version=2)
    pinned["vbstore"] = {"settings": {"layers": [-1]}}
    push_suite(store, pinned)
    promoted = promote(store, original.id, suite="road-test@2")
    assert promoted.verdict["reasons"] == ["layers(-2 != -1)"]


def test_a_label_with_one_variant_shows_none_and_each_label_is_compared_alone(store):
    suite = push_suite(store, road_test())[0]
    other = {"id": "b" * 64, "label": "model-b", "weights": "pretrained"}
    _attempt(store, suite, 1.0, input_size=224)
    record(store, build(suite, **evidence(checkpoint=other, settings=settings(input_size=518))),
           recorded=2.0)
    _attempt(store, suite, 3.0, input_size=224, layers=[-2])
    labels = sorted(r["label"] for r in leaderboard(store, "road-test@1").rows)
    # model-b's one variant needs no suffix; model-a's two differ in layers only
    assert labels == ["model-a [layers=-1]", "model-a [layers=-2]", "model-b"]
