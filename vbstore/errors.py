"""The vbstore error hierarchy.

Every error a user can cause is a :class:`VbstoreError`. Each subclass also derives from the
builtin it refines, so ``except KeyError`` still catches an unknown object. ``exit_code`` is what
the CLI exits with; ``hint`` is the next step the user should take.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

# A message refers to a request field (vbstore._fields' table) by name, never by a spelling:
# REF_OPEN, the name (and =VALUE), REF_CLOSE. The error spells each reference as a flag when it
# is made (the CLI prints that); the Python API spells them again as keywords (spell_fields).
REF_OPEN, REF_CLOSE = "\x1e", "\x1f"
_REF = re.compile(f"{REF_OPEN}([^{REF_CLOSE}]*){REF_CLOSE}")


def field_ref(name: str, value: Any = None) -> str:
    """A message's reference to request field ``name`` (or ``param:KEY``, a task parameter),
    with the ``value`` to show beside it: ``f"{field_ref('seed')} must be >= 0"``."""
    return f"{REF_OPEN}{name}{'' if value is None else f'={value}'}{REF_CLOSE}"


def spell(text: str, speller: Callable[[str, str | None], str]) -> str:
    """``text`` with each :func:`field_ref` in it spelled by ``speller`` (``name, value`` ->
    words: ``vbstore._fields.spell_flag`` or ``spell_keyword``)."""
    def one(match: re.Match[str]) -> str:
        name, eq, value = match.group(1).partition("=")
        return speller(name, value if eq else None)

    return _REF.sub(one, text)


def fields_named(text: str) -> tuple[str, ...]:
    """The fields ``text`` refers to, in order."""
    return tuple(dict.fromkeys(m.group(1).partition("=")[0] for m in _REF.finditer(text)))


class VbstoreError(Exception):
    """Base class of every error vbstore raises on purpose."""

    exit_code = 1
    hint = ""
    field: str | None = None  # the request field it is about (vbstore._fields), if any
    # with references to fields: the message and hint as raised, and as last spelled
    _said: tuple[str, str | None] | None = None
    _spelled: tuple[str, str | None] = ("", None)

    def __init__(self, message: str, *, hint: str | None = None,
                 field: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint
        if field is not None:
            self.field = field
        if REF_OPEN in message or REF_OPEN in (hint or ""):  # names fields: as flags
            # the table (a flag's spelling) loads only for an error that names a field
            from ._fields import spell_flag

            self._said, self._spelled = (message, hint), (message, hint)
            self.field = self.field or next(iter(fields_named(message + (hint or ""))), None)
            self.spell_fields(spell_flag)

    def refer_hint(self, old: str, new: str) -> None:
        """Refer to field reference ``new`` where the hint refers to ``old`` (``--train-split``
        for ``--split`` when the split was of the training data)."""
        if self._said is None or self._said[1] is None or old not in self._said[1]:
            return
        from ._fields import spell_flag  # the table: as above

        if self.hint != self._spelled[1]:  # replaced since: nothing of it to refer again
            return
        self._said = (self._said[0], self._said[1].replace(old, new))
        self.hint = spell(self._said[1], spell_flag)
        self._spelled = (self._spelled[0], self.hint)

    def spell_fields(self, speller: Callable[[str, str | None], str]) -> None:
        """Name the request fields this error refers to as ``speller`` says (the CLI: flags,
        the default; the Python API: keyword arguments; see ``vbstore._fields``). A message or
        hint that code above replaced since (``exc.hint = ...``) is kept as it is."""
        if self._said is None:
            return
        message, hint = self._said
        if self.args and self.args[0] == self._spelled[0]:
            self.args = (spell(message, speller), *self.args[1:])
        if hint is not None and self.hint == self._spelled[1]:
            self.hint = spell(hint, speller)
        self._spelled = (self.args[0] if self.args else "", self.hint)

    def __str__(self) -> str:
        message = self.args[0] if self.args else ""
        return f"{message}; {self.hint}" if self.hint else str(message)


class ObjectNotFound(VbstoreError, KeyError):
    """An object id, prefix or name matches nothing in the store."""

    exit_code = 9

    def __init__(self, oid: str, *, hint: str | None = None) -> None:
        super().__init__(f"no object matches {oid!r}", hint=hint or "list objects with: vbstore ls")
        self.oid = oid


class BlobMissing(ObjectNotFound):
    """An object the registry lists has no blob in ``objects/`` (removed or lost)."""

    def __init__(self, oid: str, kind: str, evicted: bool) -> None:
        VbstoreError.__init__(
            self, f"{kind} {oid[:12]} is in the registry but its blob is missing from objects/",
            hint="it was evicted (`gc --max-size`): the next `get` recomputes it" if evicted else
                 "`vbstore fsck` lists every missing blob; `vbstore fsck --repair` re-fetches it "
                 "from a remote, or forgets it so the next `get` recomputes it")
        self.oid = oid
        self.kind = kind


class AmbiguousPrefix(VbstoreError, KeyError):
    """A hex prefix matches more than one object."""

    exit_code = 2

    def __init__(self, prefix: str, matches: list[str]) -> None:
        shown = ", ".join(m[:16] for m in matches[:5])
        super().__init__(
            f"prefix {prefix!r} matches {len(matches)} objects ({shown})",
            hint="give more hex digits",
        )
        self.prefix = prefix
        self.matches = matches


class CorruptObject(VbstoreError, ValueError):
    """A blob's bytes no longer hash to its id."""

    exit_code = 10

    def __init__(self, oid: str, path: str, actual: str | None = None) -> None:
        super().__init__(
            f"object {oid[:12]} is corrupt: {path} does not hash to its id",
            hint="run `vbstore fsck --repair`: it moves the blob aside (re-fetched from a remote "
                 "when one has it) and the next `get` recomputes everything built on it",
        )
        self.oid = oid
        self.path = path
        self.actual = actual


