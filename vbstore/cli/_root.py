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

# command -> (module:attribute, modules that register subcommands on it, its summary as `vbstore
# --help` lists it: the command's own, repeated so that listing imports no command module;
# tests/cli/test_docs.py keeps the two equal)
_COMMANDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "browse": ("browse_cmd:browse", (),
        "Browse results, heads, refs and lineage in Datasette (needs the browse extra)."),
    "cache": ("cache_cmds:cache_group", (),
        "VisBench's feature cache: the store's feature packs (stats, clear)."),
    "cat": ("store_cmds:cat", (), "Write an object's raw bytes to stdout (verified first)."),
    "demo": ("demo_cmd:demo", (),
        "Probe a backbone on data any machine has, beside random weights and a trivial "
        "predictor."),
    "diff": ("suite_cmds:diff", (),
        "Compare two evaluations on one suite: exit 5 when a score is missing (whatever "
        "dropped), else 4 when one dropped."),
    "draw": ("draw_cmd:draw", (),
        "Draw a dense RESULT: one row per eval sample — the image the backbone saw, the target,"
        " and the stored head's prediction (needs the plot extra)."),
    "du": ("store_cmds:du", (), "Disk usage of the store, per kind."),
    "evaluate": ("evaluate_cmd:evaluate", (),
        "Judge results on a suite and record the evaluation."),
    "evaluations": ("suite_cmds:evaluations", (),
        "List recorded evaluations, newest first, with their verdicts."),
    "export": ("results_cmds:export_group", ("head_cmds", "suite_cmds"),
        "Export stored results as tables and heads as files."),
    "forget": ("store_cmds:forget", (),
        "Remove results (ids or prefixes) from the store, so they stop being gc roots."),
    "fsck": ("store_cmds:fsck", (),
        "Re-hash every blob and check the registry; exit 1 on any fault."),
    "gc": ("store_cmds:gc", (),
        "Remove what no ref, result or suite needs; optionally shrink to a size."),
    "get": ("get_cmds:get", (), "Get an artifact, computing only what the store lacks."),
    "import": ("head_cmds:import_group", ("suite_cmds", "openclip_cmds"),
        "Bring artifacts into the store: heads from `vbstore export head`, other tools' "
        "results."),
    "init": ("store_cmds:init", (), "Create the store (if needed) and print where it is."),
    "leaderboard": ("suite_cmds:leaderboard", (),
        "Rank a suite's checkpoints: each by its latest ranked attempt, never its best."),
    "list": ("list_cmds:list_group", (),
        "List the registered backbones or tasks, or the stored heads."),
    "ls": ("store_cmds:ls_cmd", (),
        "List objects, optionally of one KIND (singular or plural: result, results...)."),
    "plot": ("plot_cmd:plot_group", (),
        "Draw stored results as bar charts (PNG or SVG; needs the plot extra)."),
    "promote": ("suite_cmds:promote", (),
        "Vouch for an evaluation as a maintainer: a copy is recorded as attested evidence."),
    "pull": ("remote_cmds:pull", ("head_cmds", "board_cmds"),
        "Download a named artifact and everything it was made from, verified, from a remote."),
    "push": ("remote_cmds:push", ("head_cmds", "board_cmds"),
        "Upload a named artifact, everything it was made from, and its ref, to a remote."),
    "put": ("store_cmds:put", (), "Add a file (or - for stdin) to the store and print its id."),
    "remote": ("remote_cmds:remote", (),
        "Configure where artifacts are shared: a directory, s3://bucket/prefix or "
        "hf://user/repo."),
    "reproduce": ("openclip_cmds:reproduce", (),
        "Compare your evaluation with the figure published for the same checkpoint on its suite "
        "(an imported reported evaluation): exit 0 reproduced, 12 a score differs by more than "
        "--tolerance, 5 a score one side lacks."),
    "run": ("run_cmd:run_group", (),
        "Run a probe TASK with its settings as flags (`vbstore run TASK --help`)."),
    "show": ("store_cmds:show", (),
        "Show an object's registry row, content summary and direct inputs; with --task, draw "
        "REF as data."),
    "suite": ("suite_cmds:suite_group", (),
        "Suites: versioned, immutable ways of scoring (Visin's format)."),
    "sweep": ("results_cmds:sweep", (),
        "Every backbone x task combination; rerunning resumes, since finished results are "
        "cached."),
    "tag": ("store_cmds:tag", (),
        "Name an object (NAME REF), remove a name (-d NAME), or list names (no arguments)."),
    "why": ("store_cmds:why", (),
        "Trace an object to everything it was made from (its lineage tree)."),
}


# the root's flags that read the same anywhere on the line: `vbstore get result ... -q` is
# `vbstore -q get result ...` (no command has a -q of its own)
_ANYWHERE = ("-q", "--quiet")


class LazyGroup(VbstoreGroup):
    """The root group: a command's module is imported the first time it runs (or its own help
    is asked for); listing the commands imports none of them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `--` ends the options: what follows it is an argument, whatever it reads
        end = args.index("--") if "--" in args else len(args)
        moved = [a for a in args[:end] if a in _ANYWHERE]
        if moved:
            args = [*moved[:1], *(a for a in args[:end] if a not in _ANYWHERE), *args[end:]]
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its summary, from ``_COMMANDS``: nothing is imported."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, _COMMANDS[name][2]) for name in sorted(_COMMANDS)])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        target, extends, _ = _COMMANDS[cmd_name]
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

