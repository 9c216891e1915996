"""Where a command may write: nothing a user made is overwritten, outputs never go over inputs.

:func:`output_target` is the one check every writing ``audiorepro`` command makes before any work
(the way ``git clone`` refuses an existing target): an output goes into a new (or empty) folder
or a new file; into a folder this command wrote before only when the inputs and settings
recorded there (``command.json``) are the same, and then the command reuses it and says so;
anything else needs ``--force``, and the message names what would be replaced. An output that
is an input, lies inside an input folder or holds one is refused even with ``--force``.

:func:`output_lock` is held for the whole command, from before it reads any audio: a second
command writing the same ``--out`` at once is refused at its start (instead of replacing the
first one's output when it ends), and an ``--out`` that cannot be written is said before any
work, naming the ``--out`` given and its folder.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiorepro.storage import (
    atomic_write,
    created_parents,
    known_file_sha256,
    lock_note,
    plain_values,
    read_json,
    release_lock,
    take_lock,
)

__all__ = [
    "OUTPUT_RECORD",
    "Input",
    "InputBusy",
    "OutputBusy",
    "OutputError",
    "OutputPlan",
    "OutputUnwritable",
    "fingerprint",
    "output_lock",
    "output_target",
    "being_written",
    "read_output_record",
    "record_output",
    "stale_inputs",
]

OUTPUT_RECORD = "command.json"
"""The file a command leaves in the folder it wrote: the command, its inputs (a SHA-256 per
file), its settings, the inputs by option (``"given": {"--audio": resolved path, ...}``: where
``abx score`` finds the run and audio of a ``units encode`` folder) and the files it wrote."""

_LISTED = 5


class OutputError(ValueError):
    """An output path a command must not write (as it is, or without ``--force``); the message
    names the path, what is there and what to do."""


class OutputBusy(OutputError):
    """Another ``audiorepro`` command is writing the same ``--out`` (it holds its lock)."""


class InputBusy(OutputError):
    """An input of a command is being written by another ``audiorepro`` command now (a run
    folder that ``units train --force`` is replacing, a table that ``segments`` writes)."""


class OutputUnwritable(OutputError):
    """The ``--out`` given cannot be written: its folder (or the folder itself) refuses it."""


@dataclass(frozen=True)
class Input:
    """One input of a command: the option that names it (``--audio``), its path, and whether it
    is a data folder (nothing may be written inside it, nor may an output folder hold it)."""

    option: str
    path: Path
    data: bool = True


@dataclass
class OutputPlan:
    """What :func:`output_target` decided: write (``replaced`` lists what ``--force`` removed or
    will overwrite), or ``reuse`` the folder's earlier output of the same request."""

    path: Path
    reuse: bool = False
    replaced: list[Path] = field(default_factory=list)
    request: Mapping[str, Any] | None = None
    """What :func:`record_output` records: the request the target was checked against."""
    given: dict[str, str] = field(default_factory=dict)
    """``{option: resolved path}`` of the command's inputs (``--audio``, ``RUN``), recorded
    beside the request; never compared for reuse (the request's fingerprint is)."""
    _before: dict[Path, tuple[int, int] | None] = field(default_factory=dict, repr=False)

    def remove_stale(self) -> list[Path]:
        """After the command succeeded: remove the replaced files it did not write again (a
        k-means file the new run skipped), so none stays beside the new output. Until then a
        failed run leaves the folder as it was."""
        stale = [p for p, before in self._before.items() if before and _identity(p) == before]
        for p in stale:
            p.unlink(missing_ok=True)
        return stale

    def note(self) -> str:
        """One line for the user: what is reused or replaced (empty for a new target)."""
        if self.reuse:
            return (
                f"{self.path}: holds this command's output for the same inputs and settings "
                f"({OUTPUT_RECORD}); reusing it, nothing written (add --force to run it again)"
            )
        if self.replaced:
            return (
                f"{self.path}: --force: replacing {_names(self.replaced, self.path)} (what "
                "this run does not write again is removed once it succeeds)"
            )
        return ""


def _names(paths: Sequence[Path], base: Path | None = None) -> str:
    shown = []
    for p in paths[:_LISTED]:
        inside = base is not None and p != base and p.is_relative_to(base)
        shown.append(str(p.relative_to(base)) if inside else str(p))
    more = f" and {len(paths) - _LISTED} more" if len(paths) > _LISTED else ""
    return ", ".join(shown) + more


