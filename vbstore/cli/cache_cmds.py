"""``vbstore cache stats|clear``: VisBench's feature-cache commands over the store's feature
packs (vbstore.features._cache)."""

from __future__ import annotations

import sys

import click

from ._common import emit, human_size, json_option, with_store

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module.


@click.group(name="cache")
def cache_group() -> None:
    """VisBench's feature cache: the store's feature packs (stats, clear)."""


@cache_group.command("stats")
@click.option("--backbone", default=None,
              help="Only this backbone's: an architecture, source:architecture or an id.")
@json_option
@with_store
def cache_stats(store, backbone, as_json) -> None:
    """Count the stored feature packs and their size."""
    from ..features import feature_cache

    found = feature_cache(store, backbone)
    emit(as_json, found, f"root:    {store.root}\nentries: {found['packs']} feature packs\n"
                         f"size:    {human_size(found['bytes'])}")


@cache_group.command("clear")
@click.option("--backbone", default=None,
              help="Drop only this backbone's features (an architecture, source:architecture "
                   "or an id); default: every backbone's.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@with_store
def cache_clear(store, backbone, yes, as_json) -> None:
    """Evict extracted features (VisBench's `cache clear`): the next request that needs them
    extracts them again; results, heads and manifests stay. Without --yes it says what would
    go and exits 1."""
    from ..features import clear_feature_cache, feature_cache

    target = f"backbone {backbone!r}" if backbone else "every backbone"
    if not yes:
        found = feature_cache(store, backbone)
        emit(as_json, {**found, "cleared": False},
             f"This evicts {found['packs']} feature packs ({human_size(found['bytes'])}) of "
             f"{target} in {store.root}.\nRe-run with --yes to confirm.")
        sys.exit(1)
    done = clear_feature_cache(store, backbone)
    emit(as_json, {**done, "cleared": True},
         f"evicted {done['packs']} feature packs of {target}, freed {human_size(done['bytes'])}")
