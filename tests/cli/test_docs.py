import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_cli_reference_is_current():
    # a fresh process, as the command that writes the page: click caches each command's help
    # option on first use, so commands invoked by earlier tests in this process could show
    # another one
    generated = subprocess.run([sys.executable, "-m", "vbstore.cli._reference"], check=True,
                               capture_output=True, text=True).stdout
    assert (DOCS / "cli.md").read_text() == generated, \
        "docs/cli.md is stale: python -m vbstore.cli._reference > docs/cli.md"


def test_every_exit_code_raised_is_documented():
    import vbstore.errors as errors
    from vbstore.cli._reference import EXIT_CODES

    documented = {code for code, _ in EXIT_CODES}
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, errors.VbstoreError):
            assert obj.exit_code in documented, name
            assert obj.__doc__, f"{name} has no docstring"
            assert obj.__doc__.strip(), f"{name} has no docstring"


def test_the_layout_flag_offers_every_layout_the_data_package_reads():
    from vbstore._fields import LAYOUTS as CLI_LAYOUTS  # the --layout choices
    from vbstore.data import LAYOUTS

    assert CLI_LAYOUTS == LAYOUTS


def test_command_summaries_are_whole_never_cut():
    from click.testing import CliRunner

    from vbstore.cli import cli

    listing = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    commands = listing.split("Commands:")[1]
    assert not [line for line in commands.splitlines() if line.rstrip().endswith("...")]
    assert "backbone saw, the target, and the stored head's prediction" in commands


def test_listing_the_commands_imports_none_and_says_what_each_says():
    import click

    from vbstore.cli._common import summary_of
    from vbstore.cli._root import _COMMANDS, cli

    # `vbstore --help` in a fresh process: no command module is imported to list them
    code = ("import sys, vbstore.cli\ntry:\n    vbstore.cli.main(['--help'])\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('vbstore')))")
    listed = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True).stdout
    assert listed.splitlines()[-1] == str(["vbstore", "vbstore.cli", "vbstore.cli._common",
                                           "vbstore.cli._root", "vbstore.errors"])
    assert "Disk usage of the store, per kind." in listed
    # the summaries it lists are the commands' own
    ctx = click.Context(cli)
    for name, (_, _, summary) in _COMMANDS.items():
        assert summary == summary_of(cli.get_command(ctx, name)), \
            f"vbstore/cli/_root.py: the summary of {name!r} differs from its command's help"
