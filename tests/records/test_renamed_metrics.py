"""A metric renamed to its peer's name: records stored under the old name read under the new one,
their stored documents (and so their ids) untouched."""

from vbstore import canonical
from vbstore.cli import _resulttext
from vbstore.records import ResultRecord
from vbstore.records.result import RENAMED_METRICS

A, B = "a" * 64, "b" * 64

OLD = {  # a retrieval record as vbstore wrote it before retrieval's mAP took VisBench's name
    "kind": "result", "task": "retrieval", "op_version": 1, "params": {}, "seed": 0, "seeds": [0],
    "inputs": {"backbone": A, "eval_manifest": B},
    "metrics": {"mean_average_precision": 0.75, "recall@1": 0.9, "recall@10": 1.0,
                "recall@5": 1.0},
    "sample_ci": {"mean_average_precision": {"ci_low": 0.7, "ci_high": 0.8, "std": 0.02,
                                             "n_boot": 10, "confidence": 0.95,
                                             "method": "percentile"}},
    "baseline": {"predictor": "random features", "headline": "recall@1",
                 "metrics": {"mean_average_precision": 0.5, "recall@1": 0.5}, "value": 0.5,
                 "margin": 0.4, "beaten": True},
}


def test_an_old_retrieval_record_reads_map_and_writes_back_its_stored_bytes():
    record = ResultRecord.from_dict(OLD)
    assert record.metrics == {"mAP": 0.75, "recall@1": 0.9, "recall@10": 1.0, "recall@5": 1.0}
    assert set(record.sample_ci) == {"mAP"}
    assert record.baseline["metrics"]["mAP"] == 0.5
    assert canonical.dumps(record.to_dict()) == canonical.dumps(OLD)  # same bytes, same id


def test_a_new_record_and_other_tasks_are_read_as_written():
    new = {**OLD, "metrics": {"mAP": 0.75}, "sample_ci": None, "baseline": None}
    assert ResultRecord.from_dict(new).metrics == {"mAP": 0.75}
    multilabel = {**OLD, "task": "multilabel", "metrics": {"mean_average_precision": 0.6}}
    # CLIP_benchmark's multilabel metric keeps its name
    assert ResultRecord.from_dict(multilabel).metrics == {"mean_average_precision": 0.6}


def test_the_cached_printer_shows_the_new_name_and_its_interval():
    lines = [text for _, text in _resulttext.result_lines(
        OLD, A, "cached", 0.01, ["recall@1", "recall@5", "recall@10", "mAP"])]
    assert any(line.split()[0] == "mAP" and "0.7500" in line for line in lines[1:])
    assert not any("mean_average_precision" in line for line in lines)
    assert any("95% CI over eval samples 0.7000" in line for line in lines)
    # the printer's copy of the table (it imports nothing) is the records' table
    assert _resulttext.RENAMED_METRICS == RENAMED_METRICS
