"""The ``vbstore`` command. It only parses and prints; the work happens in the library."""

from __future__ import annotations

import click

from .. import __version__
from ._common import VbstoreGroup
from .browse_cmd import browse
from .demo_cmd import demo
from .get_cmds import get
from .head_cmds import import_group, pull, push  # head forms register on push/pull/export
from .list_cmds import list_group
from .plot_cmd import plot_group
from .remote_cmds import remote
from .results_cmds import export_group, sweep
from .run_cmd import run_group
from .store_cmds import COMMANDS
from .suite_cmds import COMMANDS as SUITE_COMMANDS


@click.group(cls=VbstoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", "store", type=click.Path(file_okay=False), default=None,
              envvar="VBSTORE_HOME", show_envvar=True,
              help="Store directory (default: ~/.cache/vbstore). Created on first use.")
@click.version_option(__version__, prog_name="vbstore")
def cli(store: str | None) -> None:
    """Probe vision backbones; keep every result traceable to its exact inputs.

    Errors exit non-zero with one line naming the fix; set VBSTORE_DEBUG=1 for the traceback.
    """


for _command in [*COMMANDS, get, list_group, export_group, import_group, sweep, demo, remote, push,
                 pull, plot_group, browse, run_group, *SUITE_COMMANDS]:
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="vbstore")
