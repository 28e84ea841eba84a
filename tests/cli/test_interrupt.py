"""Ctrl-C anywhere in a command is one line and exit 130 (docs/cli.md#exit-codes), never a
traceback: also before click's group has taken over (the answer cache, the imports)."""

from __future__ import annotations

import json

import pytest

from vbstore import cli
from vbstore.cli import _answers


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_while_the_answer_cache_looks_is_one_line_and_exit_130(
        monkeypatch, tmp_path, capsys, as_json):
    monkeypatch.setattr(_answers, "answer", _interrupted)
    monkeypatch.delenv("VBSTORE_DEBUG", raising=False)
    args = ["--store", str(tmp_path), "get", "result", "-b", "test_vit", "-t", "knn", "-d", "x"]
    with pytest.raises(SystemExit) as exited:
        cli.main(args + ["--json"] * as_json)
    assert exited.value.code == 130
    out, err = capsys.readouterr()
    if as_json:
        assert json.loads(out) == {"error": "interrupted; the store is unchanged by the "
                                   "unfinished step", "exit_code": 130, "hint": "",
                                   "type": "KeyboardInterrupt"}
    else:
        assert err == "error: interrupted; the store is unchanged by the unfinished step\n"
