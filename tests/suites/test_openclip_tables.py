"""open_clip's published tables as reported evaluations, and ``reproduce`` against them."""

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import vbstore
from vbstore.cli import cli
from vbstore.errors import NoPublishedFigure, UsageError
from vbstore.suites import (
    build,
    get_suite,
    import_openclip,
    import_results,
    leaderboard,
    record,
    reproduce,
)
from vbstore.suites._openclip import COMMIT, DATASETS, read_table

REFERENCE = Path(__file__).resolve().parents[2] / "suites" / "reference"
RESULTS = REFERENCE / "openclip_results.csv"
RETRIEVAL = REFERENCE / "openclip_retrieval_results.csv"
B32 = "open_clip:ViT-B-32@openai"


def _subset(tmp_path, source, keep, name=None):
    """The published table cut to a few rows (a different file: no commit is claimed)."""
    rows = list(csv.reader(source.read_text().splitlines()))
    out = tmp_path / (name or source.name)
    with out.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(rows[0])
        writer.writerows(r for r in rows[1:] if (r[0], r[1]) in keep)
    return out


KEEP = {("ViT-B-32", "openai"), ("RN50", "openai"), ("ViT-H-14-378-quickgelu", "dfn5b")}


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    return invoke


def test_the_published_file_is_read_whole_with_its_commit_and_its_zeros_skipped(store):
    table = import_openclip(store, RESULTS, dry_run=True)
    assert table.commit == COMMIT
    assert len(table.suites) == 31  # 35 classification datasets, 4 without a known test size
    assert len(table.evaluations) == 31 * 121 - 31
    # every 0.0000 cell is FMoW's, read as not evaluated, never recorded as a score
    assert len(table.skipped) == 31
    assert {s["dataset"] for s in table.skipped} == {"wilds/fmow"}
    assert {"Pascal VOC 2007", "SUN397", "Dollar Street", "GeoDE", "WinoGAViL", "Flickr",
            "Average perf. on 38 datasets"} <= set(table.left_out)
    assert not store.db.one("SELECT COUNT(*) FROM evaluations")[0]  # a dry run stores nothing


def test_the_classification_table_holds_the_same_cells():
    header, rows, _ = read_table(REFERENCE / "openclip_classification_results.csv")
    _, full, _ = read_table(RESULTS)
    by_key = {(r["name"], r["pretrained"]): r for r in full}
    datasets = [c for c in header[4:] if not c.startswith("Average")]
    assert len(rows) == len(full) == 121
    for row in rows:
        assert all(row[c] == by_key[row["name"], row["pretrained"]][c] for c in datasets)


def test_imported_rows_rank_on_their_dataset_board_as_reported(store, tmp_path):
    table = import_openclip(store, _subset(tmp_path, RESULTS, KEEP), recorded=1.0)
    assert table.commit is None  # not byte-identical to the published file
    board = leaderboard(store, "openclip-imagenet1k@1")
    rows = {r["label"]: r for r in board.rows}
    assert rows[B32]["headline"] == pytest.approx(0.6332)
    assert rows[B32]["evidence"] == "reported"
    assert board.rows[0]["label"] == "open_clip:ViT-H-14-378-quickgelu@dfn5b"
    evaluation = store.read_json(rows[B32]["evaluation"])
    assert evaluation["missing"] == ["data", "protocol", "evaluator"]
    source = evaluation["sources"]["test"]
    assert source["file"] == "openclip_results.csv"
    assert source["columns"] == ["ImageNet 1k"]
    assert source["vouched"] == ["sample_count"]
    assert "commit" not in source
    assert get_suite(store, "openclip-imagenet1k@1").conditions[0]["sampleCount"] == 50000
    # RN50/openai's FMoW cell is 0.0000: no evaluation, the others are there
    fmow = {r["label"] for r in leaderboard(store, "openclip-wilds-fmow@1").rows}
    assert B32 in fmow
    assert "open_clip:RN50@openai" not in fmow
    # importing again records nothing new
    again = import_openclip(store, _subset(tmp_path, RESULTS, KEEP), recorded=2.0)
    assert not any(e.new for e in again.evaluations)


def test_retrieval_figures_keep_all_six_recalls(store, tmp_path):
    import_openclip(store, _subset(tmp_path, RETRIEVAL, KEEP))
    board = leaderboard(store, "openclip-flickr30k@1")
    row = next(r for r in board.rows if r["label"] == B32)
    assert row["headline"] == pytest.approx(0.5878)  # image retrieval recall@1
    scores = store.read_json(row["evaluation"])["verdict"]["scores"]["overall"]
    assert scores["text_retrieval_recall@10"] == pytest.approx(0.9820)
    assert len(scores) == 6