def fingerprint(files: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """``{resolved path: SHA-256}`` of input files: what a later run compares to reuse."""
    return {str(Path(f).resolve()): known_file_sha256(f) for f in sorted(map(str, files))}


def _differences(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The settings and inputs that differ between two requests, named for the user."""
    out = []
    settings_then, settings_now = then.get("settings", {}), now.get("settings", {})
    for key in sorted(set(settings_then) | set(settings_now)):
        if settings_then.get(key) != settings_now.get(key):
            out.append(f"{key} {settings_then.get(key)!r} then, {settings_now.get(key)!r} now")
    inputs_then, inputs_now = then.get("inputs", {}), now.get("inputs", {})
    changed = [p for p in inputs_now if p in inputs_then and inputs_then[p] != inputs_now[p]]
    added = [p for p in inputs_now if p not in inputs_then]
    gone = [p for p in inputs_then if p not in inputs_now]
    for count, what in ((len(changed), "changed"), (len(added), "new"), (len(gone), "gone")):
        if count:
            out.append(f"{count} input file{'s' if count > 1 else ''} {what}")
    return out


def _run_files(folder: Path) -> list[Path]:
    """The files of a run folder a command reads (resolved): those its :data:`OUTPUT_RECORD`
    lists and the record itself, or, without a readable record, every file directly in it."""
    record = folder / OUTPUT_RECORD
    try:
        listed = read_json(record).get("outputs", []) if record.is_file() else None
    except Exception:  # noqa: BLE001 - an unreadable record is no record
        listed = None
    if not isinstance(listed, list):
        return [p.resolve() for p in folder.iterdir() if p.is_file()]
    return [record.resolve(), *((folder / n).resolve() for n in listed if isinstance(n, str))]


def _check_inputs(path: Path, resolved: Path, folder: bool, inputs: Sequence[Input]) -> None:
    for given in inputs:
        where = given.path.resolve()
        if resolved == where:
            raise OutputError(
                f"{path}: --out is the {given.option} input; a command never writes over its "
                "inputs (not even with --force): give another --out"
            )
        if given.data and where.is_dir() and resolved.is_relative_to(where):
            # a table beside the audio it lists moves with it: only audio files are refused
            if folder or resolved.suffix.lower() in (".wav", ".flac", ".ogg"):
                raise OutputError(
                    f"{path}: --out lies inside the {given.option} folder {given.path}, where "
                    "what is written could replace its files or be read as input by the next "
                    "run (not even with --force): give a folder outside it"
                )
        if not given.data and where.is_dir() and resolved.is_relative_to(where):
            # a run or voice folder the command reads: its own files are never replaced
            held = [p for p in _run_files(where) if p == resolved or p.is_relative_to(resolved)]
            if held:
                raise OutputError(
                    f"{path}: --out would replace {_names(held, where)} of the {given.option} "
                    f"folder {given.path}, which the command reads (not even with --force): "
                    "give a path outside that folder"
                )
        if folder and given.data and where.is_relative_to(resolved):
            raise OutputError(
                f"{path}: --out holds the {given.option} input {given.path}; a command never "
                "writes around its inputs (not even with --force): give a folder beside it"
            )


def output_target(
    path: str | os.PathLike[str],
    *,
    command: str,
    folder: bool,
    inputs: Sequence[Input] = (),
    request: Mapping[str, Any] | None = None,
    writes: Iterable[str] = (),
    force: bool = False,
) -> OutputPlan:
    """Check where ``command`` (``"units train"``) may write before it does any work.

    Args:
        path: the ``--out`` given: a folder (``folder=True``) or a file.
        inputs: what the command reads; an output equal to one, inside a data folder or
            holding one is refused, with or without ``force``.
        request: ``{"inputs": fingerprint(...), "settings": {...}}``; a folder whose
            :data:`OUTPUT_RECORD` records the same command and request is reused.
        writes: the names (relative to the folder) the command writes: the files ``--force``
            would replace.
        force: replace what is there (the folder's earlier outputs and ``writes`` are removed
            first, so no stale file stays beside the new ones).

    Raises:
        OutputError: the path is the wrong kind (a file for a folder, a folder for a file), an
            input, or holds what the command would replace and ``force`` is not given.
    """
    path = Path(path)
    resolved = path.resolve()
    _check_inputs(path, resolved, folder, inputs)
    if not folder:
        if path.is_dir():
            raise OutputError(
                f"{path}: is a folder; --out names the file to write: give a file path "
                f"(e.g. {path / ('out' + (path.suffix or '.txt'))})"
            )
        parent = next((p for p in path.parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise OutputError(f"{path}: {parent} is a file, not a folder: give another --out")
        if not (path.exists() or path.is_symlink()):
            return OutputPlan(path)
        if not force:
            raise OutputError(
                f"{path}: the file exists ({path.stat().st_size} bytes) and `{command}` never "
                "replaces a file it was not asked to: give a new file name, or add --force to "
                "replace it"
            )
        return OutputPlan(path, replaced=[path])
    if path.exists() and not path.is_dir():
        raise OutputError(
            f"{path}: is a file; --out names the folder `{command}` writes: give a new folder "
            "path (it is created)"
        )
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise OutputError(f"{path}: {parent} is a file, not a folder: give another --out")
    given = {i.option: str(i.path.resolve()) for i in inputs}
    if not path.is_dir() or not any(path.iterdir()):
        return OutputPlan(path, request=request, given=given)
    record_path = path / OUTPUT_RECORD
    record = read_output_record(path)
    if record is not None and record.get("command") != command:
        raise OutputError(
            f"{path}: the folder holds the output of `{record.get('command')}` (its "
            f"{OUTPUT_RECORD} says so), and `{command}` never writes into another command's "
            "output, even with --force (its record would be replaced, and that command "
            "would no longer know its own folder): give another --out"
        )
    previous = []
    if record is not None and record.get("command") == command:
        previous = [path / name for name in record.get("outputs", []) if isinstance(name, str)]
    # the record itself is written again after the command succeeded: named only when it is
    # a file of the user's (or another tool's) of that name, which --force replaces too
    foreign = [record_path] if record is None and record_path.exists() else []
    replaced = sorted(
        {p for p in [*previous, *(path / name for name in writes), *foreign] if p.is_file()}
    )
    if (
        previous
        and request is not None
        and dict(record.get("request", {})) == plain_values(request)
        and all(p.is_file() for p in previous)
        and not force
    ):
        return OutputPlan(path, reuse=True, request=request, given=given)
    if not force:
        held = sorted(path.iterdir())
        if previous:
            why = (
                f"holds the output of an earlier `{command}` with other inputs or settings "
                f"({'; '.join(_differences(record.get('request', {}), plain_values(request or {})))})"
            )
        elif record is not None:
            why = f"holds the output of `{record.get('command')}`"
        else:
            entries = f"{len(held)} entr{'ies' if len(held) > 1 else 'y'}"
            why = (
                f"holds {entries} ({_names(held, path)}) and no {OUTPUT_RECORD} of `{command}` "
                "to compare inputs and settings with"
            )
            if foreign:
                why += f" (its {OUTPUT_RECORD} was not written by audiorepro)"
        would = "--force would write beside them"
        if replaced:
            would = f"--force would replace {_names(replaced, path)}"
        raise OutputError(
            f"{path}: the folder {why}. Give a new folder (or an empty one), or add --force "
            f"to write into it ({would})"
        )
    before = {p: _identity(p) for p in replaced}
    return OutputPlan(path, replaced=replaced, request=request, given=given, _before=before)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def record_output(
    plan: OutputPlan, *, command: str, outputs: Iterable[str | os.PathLike[str]]
) -> None:
    """After ``command`` wrote ``outputs`` into the folder of ``plan``: remove what it replaced
    and did not write again (:meth:`OutputPlan.remove_stale`), then write the folder's
    :data:`OUTPUT_RECORD`."""
    plan.remove_stale()
    path = plan.path
    names = sorted(
        str(Path(o).relative_to(path)) if Path(o).is_absolute() else str(o) for o in outputs
    )
    names = [n for n in names if (path / n).is_file()]
    record = {
        "command": command,
        "request": plain_values(plan.request or {}),
        "given": dict(plan.given),
        "outputs": names,
        "output_sha256": {n: known_file_sha256(path / n) for n in names},
    }
    atomic_write(
        path / OUTPUT_RECORD, lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n")
    )


def read_output_record(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The :data:`OUTPUT_RECORD` that :func:`record_output` left in ``folder``, or ``None``
    when there is none or it cannot be read (a folder made by hand or by another tool)."""
    path = Path(folder) / OUTPUT_RECORD
    if not path.is_file():
        return None
    try:
        record = read_json(path)
    except Exception:  # noqa: BLE001 - an unreadable record is no record
        return None
    return dict(record) if _written_by_audiorepro(record) else None


def _written_by_audiorepro(record: Any) -> bool:
    """Whether a parsed :data:`OUTPUT_RECORD` is one :func:`record_output` wrote (a command of
    this tool, the request and the outputs), not a user's file of that name."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("command"), str)
        and record["command"].split(" ")[0] in COMMAND_GROUPS
        and isinstance(record.get("request"), Mapping)
        and isinstance(record.get("outputs"), list)
    )


COMMAND_GROUPS = ("units", "awe", "abx", "segments")
"""The first word of every ``audiorepro`` command a record names."""


def changed_outputs(folder: str | os.PathLike[str], record: Mapping[str, Any]) -> list[str]:
    """The files a command recorded writing into ``folder`` (:func:`record_output`) that are
    gone or whose SHA-256 changed since: edited by hand, or copied over from another run
    (``[]`` for a record from before the hashes were kept)."""
    folder = Path(folder)
    return [
        name
        for name, sha in sorted((record.get("output_sha256") or {}).items())
        if not (folder / name).is_file() or known_file_sha256(folder / name) != sha
    ]


def stale_inputs(record: Mapping[str, Any]) -> list[str]:
    """The input files of a recorded request (:func:`fingerprint`) that are gone or whose
    SHA-256 changed since the command read them: what was made from them is out of date."""
    inputs = record.get("request", {}).get("inputs", {})
    stale = []
    for name, sha in sorted(inputs.items()):
        if not Path(name).is_file() or known_file_sha256(name) != sha:
            stale.append(name)
    return stale


# --------------------------------------------------------------------------------------------
# One command at a time per --out
# --------------------------------------------------------------------------------------------

LOCK_SUFFIX = ".lock"
"""The lock of ``--out PATH`` is the file ``.<name of PATH>.lock`` beside it, held (``flock``)
for the whole command and removed when it ends; one left by a killed command is taken over."""


def _where(folder: Path) -> str:
    return f"the current folder ({Path.cwd()})" if str(folder) == "." else str(folder)


def _unwritable(path: Path, folder: Path, reason: str, what: str) -> OutputUnwritable:
    itself = folder == path
    return OutputUnwritable(
        f"{path}: --out cannot be written: "
        + (f"the {what} itself" if itself else f"its folder {_where(folder)}")
        + f" is not writable ({reason}); nothing was read or written. Give an --out in a "
        f"folder you can write, or make {_where(folder)} writable"
    )


def _holder(note: str) -> str:
    """``units train, pid 123, since 14:02`` from a lock's note (what is known of it)."""
    try:
        info = json.loads(note)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return ""
    parts = []
    if isinstance(info.get("command"), str):
        parts.append(f"`{info['command']}`")
    if isinstance(info.get("pid"), int):
        host = info.get("host")
        on = f" on {host}" if isinstance(host, str) and host != socket.gethostname() else ""
        parts.append(f"pid {info['pid']}{on}")
    if isinstance(info.get("since"), int | float):
        then = time.localtime(info["since"])
        today = time.localtime()[:3] == then[:3]
        parts.append("since " + time.strftime("%H:%M" if today else "%Y-%m-%d %H:%M", then))
    return f" ({', '.join(parts)})" if parts else ""


def check_writable(path: str | os.PathLike[str], *, folder: bool) -> tuple[Path, bool]:
    """Check that ``--out path`` can be written, before any work: its nearest existing folder
    (the new folders above it are created there) and, for an existing output folder, the folder
    itself. Returns ``(nearest existing folder, whether it is a folder)``; a file on the way
    (``--out notes.txt/run``) is left to :func:`output_target` to say.

    Raises:
        OutputUnwritable: naming ``path`` and the folder that refuses it.
    """
    path = Path(path)
    what = "folder" if folder else "file"
    anchor = next((p for p in path.parents if p.exists()), Path("."))
    if not anchor.is_dir():
        return anchor, False
    checks = [anchor]
    if folder and path.is_dir():
        checks.append(path)
    for place in checks:
        if not os.access(place, os.W_OK | os.X_OK):
            raise _unwritable(path, place, "permission denied or a read-only disk", what)
    return anchor, True


@contextmanager
def output_lock(
    path: str | os.PathLike[str], *, command: str, folder: bool, lock: bool = True
) -> Iterator[list[Path]]:
    """Hold the lock of ``--out path`` for the block, after :func:`check_writable`; yields the
    unfinished copies of ``path`` a killed command had left beside it, now removed
    (:func:`_remove_left_behind`).

    The lock file ``.<name>.lock`` beside ``path`` (:data:`LOCK_SUFFIX`; the folders above it
    that do not exist yet are made, and removed again if nothing was written into them) is
    created, which also proves the place can be written, and locked (``flock``: a killed
    command frees it, and the next one takes the file over). ``path`` is located with its
    links followed: a link to a folder and the folder take one lock. ``lock=False`` (a file written
    into a folder of audio, where a lock file would be listed as a file of the folder) only
    creates and removes that file.

    Raises:
        OutputBusy: another command holds the lock: the message names ``path``, that command,
            its process id and since when it writes, and what to do.
        OutputUnwritable: the place cannot be written (:func:`check_writable`, or creating the
            lock file failed), naming ``path`` and its folder.
    """
    path = Path(path)
    what = "folder" if folder else "file"
    anchor, ok = check_writable(path, folder=folder)
    if not ok:
        yield []
        return
    target = _located(path)
    made = created_parents(target)
    lock_file = _lock_file(target)
    note = json.dumps(
        {
            "command": command,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": round(time.time()),
        }
    )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle = take_lock(lock_file, wait=False, note=note)
    except OSError as err:
        _remove_empty(made, target)
        if err.errno in (None, errno.ENOENT, errno.ENOTDIR):  # output_target says what
            raise
        where = path.parent if path.parent.is_dir() else anchor
        raise _unwritable(path, where, (err.strerror or str(err)).lower(), what) from err
    if handle is None:
        _remove_empty(made, target)
        raise OutputBusy(
            f"{path}: another audiorepro command is writing this {what}"
            f"{_holder(lock_note(lock_file))}; wait for it to end, or give another --out "
            f"(its lock: {lock_file}, freed when that command ends, even if killed)"
        )
    try:
        removed = _remove_left_behind(target)
        if not lock:
            release_lock(lock_file, handle)
        yield removed
    finally:
        if lock:
            release_lock(lock_file, handle)
        _remove_empty(made, target)


def _located(path: Path) -> Path:
    """Where ``path`` is: absolute, its links followed (a link to a folder and the folder are
    one ``--out``, and so take one lock)."""
    return Path(os.path.realpath(path))


def _lock_file(target: Path) -> Path:
    return target.parent / f".{target.name}{LOCK_SUFFIX}"


_LEFT_BEHIND = (
    re.compile(r"\.(?P<name>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]{8}"),  # output_folder's
    re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp"),  # atomic_write's
)
"""The names of the temporary siblings a command writes its ``--out`` into before renaming
it (:func:`audiorepro.storage.output_folder`, :func:`audiorepro.storage.atomic_write`): the
name of the output and the id of the process that writes it."""


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs, as another user
        return True
    return True


def _remove_left_behind(target: Path) -> list[Path]:
    """Remove the temporary siblings of ``target`` that a command writing it left when it was
    killed (``kill -9``, a power cut: nothing ran to remove them), and return them. Called with
    ``target``'s lock held, so no live command writes them; one of a process still running
    (another user's, or a process id taken again) is left alone."""
    removed = []
    for entry in sorted(target.parent.glob(f".{glob.escape(target.name)}.*")):
        for pattern in _LEFT_BEHIND:
            found = pattern.fullmatch(entry.name)
            if found is None or found["name"] != target.name:
                continue
            pid = int(found["pid"])
            if pid == os.getpid() or _alive(pid):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            if not entry.exists():
                removed.append(entry)
    return removed


def being_written(path: str | os.PathLike[str]) -> str:
    """``" (`units train`, pid 123, since 14:02)"`` when another ``audiorepro`` command holds
    the ``--out`` lock of ``path`` now (:func:`output_lock`), else ``""``. Read from the lock's
    note without touching the lock (a command starting to write ``path`` at this moment is never
    refused because of this check): a lock file left by a killed command names a process that
    is gone, and a command on another machine counts as writing."""
    note = lock_note(_lock_file(_located(Path(path))))
    if not note:
        return ""
    try:
        info = json.loads(note)
    except ValueError:
        return ""
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return ""
    if info["pid"] == os.getpid():
        return ""
    here = info.get("host") in (None, socket.gethostname())
    if here and not _alive(info["pid"]):
        return ""
    return _holder(note) or " (another audiorepro command)"


def check_not_being_written(option: str, path: str | os.PathLike[str]) -> None:
    """Refuse to read ``path`` (the input ``option`` names) while another ``audiorepro``
    command writes it (:func:`being_written`): a run folder half replaced by ``--force`` would
    give codes of one model read with the settings of another.

    Raises:
        InputBusy: naming ``option``, ``path``, the command that writes it and what to do.
    """
    holder = being_written(path)
    if holder:
        raise InputBusy(
            f"{path} ({option}): another audiorepro command is writing it now{holder}; wait "
            "for it to end, then run this command again"
        )


def _remove_empty(made: list[Path], target: Path) -> None:
    """The folders ``made`` for ``target`` (innermost first), each removed if still empty and
    ``target`` was not written."""
    if target.exists():
        return
    for parent in made:
        try:
            parent.rmdir()
        except OSError:
            break
