"""A suite file is read within bounds (issue 21's PoC: a 1 KB YAML suite with nested aliases
ran past 60 s; seven levels stored a 66 MiB blob)."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from vbstore.cli import cli
from vbstore.errors import UsageError
from vbstore.suites import read_suite_file


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx"]']
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, levels + 1)]
    return "\n".join(["slug: bomb", "version: 1", "name: bomb", *lines,
                      f"protocol: {{task: knn, conditions: *a{levels}}}"]) + "\n"


def test_yaml_aliases_are_refused_before_anything_is_built(tmp_path):
    pytest.importorskip("yaml")
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb())
    assert len(path.read_bytes()) < 1200
    start = time.perf_counter()
    with pytest.raises(UsageError, match=r"bomb\.yaml uses YAML aliases \(\*name\), which "
                                         r"vbstore refuses; write each value out in full"):
        read_suite_file(path)
    assert time.perf_counter() - start < 5  # not a pass/fail timing: a bomb never returns
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "suite", "push",
                                      str(path)])
    assert result.exit_code == 2
    assert "YAML aliases" in result.output


def test_a_deeply_nested_suite_file_is_one_line(tmp_path):
    pytest.importorskip("yaml")
    for name, text in (("deep.json", "[" * 100_000), ("deep.yaml", "[" * 100_000)):
        (tmp_path / name).write_text(text)
        # libyaml's loader stops at its own nesting limit first, in one line too
        with pytest.raises(UsageError, match=f"{name} is (nested|not valid YAML.*nesting depth)"):
            read_suite_file(tmp_path / name)