def test_a_dataset_without_a_known_size_is_imported_when_given(store, tmp_path):
    table = import_openclip(store, _subset(tmp_path, RESULTS, KEEP),
                            sample_counts={"voc2007": 14976})
    assert "openclip-voc2007@1" in table.suites
    assert "Pascal VOC 2007" not in table.left_out
    with pytest.raises(UsageError, match="imagenet1k's test split has 50000"):
        import_openclip(store, _subset(tmp_path, RESULTS, KEEP),
                        sample_counts={"imagenet1k": 49000})
    with pytest.raises(UsageError, match="not a dataset of open_clip"):
        import_openclip(store, _subset(tmp_path, RESULTS, KEEP), sample_counts={"nope": 1})


def test_a_table_that_is_not_one_is_refused(store, tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("model,pretrained,ImageNet 1k\nViT-B-32,openai,0.6\n")
    with pytest.raises(UsageError, match="not one of open_clip's results tables"):
        import_openclip(store, bad)
    cut = tmp_path / "cut.csv"
    cut.write_text("name,pretrained,ImageNet 1k\nViT-B-32,openai\n")
    with pytest.raises(UsageError, match="line 2 has 2 cells"):
        import_openclip(store, cut)
    text = tmp_path / "t.csv"
    text.write_text("name,pretrained,ImageNet 1k\nViT-B-32,openai,n/a\n")
    with pytest.raises(UsageError, match="'n/a' is not a number"):
        import_openclip(store, text)


def _my_run(store, acc1, label=B32):
    """An observed evaluation of the checkpoint on the ImageNet suite, as `vbstore evaluate`
    records one (the weights named by their tensor hash, the spec as the label)."""
    suite = get_suite(store, "openclip-imagenet1k@1")
    doc = build(suite, checkpoint={"id": "ab" * 32, "label": label, "weights": "pretrained"},
                results={"test": {"overall": {"acc1": acc1, "acc5": 0.88}}},
                sample_counts={"test": 50000},
                data={"kind": "external", "label": "my ImageNet val"},
                protocol={"task": "zeroshot_classification", "params": {}},
                evaluator={"package": "vbstore", "version": "0"})
    return record(store, doc, recorded=5.0)


def test_reproduce_compares_a_run_with_the_published_figure_both_ways(store, tmp_path):
    import_openclip(store, _subset(tmp_path, RESULTS, KEEP), recorded=1.0)
    close = _my_run(store, 0.6301)
    assert close.record.evidence == "observed"
    result = reproduce(store, close.id)
    assert result.reproduced
    assert result.exit_code == 0
    [comparison] = result.comparisons
    assert comparison.published == pytest.approx(0.6332)
    assert comparison.difference == pytest.approx(-0.0031)
    assert result.published_source["file"] == "openclip_results.csv"
    # higher than published by more than the tolerance is not the same number either
    higher = reproduce(store, _my_run(store, 0.6500).id)
    assert not higher.reproduced
    assert higher.exit_code == 12
    assert reproduce(store, _my_run(store, 0.6500).id, tolerance=0.02).reproduced
    with pytest.raises(UsageError, match="cannot be negative"):
        reproduce(store, close.id, tolerance=-1)


def test_reproduce_refuses_a_reported_candidate_and_a_checkpoint_never_published(store, tmp_path):
    import_openclip(store, _subset(tmp_path, RESULTS, KEEP), recorded=1.0)
    published = leaderboard(store, "openclip-imagenet1k@1").rows[0]["evaluation"]
    with pytest.raises(UsageError, match="itself a reported figure"):
        reproduce(store, published)
    other = _my_run(store, 0.5, label="open_clip:ViT-B-16@openai")
    with pytest.raises(NoPublishedFigure, match="no published figure of open_clip:ViT-B-16"):
        reproduce(store, other.id)


def test_cli_import_board_and_reproduce(run, tmp_path):
    table = _subset(tmp_path, RESULTS, KEEP)
    out = run("import", "openclip", str(table))
    assert out.exit_code == 0, out.output
    assert "openclip_results.csv (commit unknown): 92 figures on 31 suites" in out.output
    assert "skipped   1 cell of 0.0000, read as not evaluated: wilds/fmow (1)" in out.output
    assert "left out  SUN397: the test split size of sun397 is not known" in out.output
    board = run("leaderboard", "openclip-imagenet1k@1")
    line = next(x for x in board.output.splitlines() if B32 in x)
    assert "0.6332" in line
    assert "reported" in line
    shown = json.loads(run("leaderboard", "openclip-imagenet1k@1", "--json").output)
    assert len(shown["rows"]) == 3
    missing = run("reproduce", "0" * 12)
    assert missing.exit_code == 9
    from vbstore.store import Store

    store = Store(tmp_path / "s")
    try:
        mine, far = _my_run(store, 0.6330).id, _my_run(store, 0.60).id
    finally:
        store.close()
    ok = run("reproduce", mine[:12])
    assert ok.exit_code == 0, ok.output
    assert "test       acc1                         0.6332 -> 0.6330  -0.0002  reproduced" in \
        ok.output
    assert "(openclip_results.csv line" in ok.output
    assert run("reproduce", far[:12], "--tolerance", "0.01").exit_code == 12


def test_import_results_names_the_command_for_a_table(store, suite):
    with pytest.raises(UsageError, match="one of open_clip's results tables") as caught:
        import_results(store, RESULTS, suite.ref)
    assert "vbstore import openclip" in caught.value.hint


def test_every_dataset_has_a_distinct_slug():
    assert len({d.slug for d in DATASETS}) == len(DATASETS)


@pytest.mark.slow
def test_a_vbstore_run_is_judged_on_the_dataset_suite(store, tmp_path):
    """A computed result evaluated on an open_clip suite: observed evidence, and only what
    differs from the published run keeps it from ranking (here random weights); its random
    weights are never matched with the published pretrained figure of the same spec."""
    from vbstore.data import make_shapes
    from vbstore.suites import from_results, push_suite
    from vbstore.suites._openclip import suite_document

    spec = "open_clip:ViT-B-32@laion2b_s34b_b79k"
    import_openclip(store, _subset(tmp_path, RESULTS, {("ViT-B-32", "laion2b_s34b_b79k")}))
    shapes = make_shapes(tmp_path / "shapes", per_class=3, seed=1, size=32)
    result = vbstore.get_result(spec, "zeroshot_classification", str(shapes), split="val",
                                weights="random", input_size=32, store=store, progress=False)
    # the suite of the same protocol on this data (the published one pins ImageNet's 50000)
    doc = suite_document(DATASETS[0], result.record.eval_data["samples"])
    suite, _ = push_suite(store, {**doc, "slug": "openclip-shapes-check"})
    mine = record(store, from_results(store, suite, {"test": result.id}))
    assert mine.record.evidence == "observed"
    assert mine.record.reasons == ["weights(random)"]
    published = get_suite(store, "openclip-imagenet1k@1")
    ours = record(store, from_results(store, published, {"test": result.id}))
    assert sorted(ours.record.reasons) == ["sample-count(test: 15 != 50000)", "weights(random)"]
    with pytest.raises(NoPublishedFigure, match=f"{spec} seed=0"):
        reproduce(store, ours.id)


def test_reproduce_finds_a_visbench_readme_figure_by_its_backbone_name(store):
    """A VisBench record is imported as checkpoint ``visbench:<backbone>`` labelled with the
    backbone's name; a run of that backbone is labelled with its spec: the two must match (the
    README's figures are published figures too), and a random-weight run never does."""
    from vbstore.suites import push_suite, read_suite_file

    suite, _ = push_suite(store, read_suite_file(REFERENCE / "imagenette-linear.json"))
    [published] = import_results(store, REFERENCE / "visbench-readme-imagenette.jsonl",
                                 suite.ref, sample_counts={"val": 3925}, weights="pretrained",
                                 recorded=1.0)
    assert published.record.checkpoint["id"] == "visbench:dinov2_vits14"

    def mine(top1, weights="pretrained", label="dinov2_vits14"):
        doc = build(suite, checkpoint={"id": "cd" * 32, "label": label, "weights": weights},
                    results={"val": {"overall": {"top1": top1}}}, sample_counts={"val": 3925},
                    data={"kind": "external", "label": "my imagenette2 val"},
                    protocol={"task": "classification", "params": {}},
                    evaluator={"package": "vbstore", "version": "0"})
        return record(store, doc, recorded=5.0)

    result = reproduce(store, mine(0.9911).id)
    assert result.published == published.id
    [comparison] = result.comparisons
    assert comparison.published == pytest.approx(0.9939)
    assert result.reproduced
    with pytest.raises(NoPublishedFigure):  # the same name with other weights is not the figure
        reproduce(store, mine(0.99, weights="random").id)
