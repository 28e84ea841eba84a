"""Records, not dicts, above the engine (issue #33): the constant-key reads of stored documents
that ``benchmarks/record_reads.py`` counts in the layers above the engine, as a ratchet. Each
module that still reads a document by key has its count and its reason; a new read fails, and
a read turned into a record's attribute lowers the count.

Run the script for the figures: ``python benchmarks/record_reads.py --lines``."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "record_reads.py"
_spec = importlib.util.spec_from_file_location("record_reads", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
record_reads = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record_reads)

# module -> (reads at most, why a document and not its record)
STILL_READ = {
    "vbstore/suites/_verdict.py": (27, "judges an evaluation before it is a record: evidence, "
                                       "missing and verdict, the record's required fields, are "
                                       "what it computes (at evaluate, and again at a pull)"),
    "vbstore/suites/_suite.py": (13, "normalize: a suite file made into its stored form "
                                     "(defaults filled, old fields moved) before a SuiteRecord "
                                     "can read it"),
    "vbstore/cli/_resulttext.py": (6, "StoredResult: the cached answer reads a result document "
                                      "as ResultRecord.from_dict does (renamed metrics) without "
                                      "importing the record types"),
    "vbstore/heads/_record.py": (6, "a head's compatibility record complete or not: pull and "
                                    "import name each field it lacks, where HeadCompat would "
                                    "stop at the first"),
    "vbstore/heads/_files.py": (5, "a head file from elsewhere, checked for what it claims "
                                   "(format, vbstore.kind) before it is parsed"),
    "vbstore/heads/_share.py": (4, "the gate's check of an arriving head: an untrusted record, "
                                   "whose missing fields are not this check's to refuse"),
    "vbstore/suites/_external.py": (4, "a protocol file the user gives, not a stored suite"),
    "vbstore/cli/store_cmds.py": (3, "show: what it prints as stored (a safetensors header's "
                                     "entries, the raw document)"),
    "vbstore/suites/reference.py": (3, "a suite document being made (written into)"),
    "vbstore/cli/suite_cmds.py": (1, "suite digest FILE: a user's file"),
    "vbstore/remotes/_pull.py": (1, "an arriving blob, checked for its kind before it is "
                                    "trusted"),
}


def test_the_counter_sees_reads_through_names_parameters_and_returns():
    code = {
        "vbstore/cli/a.py": ("def show(store, oid):\n    doc = store.read_json(oid)\n"
                             "    print(doc['task'])\n    render(doc)\n"
                             "    meta = stored(store, oid)\n    return meta.get('format')\n"),
        "vbstore/cli/b.py": "def render(result):\n    return result['metrics']['top1']\n",
        "vbstore/store/c.py": "def stored(store, oid):\n    return store.read_json(oid)\n",
    }
    analysis = record_reads.Analysis({rel: ast.parse(text) for rel, text in code.items()})
    analysis.run()
    assert analysis.reads("vbstore/cli/a.py") == [(3, "task"), (6, "format")]
    assert analysis.reads("vbstore/cli/b.py") == [(2, "metrics"), (2, "top1")]


def test_a_record_read_is_not_a_document_read():
    code = ("def show(store, oid):\n    record = ResultRecord.from_dict(store.read_json(oid))\n"
            "    return record.metrics, record.backbone['spec']\n")
    analysis = record_reads.Analysis({"vbstore/cli/a.py": ast.parse(code)})
    analysis.run()
    assert analysis.reads("vbstore/cli/a.py") == []


@pytest.mark.slow
def test_the_layers_above_the_engine_read_no_new_document_by_key():
    found = record_reads.count()
    over = {rel: [f"{line}: {key!r}" for line, key in reads]
            for rel, reads in found.items() if len(reads) > STILL_READ.get(rel, (0, ""))[0]}
    assert over == {}, "read the document once through its record (vbstore.records)"
