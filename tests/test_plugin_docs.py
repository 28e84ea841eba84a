"""docs/tasks.md's "Your own probe": the plugin file, the Python run and the command line, run as
written, in a process of their own (the plugin's task must not join this session's registry)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _section() -> str:
    text = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    start = text.index("## Your own probe")
    return text[start:text.index("\n## ", start + 1)]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _section(), flags=re.S)


@pytest.mark.slow
def test_the_docs_plugin_runs_from_python_and_the_command_line(tmp_path):
    plugin, usage = _blocks("python")
    assert plugin.startswith("# my_probe.py")
    (tmp_path / "my_probe.py").write_text(plugin, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    python = subprocess.run([sys.executable, "-c", usage], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert python.returncode == 0, python.stderr
    assert -1.0 <= float(python.stdout.strip().splitlines()[-1]) <= 1.0
    (command,) = _blocks("bash")
    args = shlex.split(command.replace("\\\n", " "))
    assert args[:3] == ["vbstore", "get", "result"]
    cli = subprocess.run([sys.executable, "-m", "vbstore", *args[1:], "--json"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr
    answer = json.loads(cli.stdout)
    assert answer["from_cache"]  # the Python run computed it: the command line reads it back
    assert answer["record"]["task"] == "feature_saliency"


def test_a_plugin_that_is_not_a_python_file_is_refused(tmp_path):
    from vbstore import load_plugin
    from vbstore.errors import UsageError

    with pytest.raises(UsageError, match="not a Python file"):
        load_plugin(tmp_path / "missing.py")