class MisfiledAnswer(CorruptObject):
    """A stored or served answer declares another question than the one it is filed under."""

    exit_code = 10

    def __init__(self, oid: str, source: str, differences: list[str], *,
                 hint: str | None = None) -> None:
        shown = "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else "")
        VbstoreError.__init__(
            self, f"{oid[:12]} from {source} answers another question: {shown}",
            hint=hint or "run `vbstore fsck --repair`: it forgets derivation records whose output "
                         "declares another question, so the next `get` computes the answer",
        )
        self.oid = oid
        self.path = source
        self.actual = None
        self.source = source
        self.differences = list(differences)


class NonCanonical(VbstoreError, ValueError):
    """A value cannot be written as canonical JSON (NaN, Infinity, a non-string key...)."""

    exit_code = 2

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"{message} at {field or '<root>'}",
                         hint="replace it with a finite value or null")
        self.field = field


class SchemaError(VbstoreError, ValueError):
    """A JSON document does not match the schema of its kind."""

    exit_code = 2

    def __init__(self, kind: str, field: str, message: str) -> None:
        super().__init__(
            f"invalid {kind} document at {field or '<root>'}: {message}",
            hint=f"see schemas/{kind}.schema.json",
        )
        self.kind = kind
        self.field = field


class UnknownKind(VbstoreError, ValueError):
    """An artifact kind vbstore does not know."""

    exit_code = 2


class StoreIOError(VbstoreError, OSError):
    """The filesystem refused a write (disk full, read-only, permissions)."""

    exit_code = 7


class DiskFull(StoreIOError):
    """No space left while writing into the store; nothing partial was kept."""

    hint = ("free space and retry: `vbstore gc` works on a full disk and removes what nothing "
            "needs (`--grace 0` includes the last hour's leftovers of failed runs; "
            "`--max-size SIZE` also evicts recomputable features)")


class StoreReadOnly(StoreIOError):
    """The store is read-only (a read-only mount, no write permission): reads work, writes fail."""

    def __init__(self, root: str, doing: str) -> None:
        super().__init__(
            f"the store {root} is read-only: cannot {doing}",
            hint="reads (ls, show, why, a cached get) work; for anything that writes, point "
                 "--store or VBSTORE_HOME at a writable store",
        )
        self.root = root
        self.doing = doing


class NewerRegistry(StoreIOError):
    """The store's registry was written by a newer vbstore, whose layout this one would misread."""

    exit_code = 11

    def __init__(self, path: str, version: int, known: int) -> None:
        super().__init__(
            f"{path} was made by a newer vbstore (registry version {version}; this vbstore "
            f"knows up to {known})",
            hint="upgrade vbstore to the version that wrote this store; the store is intact and "
                 "nothing was changed (`fsck --rebuild` is refused: it would drop every ref)")
        self.path, self.version, self.known = path, version, known


