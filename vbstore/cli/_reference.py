"""Generate docs/cli.md from the commands' own help, so the reference cannot drift.

    python -m vbstore.cli._reference > docs/cli.md
"""

from __future__ import annotations

import click

from ._root import cli

EXIT_CODES = [
    (0, "success"),
    (1, "failure found: `fsck` found faults, or an unexpected error"),
    (2, "bad usage or bad input: unknown option, invalid document, corrupt or mislaid input "
        "files, a file that links out of its dataset, an annotation outside its image, a head "
        "with NaN values, an imported result that does not say which weights made it, a results "
        "or suite file too large or malformed to read, a class count, size or input size over "
        "the memory limit (`VBSTORE_MAX_MEMORY`), a `browse --snapshot` path inside the store, "
        "a missing optional library or program (java for captioning)"),
    (3, "not ranked: `evaluate --require-ranked` recorded an evaluation its suite cannot rank "
        "(Visin's code)"),
    (4, "dropped: `diff` found a score that fell by more than --max-drop (Visin's code)"),
    (5, "missing condition: `diff` found a score one side lacks, so a skipped test set cannot "
        "hide a drop (Visin's code)"),
    (6, "network: offline, or pretrained weights / a remote cannot be reached"),
    (7, "disk: no space left, or the filesystem refused a write"),
    (8, "busy: waited too long for another process (registry lock or a derivation's lease)"),
    (9, "not found: no object, ref, remote, backbone, task or suite by that name"),
    (10, "integrity: a blob does not hash to its id (local or downloaded), an answer declares "
         "another question, a cached pretrained file or hub code does not match its pin (or "
         "holds bytecode or an extension module beside the pinned source)"),
    (11, "mismatch or conflict: a head that does not fit the backbone, a concurrent remote update, "
         "a changed protocol pushed under a published suite version, another evaluation sent "
         "under an upload's --uuid, a store whose registry a newer vbstore wrote (upgrade "
         "vbstore)"),
    (12, "not reproduced: `get result --recompute` gave other numbers than the stored result; "
         "`reproduce` found a score further from the published figure than --tolerance"),
    (130, "interrupted (Ctrl-C); the store is as it was before the unfinished step"),
]


def _commands(group: click.Group, prefix: str):
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):  # generated groups (vbstore run) list theirs
        command = group.get_command(ctx, name)
        if command is None:
            continue
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


def reference() -> str:
    lines = ["# CLI reference", "",
             "Generated from `--help` by `python -m vbstore.cli._reference`; a test fails when "
             "this page and the code disagree.", "",
             "Every command takes `--json`; errors are one line naming the fix (set "
             "`VBSTORE_DEBUG=1` for the traceback). With `--json`, an error is one JSON object on "
             'stdout instead: `{"error", "hint", "exit_code", "type"}`.', "", "## Exit codes", "",
             "| code | meaning |", "|---|---|"]
    lines += [f"| {code} | {meaning} |" for code, meaning in EXIT_CODES]
    lines.append("")
    # the root's own settings (`-h` as well as `--help`), as `vbstore` runs with them
    root_ctx = click.Context(cli, info_name="vbstore", terminal_width=80, max_content_width=80,
                             **cli.context_settings)
    lines += ["## vbstore", "", "```", cli.get_help(root_ctx), "```", ""]
    contexts = {"vbstore": root_ctx}
    for path, command in _commands(cli, "vbstore"):
        parent, _, name = path.rpartition(" ")
        # a child of its group's context, as when a user runs it: it inherits `-h, --help`,
        # and click's per-command cache of the help option then agrees with real invocations
        ctx = contexts[path] = click.Context(command, info_name=name, parent=contexts[parent],
                                             terminal_width=80, max_content_width=80)
        lines += [f"## {path}", "", "```", command.get_help(ctx), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    click.echo(reference(), nl=False)
