"""Where a command may write: nothing a user made is overwritten, outputs never go over inputs.

:func:`output_target` is the one check every writing ``audiorepro`` command makes before any work
(the way ``git clone`` refuses an existing target): an output goes into a new (or empty) folder
or a new file; into a folder this command wrote before only when the inputs and settings
recorded there (``command.json``) are the same, and then the command reuses it and says so;
anything else needs ``--force``, and the message names what would be replaced. An output that
is an input, lies inside an input folder or holds one is refused even with ``--force``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiorepro.storage import atomic_write, known_file_sha256, plain_values, read_json

__all__ = [
    "OUTPUT_RECORD",
    "Input",
    "OutputError",
    "OutputPlan",
    "fingerprint",
    "output_target",
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
    record: Mapping[str, Any] | None = None
    if record_path.is_file():
        try:
            record = read_json(record_path)
        except Exception:  # noqa: BLE001 - an unreadable record is no record
            record = None
    previous = []
    if isinstance(record, Mapping) and record.get("command") == command:
        previous = [path / name for name in record.get("outputs", []) if isinstance(name, str)]
    # the record itself is written again after the command succeeded: not named
    replaced = sorted({p for p in [*previous, *(path / name for name in writes)] if p.is_file()})
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
        elif isinstance(record, Mapping) and record.get("command"):
            why = f"holds the output of `{record.get('command')}`"
        else:
            entries = f"{len(held)} entr{'ies' if len(held) > 1 else 'y'}"
            why = (
                f"holds {entries} ({_names(held, path)}) and no {OUTPUT_RECORD} of `{command}` "
                "to compare inputs and settings with"
            )
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
    import json

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
    return dict(record) if isinstance(record, Mapping) and record.get("command") else None


def stale_inputs(record: Mapping[str, Any]) -> list[str]:
    """The input files of a recorded request (:func:`fingerprint`) that are gone or whose
    SHA-256 changed since the command read them: what was made from them is out of date."""
    inputs = record.get("request", {}).get("inputs", {})
    stale = []
    for name, sha in sorted(inputs.items()):
        if not Path(name).is_file() or known_file_sha256(name) != sha:
            stale.append(name)
    return stale