class LeaseTimeout(VbstoreError, TimeoutError):
    """Waited too long for another process computing the same derivation."""

    exit_code = 8


class StoreLocked(VbstoreError, RuntimeError):
    """The registry stayed locked by another process past the busy timeout."""

    exit_code = 8


class UsageError(VbstoreError, ValueError):
    """An argument combination that cannot work, with the flag to fix."""

    exit_code = 2


class BadInput(VbstoreError, ValueError):
    """Input files that cannot be used (corrupt, unreadable, mislaid); lists the first few."""

    exit_code = 2

    def __init__(self, what: str, problems: list[tuple[str, str]], *,
                 hint: str | None = None) -> None:
        shown = "; ".join(f"{path}: {why}" for path, why in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"{len(problems)} {what}: {shown}{more}",
                         hint=hint or "fix or remove them and run again; nothing was written")
        self.problems = problems


class UnidentifiedWeights(VbstoreError, ValueError):
    """A result file's row does not say which weights made its numbers; vbstore will not guess."""

    exit_code = 2

    def __init__(self, where: str, why: str, *, hint: str | None = None) -> None:
        super().__init__(
            f"{where}: cannot tell which weights made these numbers ({why})",
            hint=hint or "nothing was imported; export it again with `vbstore export results "
            "--format clip-benchmark`, which writes the weights' identity in a `vbstore` field",
        )
        self.where, self.why = where, why


class NotReproduced(VbstoreError, RuntimeError):
    """Recomputing a stored result gave other numbers (the new result is kept beside it)."""

    exit_code = 12

    def __init__(self, previous: str, new: str, max_abs_diff: float) -> None:
        super().__init__(
            f"recomputing did not reproduce result {previous[:12]}: metrics moved by up to "
            f"{max_abs_diff:.3g} (new result {new[:12]})",
            hint=f"compare them with `vbstore show {previous[:12]}` and `vbstore show {new[:12]}`; "
                 "run `vbstore fsck` if the inputs may be damaged",
        )
        self.previous, self.new, self.max_abs_diff = previous, new, max_abs_diff


# -- backbones -------------------------------------------------------------------------------------

_WAYS_OUT = (
    f"pass a local checkpoint ({field_ref('weights')} PATH.pth|.safetensors), warm the cache on "
    "a connected machine (HF_HOME / TORCH_HOME), or choose a seeded random init "
    f"({field_ref('weights', 'random')})"
)


class UnknownBackbone(VbstoreError, KeyError):
    """A backbone name, source prefix, architecture or tag that nothing provides."""

    exit_code = 9

    def __init__(self, name: str, message: str | None = None, *, hint: str | None = None) -> None:
        super().__init__(
            message or f"unknown backbone {name!r}",
            hint=hint or "list them with: vbstore list backbones",
        )
        self.name = name


class InvalidSpec(VbstoreError, ValueError):
    """A backbone spec string or build argument that cannot be read."""

    exit_code = 2

    def __init__(self, spec: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"invalid backbone spec {spec!r}: {message}", hint=hint)
        self.spec = spec


class AmbiguousBackbone(VbstoreError, ValueError):
    """A custom module's output cannot be read as features without one more argument."""

    exit_code = 2

    def __init__(self, message: str, argument: str, how: str = "") -> None:
        super().__init__(
            message, hint=f"pass {argument}{f' ({how})' if how else ''} to CustomBackbone"
        )
        self.argument = argument


