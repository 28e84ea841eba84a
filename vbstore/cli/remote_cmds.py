"""Commands that share artifacts: ``remote add|list|remove|refs``, ``push``, ``pull``.

``push`` and ``pull`` are groups keyed by the kind of thing moved, with ``ref`` (any named
object and its closure) the default, so ``vbstore push NAME --to REMOTE`` and ``vbstore push ref
NAME --to REMOTE`` are the same command and a kind-specific form (``push head``) can be added
beside it with ``@push.command("head")``.
"""

from __future__ import annotations

import difflib
from typing import Any

import click

from ._common import emit, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


class KindGroup(click.Group):
    """A group whose first word is a kind; when it is not one, ``default_kind`` is implied."""

    def __init__(self, *args: Any, default_kind: str = "ref", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default_kind = default_kind

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            if (len(args) > 1 and not args[1].startswith("-")
                    and difflib.get_close_matches(args[0], self.commands)):
                # two words, the first like a kind: a misspelt kind (`pull hed team/x`)
                raise click.exceptions.NoSuchCommand(args[0], possibilities=self.commands,
                                                     ctx=ctx)
            args = [self.default_kind, *args]
        return super().parse_args(ctx, args)


def _options(values: tuple[str, ...]) -> dict[str, str]:
    options = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--option")
        options[key.strip()] = value.strip()
    return options


@click.group()
def remote() -> None:
    """Configure where artifacts are shared: a directory, s3://bucket/prefix or hf://user/repo.

    Credentials are never stored: they come from the environment (HF_TOKEN, HF_ENDPOINT,
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY...) when a remote is used.
    """


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--option", "-o", "option", multiple=True, metavar="KEY=VALUE",
              help="A setting: endpoint_url, region (S3); repo_type, branch, private (Hub).")
@click.option("--replace", is_flag=True, help="Overwrite an existing remote of this name.")
@click.option("--cache/--no-cache", "cache", default=None,
              help="Ask it as a binary cache and record derivations from it (default: yes, "
                   "except for a Hub remote); --no-cache: pull only.")
@json_option
@with_store
def remote_add(store, name: str, url: str, option: tuple[str, ...], replace: bool,
               cache: bool | None, as_json: bool) -> None:
    """Add remote NAME at URL (a directory path, file://, s3:// or hf://)."""
    from ..remotes import add_remote

    config = add_remote(store, name, url, _options(option), replace=replace, cache=cache)
    emit(as_json, config.as_dict(),
         f"remote {config.name} -> {config.url}" + ("" if config.cache else " (pull only)"))


@remote.command("list")
@json_option
@with_store
def remote_list(store, as_json: bool) -> None:
    """List the configured remotes."""
    from ..remotes import list_remotes

    rows = [c.as_dict() for c in list_remotes(store)]

    def text() -> None:
        for row in rows:
            opts = " ".join(f"{k}={v}" for k, v in sorted(row["options"].items()))
            click.echo(f"{row['name']}  {row['url']}" + (f"  {opts}" if opts else "")
                       + ("" if row["cache"] else "  (pull only)"))

    emit(as_json, rows, text)


@remote.command("remove")
@click.argument("name")
@json_option
@with_store
def remote_remove(store, name: str, as_json: bool) -> None:
    """Forget remote NAME (nothing on the remote is deleted)."""
    from ..remotes import remove_remote

    remove_remote(store, name)
    emit(as_json, {"removed": name}, f"removed remote {name}")


@remote.command("refs")
@click.argument("name")
@click.option("--revision", default=None, help="List the refs at this Hub commit.")
@json_option
@with_store
def remote_refs(store, name: str, revision: str | None, as_json: bool) -> None:
    """List the refs held by remote NAME."""
    from ..remotes import list_remote_refs

    names = list_remote_refs(store, name, revision)

    def text() -> None:
        for n in names:
            click.echo(n)

    emit(as_json, names, text)


@click.group(cls=KindGroup)
def push() -> None:
    """Upload a named artifact, everything it was made from, and its ref, to a remote.

    `vbstore push NAME --to REMOTE` is short for `vbstore push ref NAME --to REMOTE`.
    """


@push.command("ref")
@click.argument("ref")
@click.option("--to", "to", required=True, metavar="REMOTE", help="The remote to push to.")
@click.option("--as", "as_name", default=None, metavar="NAME",
              help="The ref name on the remote (required when REF is an id).")
@json_option
@with_store
def push_ref_cmd(store, ref: str, to: str, as_name: str | None, as_json: bool) -> None:
    """Push REF (a ref name, or an id with --as) and its closure to a remote."""
    from .._progress import reporting
    from ..remotes import push as do_push

    # files pushed so far (a directory remote), on stderr (kept under --json)
    with reporting(True):
        result = do_push(store, to, ref, name=as_name)

    def text() -> None:
        if not result.changed:
            click.echo(f"{to}/{result.ref} is already {result.id[:12]}; nothing to push")
            return
        click.echo(f"pushed {result.kind} {result.id[:12]} -> {to}/{result.ref}: "
                   f"{len(result.uploaded)} uploaded, {result.already_there} already there, "
                   f"{result.derivations} derivations"
                   + (f", revision {result.revision}" if result.revision else ""))
        if result.skipped:
            click.echo(f"warning: {len(result.skipped)} inputs are not present locally and were "
                       "not pushed (evicted?)", err=True)

    emit(as_json, result.as_dict(), text)


@click.group(cls=KindGroup)
def pull() -> None:
    """Download a named artifact and everything it was made from, verified, from a remote.

    `vbstore pull REMOTE/NAME` is short for `vbstore pull ref REMOTE/NAME`.
    """


@pull.command("ref")
@click.argument("target", metavar="REMOTE/NAME")
@click.option("--revision", default=None, metavar="SHA",
              help="Pin a Hub commit (branch, tag or sha); recorded with the pulled ref.")
@click.option("--as", "as_name", default=None, metavar="NAME",
              help="Local ref name (default: NAME).")
@click.option("--force", is_flag=True, help="Move an existing local ref that points elsewhere.")
@click.option("--with-lineage", "lineage", is_flag=True,
              help="Also record the cache answers of everything under it (features, heads), "
                   "each checked first; by default only the ref's own.")
@json_option
@with_store
def pull_ref_cmd(store, target: str, revision: str | None, as_name: str | None, force: bool,
                 lineage: bool, as_json: bool) -> None:
    """Pull REMOTE/NAME: every blob is re-hashed before it enters the store."""
    from .._progress import reporting
    from ..remotes import pull as do_pull

    with reporting(True):  # blobs pulled so far, on stderr (kept under --json)
        result = do_pull(store, target, revision=revision, as_name=as_name, force=force,
                         lineage=lineage)
    oid = result.id
    assert oid is not None  # a pulled ref always names an object

    def text() -> None:
        click.echo(f"pulled {target} -> {result.local_ref} ({result.kind} {oid[:12]}): "
                   f"{len(result.downloaded)} downloaded, "
                   f"{result.already_present} already present, "
                   f"{result.derivations} derivations"
                   + (f", revision {result.revision}" if result.revision else ""))
        if result.missing:
            click.echo(f"warning: {len(result.missing)} inputs are on neither side "
                       "(their lineage edges were left out)", err=True)

    emit(as_json, result.as_dict(), text)


COMMANDS = [remote, push, pull]
