"""What ships beside the package: licence, citation, changelog, and examples that run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# tomllib is 3.11+ and the package supports 3.10: read the two top-level fields directly
PROJECT = dict(re.findall(r'^(version|license) = "([^"]+)"$',
                          (ROOT / "pyproject.toml").read_text(), flags=re.M))


def test_the_license_file_is_the_one_pyproject_declares():
    assert PROJECT["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_citation_is_valid_cff_for_this_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # CFF 1.2.0's required keys
        assert cff[key], key
    assert str(cff["version"]) == PROJECT["version"]
    assert cff["license"] == PROJECT["license"]


def test_changelog_names_this_version():
    assert f"## [{PROJECT['version']}]" in (ROOT / "CHANGELOG.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_examples_run(script, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "VBSTORE_HOME": str(tmp_path / "store"), "PYTHONPATH": str(ROOT),
           "TMPDIR": str(scratch)}
    out = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
    assert [p.name for p in scratch.iterdir()] == []  # it leaves no temporary folder behind
    if script.name == "same_images_two_ways.py":
        assert "same images: True" in out.stdout
        assert "shards  extracted  0  reused 15" in out.stdout