class WeightsUnavailable(VbstoreError, ConnectionError):
    """Pretrained weights (or upstream code) are neither cached nor downloadable now."""

    exit_code = 6

    def __init__(
        self, what: str, reason: str, *, upstream: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(f"{what}: {reason}", hint=hint or _WAYS_OUT)
        self.what = what
        self.reason = reason
        self.upstream = upstream


class DataUnavailable(VbstoreError, ConnectionError):
    """A named dataset (``hf:``...) is not cached here and cannot be fetched now."""

    exit_code = 6


class NoPretrainedWeights(WeightsUnavailable):
    """The backbone has no pretrained weights at all: a choice to make, not a network problem."""

    exit_code = 2


class TamperedWeights(VbstoreError, ValueError):
    """A cached pretrained file or hub code does not hash to what vbstore expects of it."""

    exit_code = 10

    def __init__(self, what: str, path: str, reason: str) -> None:
        super().__init__(
            f"refused {what}: {path} {reason}",
            hint=f"delete {path} so vbstore fetches it again from upstream, or pass your own "
                 f"checkpoint with {field_ref('weights', 'PATH')} (recorded as a checkpoint, not "
                 "as pretrained)",
        )
        self.path = path


class CheckpointError(VbstoreError, ValueError):
    """A checkpoint file that cannot be read or does not fit the architecture."""

    exit_code = 2

    def __init__(self, path: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"checkpoint {path}: {message}", hint=hint)
        self.path = path


class CheckpointNotFound(CheckpointError, FileNotFoundError):
    """A checkpoint path that does not exist."""

    exit_code = 9

    def __init__(self, path: str) -> None:
        super().__init__(path, "no such file", hint="check the path given to "
                                                    f"{field_ref('weights')}")


class BackboneAlreadyRegistered(VbstoreError, ValueError):
    """A second ``@register_backbone`` for a name that is already taken."""

    exit_code = 2

    def __init__(self, name: str, owner: str) -> None:
        super().__init__(
            f"backbone {name!r} is already registered by {owner}",
            hint="rename the function (the registered name is the function's name)",
        )
        self.name = name


class MissingExtra(VbstoreError, ImportError):
    """A backbone source whose optional dependency is not installed."""

    exit_code = 2

    def __init__(self, source: str, extra: str) -> None:
        super().__init__(
            f"backbone source {source!r} needs the optional extra {extra!r}",
            hint=f"install it with: pip install 'vbstore[{extra}]'",
        )
        self.extra = extra


# -- tasks -----------------------------------------------------------------------------------------

class UnknownTask(VbstoreError, KeyError):
    """A task name that no registered task has."""

    exit_code = 9

    def __init__(self, name: str, close: list[str]) -> None:
        hint = f"did you mean {close[0]!r}?" if close else "list them with: vbstore list tasks"
        super().__init__(f"no task is registered as {name!r}", hint=hint)
        self.name = name


class TaskInputError(VbstoreError, ValueError):
    """Features, targets, a head or a context that do not fit the task (shape, dtype, values)."""

    exit_code = 2


class UndefinedMetric(VbstoreError, ArithmeticError):
    """A metric would be NaN or infinite; the message names why."""

    exit_code = 2

    def __init__(self, task: str, metric: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"task {task!r}: {metric} is undefined: {reason}", hint=hint)
        self.task = task
        self.metric = metric


class TrainingDiverged(VbstoreError, ArithmeticError):
    """A probe head's weights or loss became NaN or infinite during training."""

    exit_code = 2


# -- remotes ---------------------------------------------------------------------------------------

# Environment variables whose values must never appear in a message, record or card.
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
              "AWS_ACCESS_KEY_ID")


def redact(text: str) -> str:
    """``text`` with the value of every secret environment variable replaced by ``***``."""
    for name in SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text


class RemoteError(VbstoreError, OSError):
    """A remote answered with an error, or could not be read or written."""

    exit_code = 6

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(redact(message), hint=hint)


