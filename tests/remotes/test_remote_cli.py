"""The ``remote``, ``push`` and ``pull`` commands through click's CliRunner, with exit codes."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from remotes_support import build_lineage

from vbstore.cli._common import VbstoreGroup
from vbstore.cli.remote_cmds import COMMANDS
from vbstore.cli.store_cmds import COMMANDS as STORE_COMMANDS


@click.group(cls=VbstoreGroup)
@click.option("--store", "store", default=None)
def cli(store):
    """The vbstore CLI as the lead will wire it: store commands plus remote commands."""


for _command in [*STORE_COMMANDS, *COMMANDS]:
    cli.add_command(_command)


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()

    def invoke(store: str, *args: str):
        return runner.invoke(cli, ["--store", str(tmp_path / store), *args])

    return invoke


def test_every_remote_command_has_help_and_json():
    def walk(group):
        for name, command in group.commands.items():
            assert (command.help or "").strip(), name
            if isinstance(command, click.Group):
                walk(command)
            else:
                assert any("--json" in p.opts for p in command.params), name

    for command in COMMANDS:
        assert command.help
        walk(command)


def test_remote_add_list_remove(run, tmp_path):
    added = run("a", "remote", "add", "team", "s3://bucket/pre", "-o",
                "endpoint_url=http://127.0.0.1:9", "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.output)["options"] == {"endpoint_url": "http://127.0.0.1:9"}
    assert run("a", "remote", "add", "local", str(tmp_path / "r")).exit_code == 0
    listed = json.loads(run("a", "remote", "list", "--json").output)
    assert [r["name"] for r in listed] == ["local", "team"]
    assert run("a", "remote", "add", "team", "s3://other").exit_code == 2  # exists
    refused = run("a", "remote", "add", "x", "s3://bkt/p", "-o", "aws_secret_access_key=abc")
    assert refused.exit_code == 2
    assert "credential" in refused.output
    assert run("a", "remote", "add", "y", "s3://user:pw@bucket/p").exit_code == 2
    assert run("a", "remote", "remove", "team", "--json").exit_code == 0
    gone = run("a", "remote", "remove", "team")
    assert gone.exit_code == 9
    assert "no remote named 'team'" in gone.output


def test_push_and_pull_with_the_short_and_long_forms(run, tmp_path):
    from vbstore import Store

    with Store(tmp_path / "a") as a:
        ids = build_lineage(a)
    remote = str(tmp_path / "remote")
    assert run("a", "remote", "add", "d", remote).exit_code == 0
    assert run("b", "remote", "add", "d", remote).exit_code == 0
    pushed = run("a", "push", "exp/result", "--to", "d", "--json")
    assert pushed.exit_code == 0, pushed.output
    assert json.loads(pushed.output)["id"] == ids["result"]
    assert "nothing to push" in run("a", "push", "ref", "exp/result", "--to", "d").output
    assert run("a", "push", "--to", "d", "exp/result").exit_code == 0  # options first
    assert json.loads(run("b", "remote", "refs", "d", "--json").output) == ["exp/result"]
    pulled = run("b", "pull", "d/exp/result")
    assert pulled.exit_code == 0, pulled.output
    assert "6 downloaded" in pulled.output
    again = json.loads(run("b", "pull", "ref", "d/exp/result", "--as", "copy", "--json").output)
    assert again["local_ref"] == "copy"
    assert again["downloaded"] == []
    assert json.loads(run("b", "tag", "--json").output)["copy"] == ids["result"]
    misspelt = run("b", "pull", "rf", "d/exp/result")  # a misspelt kind, not a ref named rf
    assert misspelt.exit_code == 2
    assert "Did you mean 'ref'?" in misspelt.output


def test_errors_exit_with_their_documented_codes(run, tmp_path):
    from vbstore import Store

    with Store(tmp_path / "a") as a:
        ids = build_lineage(a)
    remote = tmp_path / "remote"
    run("a", "remote", "add", "d", str(remote))
    run("b", "remote", "add", "d", str(remote))
    assert run("b", "pull", "nowhere/x").exit_code == 9
    assert run("b", "pull", "d/../x").exit_code == 2
    assert run("b", "pull", "d/missing").exit_code == 9
    assert run("a", "push", ids["head"], "--to", "d").exit_code == 2  # an id needs --as
    run("a", "push", "exp/result", "--to", "d")
    blob = remote / "objects" / ids["head"][:2] / ids["head"][2:]
    blob.write_bytes(blob.read_bytes()[:-1] + b"\x00\x01")
    tampered = run("b", "pull", "d/exp/result")
    assert tampered.exit_code == 10
    assert "refused" in tampered.output
    assert "Traceback" not in tampered.output
