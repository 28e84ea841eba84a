"""Suites, evaluations and verdicts, leaderboards and diff: which numbers may be compared.

A suite (``slug@version``) is a written-down, immutable way of scoring in Visin's format; an
evaluation is one checkpoint's results on one suite version with a verdict (eligible,
incomplete, incompatible, every reason named) and an evidence level (observed, reported,
attested). Leaderboards rank one row per checkpoint, its latest ranked attempt; ``diff`` is the
CI gate. See docs/suites.md.

```python
from vbstore import Store
from vbstore.suites import push_suite, read_suite_file, leaderboard

store = Store()
suite, new = push_suite(store, read_suite_file("road-test.json"))
leaderboard(store, "road-test@1").rows
```
"""

from ._board import Board, leaderboard
from ._diff import Change, Diff, diff
from ._evaluate import (
    Evaluation,
    build,
    conditions_to_compute,
    evaluate_with,
    from_results,
    list_evaluations,
    match_conditions,
    open_evaluation,
    record,
    reindex,
    uuid_names,
    with_run_metadata,
)
from ._export import FORMATS, board_csv, board_markdown, board_plot, board_text, visin_results
from ._external import (
    classes_evidence,
    external_evidence,
    file_checkpoint,
    hub_checkpoint,
    parse_data,
    protocol_evidence,
    read_visin_results,
)
from ._import import import_results, read_records
from ._judge import judge_pulled, rejudge
from ._manifest import manifest_from_files, manifest_sha256, parse_assignments, read_split_file
from ._new import condition_manifest, condition_source, new_suite
from ._openclip import TableImport, is_openclip_table
from ._openclip import import_table as import_openclip
from ._pages import MAX_LIMIT, board_page, page_notes
from ._promote import promote
from ._reproduce import TOLERANCE, Reproduction, reproduce
from ._run import SuiteRun, board_place, run_suite, suite_arguments, suite_data
from ._settings import RESULT_FIELDS, SETTINGS, content_sha256, settings_of, show
from ._share import BoardPull, BoardPush, index_stored, local_board, pull_board, push_board
from ._suite import (
    EXTENSION,
    Suite,
    extension_digest,
    get_suite,
    list_suites,
    normalize,
    parse_ref,
    protocol_digest,
    push_suite,
    read_suite_file,
)
from ._verdict import (
    EVIDENCE_LEVELS,
    UNTRAINED,
    check_scores,
    judge,
    same_task,
    score_problems,
    task_name,
    version_tuple,
)

__all__ = [
    "EVIDENCE_LEVELS",
    "EXTENSION",
    "FORMATS",
    "MAX_LIMIT",
    "RESULT_FIELDS",
    "SETTINGS",
    "TOLERANCE",
    "UNTRAINED",
    "Board",
    "BoardPull",
    "BoardPush",
    "Change",
    "Diff",
    "Evaluation",
    "Reproduction",
    "Suite",
    "SuiteRun",
    "TableImport",
    "board_csv",
    "board_markdown",
    "board_page",
    "board_place",
    "board_plot",
    "board_text",
    "build",
    "check_scores",
    "classes_evidence",
    "condition_manifest",
    "condition_source",
    "conditions_to_compute",
    "content_sha256",
    "diff",
    "evaluate_with",
    "extension_digest",
    "external_evidence",
    "file_checkpoint",
    "from_results",
    "get_suite",
    "hub_checkpoint",
    "import_openclip",
    "import_results",
    "index_stored",
    "is_openclip_table",
    "judge",
    "judge_pulled",
    "leaderboard",
    "list_evaluations",
    "list_suites",
    "local_board",
    "manifest_from_files",
    "manifest_sha256",
    "match_conditions",
    "new_suite",
    "normalize",
    "open_evaluation",
    "page_notes",
    "parse_assignments",
    "parse_data",
    "parse_ref",
    "promote",
    "protocol_digest",
    "protocol_evidence",
    "pull_board",
    "push_board",
    "push_suite",
    "read_records",
    "read_split_file",
    "read_suite_file",
    "read_visin_results",
    "record",
    "reindex",
    "rejudge",
    "reproduce",
    "run_suite",
    "same_task",
    "score_problems",
    "settings_of",
    "show",
    "suite_arguments",
    "suite_data",
    "task_name",
    "uuid_names",
    "version_tuple",
    "visin_results",
    "with_run_metadata",
]