class RemoteOffline(RemoteError, ConnectionError):
    """The remote cannot be reached now (offline mode or no network); nothing was changed."""

    exit_code = 6

    def __init__(self, remote: str, reason: str) -> None:
        # the way out the reason calls for: an offline variable is named only when it is set
        declared = [v for v in ("VBSTORE_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
                    if v in reason]
        way = (f"unset {declared[0]}" if declared
               else "check the network and the remote's URL (and endpoint)")
        super().__init__(
            f"remote {remote!r} is unreachable: {reason}",
            hint=f"{way} and retry; the local store is unchanged",
        )
        self.remote = remote


class RemoteConflict(RemoteError):
    """Someone else changed the remote (or a local ref) while this operation ran."""

    exit_code = 11


class RemoteNotFound(RemoteError, KeyError):
    """A ref, object or derivation that the remote does not hold."""

    exit_code = 9

    def __str__(self) -> str:  # KeyError would quote the message
        return RemoteError.__str__(self)


class UnknownRemote(VbstoreError, KeyError):
    """A remote name that is not configured for this store."""

    exit_code = 9

    def __init__(self, name: str, known: list[str]) -> None:
        shown = ", ".join(known) if known else "none configured"
        super().__init__(f"no remote named {name!r} ({shown})",
                         hint="add one with: vbstore remote add NAME URL")
        self.name = name

    def __str__(self) -> str:
        return VbstoreError.__str__(self)


class TamperedBlob(CorruptObject):
    """Downloaded bytes are not what the remote said they are; nothing of them was kept."""

    exit_code = 10

    def __init__(self, remote: str, oid: str, reason: str, *, what: str | None = None) -> None:
        VbstoreError.__init__(
            self, f"refused {what or oid[:12]} from remote {remote!r}: {redact(reason)}",
            hint="the remote is damaged or tampered with; "
                 "the local store kept nothing of this transfer",
        )
        self.remote = remote
        self.oid = oid
        self.path = f"{remote}:{oid}"
        self.actual = None


class UnsafeRemotePath(VbstoreError, ValueError):
    """A ref name, id or path that would leave the remote's layout (``..``, absolute, odd chars)."""

    exit_code = 2

    def __init__(self, what: str, value: str, *, hint: str | None = None) -> None:
        shown = value if len(value) <= 80 else value[:77] + "..."
        super().__init__(
            f"unsafe {what} {shown!r}",
            hint=hint or "names use letters, digits and . _ / @ + - (no '..', no leading '/'); "
                         "ids are 64 hex digits",
        )
        self.value = value


class BadRemoteTarget(UnsafeRemotePath):
    """A pull target that is not ``REMOTE/NAME`` (no remote, or no ref after it)."""

    def __init__(self, target: str) -> None:
        remote, sep, _ = target.partition("/")
        example = f"{remote}/NAME" if sep else f"team/{remote or 'NAME'}"
        VbstoreError.__init__(
            self, f"{target!r} is not REMOTE/NAME",
            hint=f"name the remote and the ref (e.g. {example}); list remotes with: "
                 "vbstore remote list",
        )
        self.value = target


# -- engine and heads ------------------------------------------------------------------------


class BackboneDrift(VbstoreError, RuntimeError):
    """A spec now builds a different backbone than the one the store recorded for it."""

    exit_code = 11


class HeadMismatch(VbstoreError, ValueError):
    """A head was trained for other features than the ones it is applied to."""

    exit_code = 11

    def __init__(self, differences: list[str], flags: str | None = None) -> None:
        other_task = any(d.startswith("task is ") for d in differences)
        strict = (f"{field_ref('strict')} to apply it anyway (its results are then comparable "
                  "with nothing)")
        super().__init__(
            "head does not fit: " + "; ".join(differences),
            hint="use a head trained by this task (list them with: vbstore ls heads)" if other_task
            # the same backbone, read with other settings: the flags that read what it read
            else f"pass {flags} to read the features it was trained on, or {strict}" if flags
            else f"use a head trained for this backbone, or {strict}",
        )
        self.differences = differences


class LeftOutWarning(UserWarning):
    """Some of the results asked for were left out of an export that cannot carry them."""


class HeadMismatchWarning(UserWarning):
    """A mismatched head was applied because strict checking was turned off."""


class NotAHead(VbstoreError, ValueError):
    """An object used as a head is not one (no vbstore head metadata)."""

    exit_code = 2

    def __init__(self, oid: str) -> None:
        super().__init__(f"object {oid[:12]} is not a vbstore head",
                         hint="heads are written by `vbstore get head` or vbstore.heads.save_head")
        self.oid = oid


# -- suites ----------------------------------------------------------------------------------------

# Visin's CI exit codes, which vbstore's other codes were renumbered around (docs/cli.md).
EXIT_NOT_RANKED = 3  # `evaluate --require-ranked`: recorded, but its suite cannot rank it
EXIT_DROPPED = 4  # `diff`: a score fell by more than --max-drop
EXIT_MISSING_CONDITION = 5  # `diff`: a score one side lacks
EXIT_NOT_REPRODUCED = 12  # `reproduce`: a score further from the published figure


class SuiteNotFound(VbstoreError, KeyError):
    """No suite is stored under that slug (or slug@version)."""

    exit_code = 9

    def __init__(self, ref: str, *, hint: str | None = None) -> None:
        super().__init__(f"no suite {ref!r}", hint=hint or "list suites with: vbstore suite list")
        self.ref = ref


class NoPublishedFigure(VbstoreError, KeyError):
    """No reported evaluation of that checkpoint on that suite to reproduce."""

    exit_code = 9

    def __init__(self, checkpoint: str, suite: str) -> None:
        super().__init__(
            f"no published figure of {checkpoint} on {suite}",
            hint="import the published table first (vbstore import openclip FILE); "
                 f"vbstore leaderboard {suite} lists the checkpoints it has",
        )
        self.checkpoint = checkpoint
        self.suite = suite


class SuiteConflict(VbstoreError, ValueError):
    """A different protocol pushed under a suite version that is already published."""

    exit_code = 11

    def __init__(self, ref: str, next_version: int) -> None:
        super().__init__(
            f"{ref} is published with a different protocol, and a published suite version "
            "never changes",
            hint=f"set \"version\": {next_version} (the next free version) and push again")
        self.ref = ref
        self.next_version = next_version


class UuidConflict(VbstoreError, ValueError):
    """A different evaluation sent under an upload uuid that already names one (Visin's
    ``uuid``: recorded results never change)."""

    exit_code = 11

    def __init__(self, uuid: str, stored: str) -> None:
        super().__init__(
            f"uuid {uuid} already names evaluation {stored[:12]}, with other results or "
            "evidence; recorded results never change",
            hint=f"send it under a new --uuid, or correct the stored one: --supersedes "
                 f"{stored[:12]}")
        self.uuid = uuid
        self.stored = stored


class InvalidScores(VbstoreError, ValueError):
    """Scores that are not finite numbers, or a suite metric outside the suite's ``range``."""

    exit_code = 2

    def __init__(self, suite: str, problems: list[str]) -> None:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        super().__init__(
            f"refused scores on {suite}: {'; '.join(problems[:3])}{more}",
            hint="a score outside its metric's range is a unit or a transcription error: fix "
                 "the numbers (a fraction, not a percentage, for a [0, 1] range); nothing was "
                 "stored")
        self.suite = suite
        self.problems = problems


class ExecutorError(VbstoreError, RuntimeError):
    """A distributed executor (Ray) cannot be reached, or its workers did not produce every pack."""

    exit_code = 1


class MissingDependency(VbstoreError, ImportError):
    """An optional library a feature needs (datasets, matplotlib) is not installed."""

    exit_code = 2

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"this needs {module}, which is not installed",
                         hint=f"install it with: pip install 'vbstore[{extra}]'")
        self.module, self.extra = module, extra


