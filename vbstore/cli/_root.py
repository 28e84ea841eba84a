"""The root command group. It only parses and prints; the work happens in the library.

Command modules are imported when their command runs, not at start, so ``vbstore get result``
pays for the engine and nothing else (a cached answer is mostly interpreter start and a
``stat`` per data file). ``_COMMANDS`` names where each top-level command lives and which other
modules add subcommands to it (``push head`` lives beside the head commands).
"""

from __future__ import annotations

import importlib
import os

import click

from .. import __version__
from ._common import VbstoreGroup

# command -> (module:attribute, modules that register subcommands on it)
_COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "browse": ("browse_cmd:browse", ()),
    "cat": ("store_cmds:cat", ()),
    "demo": ("demo_cmd:demo", ()),
    "diff": ("suite_cmds:diff", ()),
    "draw": ("draw_cmd:draw", ()),
    "du": ("store_cmds:du", ()),
    "evaluate": ("evaluate_cmd:evaluate", ()),
    "evaluations": ("suite_cmds:evaluations", ()),
    "export": ("results_cmds:export_group", ("head_cmds", "suite_cmds")),
    "fsck": ("store_cmds:fsck", ()),
    "gc": ("store_cmds:gc", ()),
    "get": ("get_cmds:get", ()),
    "import": ("head_cmds:import_group", ("suite_cmds",)),
    "init": ("store_cmds:init", ()),
    "leaderboard": ("suite_cmds:leaderboard", ()),
    "list": ("list_cmds:list_group", ()),
    "ls": ("store_cmds:ls_cmd", ()),
    "plot": ("plot_cmd:plot_group", ()),
    "promote": ("suite_cmds:promote", ()),
    "pull": ("remote_cmds:pull", ("head_cmds", "board_cmds")),
    "push": ("remote_cmds:push", ("head_cmds", "board_cmds")),
    "put": ("store_cmds:put", ()),
    "remote": ("remote_cmds:remote", ()),
    "run": ("run_cmd:run_group", ()),
    "show": ("store_cmds:show", ()),
    "suite": ("suite_cmds:suite_group", ()),
    "sweep": ("results_cmds:sweep", ()),
    "tag": ("store_cmds:tag", ()),
    "why": ("store_cmds:why", ()),
}


# the root's flags that read the same anywhere on the line: `vbstore get result ... -q` is
# `vbstore -q get result ...` (no command has a -q of its own)
_ANYWHERE = ("-q", "--quiet")


class LazyGroup(VbstoreGroup):
    """The root group: a command's module is imported the first time it is asked for."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `--` ends the options: what follows it is an argument, whatever it reads
        end = args.index("--") if "--" in args else len(args)
        moved = [a for a in args[:end] if a in _ANYWHERE]
        if moved:
            args = [*moved[:1], *(a for a in args[:end] if a not in _ANYWHERE), *args[end:]]
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        target, extends = _COMMANDS[cmd_name]
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(f".{module}", __package__), attribute)
        for extension in extends:
            importlib.import_module(f".{extension}", __package__)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", "store", type=click.Path(file_okay=False), default=None,
              envvar="VBSTORE_HOME", show_envvar=True,
              help="Store directory (default: ~/.cache/vbstore). Created on first use.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress on stderr (same as VBSTORE_PROGRESS=0).")
@click.version_option(__version__, prog_name="vbstore")
def cli(store: str | None, quiet: bool) -> None:
    """Probe vision backbones; keep every result traceable to its exact inputs.

    Errors exit non-zero with one line naming the fix; set VBSTORE_DEBUG=1 for the traceback.
    Long steps show their progress on stderr: a bar on a terminal, plain lines every
    VBSTORE_PROGRESS_INTERVAL seconds (10) otherwise.
    """
    if quiet:  # for this command only: the variable is put back when it ends
        before = os.environ.get("VBSTORE_PROGRESS")
        os.environ["VBSTORE_PROGRESS"] = "0"

        def restore() -> None:
            if before is None:
                os.environ.pop("VBSTORE_PROGRESS", None)
            else:
                os.environ["VBSTORE_PROGRESS"] = before

        click.get_current_context().call_on_close(restore)

