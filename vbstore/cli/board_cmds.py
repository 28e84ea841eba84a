"""Shared boards on the command line: ``push board SUITE --to REMOTE`` and ``pull board SUITE
--from REMOTE`` (the work is :mod:`vbstore.suites`' ``push_board`` and ``pull_board``)."""

from __future__ import annotations

import click

from ..errors import UsageError
from ._common import emit, human_size, json_option, with_store
from .remote_cmds import pull, push

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


@push.command("board")
@click.argument("suite", metavar="SLUG@VERSION")
@click.option("--to", "to", required=True, metavar="REMOTE", help="The remote to push to.")
@json_option
@with_store
def push_board_cmd(store, suite: str, to: str, as_json: bool) -> None:
    """Merge this store's evaluations of SUITE into the remote's board of it (no duplicates)."""
    from .._progress import reporting
    from ..suites import push_board

    with reporting(True):  # files pushed so far, on stderr (kept under --json)
        result = push_board(store, to, suite)

    def text() -> None:
        if not result.changed:
            click.echo(f"{to}'s board of {result.suite} already holds these "
                       f"{result.listed} evaluations; nothing to push")
            return
        click.echo(f"pushed board {result.suite} -> {to}: {result.added} evaluations added "
                   f"({result.listed} on the board), {result.uploaded} files uploaded "
                   f"({human_size(result.bytes)}), {result.already_there} already there"
                   + (f", revision {result.revision}" if result.revision else ""))

    emit(as_json, result.as_dict(), text)


@pull.command("board")
@click.argument("suite", metavar="SLUG@VERSION")
@click.option("--from", "source", default=None, metavar="REMOTE",
              help="The remote to pull from (or name it as REMOTE/SLUG@VERSION).")
@click.option("--revision", default=None, metavar="SHA", help="Pin a Hub commit.")
@json_option
@with_store
def pull_board_cmd(store, suite: str, source: str | None, revision: str | None,
                   as_json: bool) -> None:
    """Merge the remote's board of SUITE into this store; every evaluation is verified and
    judged again here, never trusted."""
    from .._progress import reporting
    from ..suites import pull_board

    if source is None:  # `pull board team/road-test@1`, as `pull ref` names a remote's ref
        source, sep, suite = suite.partition("/")
        if not sep:
            raise UsageError(f"which remote holds the board of {source}?",
                             hint=f"vbstore pull board {source} --from REMOTE")

    with reporting(True):  # evaluations pulled so far, on stderr (kept under --json)
        result = pull_board(store, source, suite, revision=revision)

    def text() -> None:
        click.echo(f"pulled board {result.suite} <- {source}: {result.added} evaluations added "
                   f"({result.listed} on the board, {result.already_present} already here), "
                   f"{result.downloaded} downloaded ({human_size(result.bytes)})"
                   + (", suite added" if result.suite_added else "")
                   + (f", revision {result.revision}" if result.revision else ""))
        for item in result.rejudged:
            reasons = ", ".join(item["reasons"]) or "no reasons"
            click.echo(f"warning: evaluation {item['id'][:12]} was {item['was']} there and is "
                       f"{item['now']} here ({reasons}); ranked as {item['as'][:12]}", err=True)

    emit(as_json, result.as_dict(), text)