class MissingTool(VbstoreError, FileNotFoundError):
    """A program or file a scorer runs (java, SPICE's CoreNLP jars) is not installed."""

    exit_code = 2


# -- budgets ---------------------------------------------------------------------------------------


class OverBudget(VbstoreError, MemoryError):
    """A computation would allocate more memory than the limit (``VBSTORE_MAX_MEMORY``) allows."""

    exit_code = 2

    def __init__(self, what: str, needed: int, limit: int) -> None:
        super().__init__(
            f"{what} would need about {_gib(needed)} of memory, over the limit of {_gib(limit)}",
            hint="check the class count or sizes asked for; if they are right, raise the limit "
                 "with VBSTORE_MAX_MEMORY=SIZE (e.g. 64G)")
        self.what, self.needed, self.limit = what, needed, limit


class BadHead(VbstoreError, ValueError):
    """A head's values cannot be used: non-finite numbers, or outputs its record contradicts."""

    exit_code = 2

    def __init__(self, oid: str, why: str) -> None:
        super().__init__(f"head {oid[:12]} cannot be used: {why}",
                         hint="train it again (`vbstore get head`) or pull it from a remote you "
                              "trust; nothing was computed from it")
        self.oid, self.why = oid, why


def _gib(size: int) -> str:
    return f"{size / (1 << 30):.3g} GiB" if size >= 1 << 30 else f"{size / (1 << 20):.3g} MiB"
