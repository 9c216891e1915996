"""Atomic corpus generation: a generated corpus is either complete or absent.

Every generator of :mod:`audiorepro.data.embedded` writes its corpus into a temporary sibling
folder (``.<name>.partial-<pid>-<random>``), writes the completion marker :data:`MARKER` (the
settings it was generated with, plus its counts) last, and renames the folder into place. A
folder without a readable marker is never taken for a corpus, a crash leaves the target
untouched, temporary folders of dead processes are deleted on the next run, and two processes
generating the same corpus at once both end with the one that finished first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

MARKER = ".complete"


def read_marker(corpus_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The completion marker of a corpus folder, or ``None`` when absent or unreadable."""
    try:
        data = json.loads((Path(corpus_dir) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def matches(marker: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> bool:
    """Whether a marker records every one of ``settings`` with an equal value."""
    return marker is not None and all(marker.get(k) == v for k, v in settings.items())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_partials(out_dir: Path) -> None:
    """Delete temporary folders that crashed runs left next to ``out_dir`` (their pid is gone)."""
    pattern = re.compile(rf"^\.{re.escape(out_dir.name)}\.(?:partial|old)-(\d+)-")
    if not out_dir.parent.is_dir():
        return
    for path in out_dir.parent.iterdir():
        match = pattern.match(path.name)
        if match and path.is_dir() and not _pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def write_json(path: Path, data: Any) -> None:
    """Write JSON with sorted keys and a final newline (byte-stable for equal data)."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def generate_atomically(
    out_dir: str | os.PathLike[str],
    settings: Mapping[str, Any],
    build: Callable[[Path], dict[str, Any]],
) -> tuple[dict[str, Any], bool]:
    """Build a corpus folder atomically, or reuse a complete one with the same settings.

    If ``out_dir`` holds a :data:`MARKER` whose fields equal ``settings``, its counts are
    returned. Otherwise ``build(tmp)`` writes the corpus into a temporary sibling
    (``.<name>.partial-<pid>-<random>``) and returns its counts; the marker (``settings`` plus
    ``counts``) is written last and the folder renamed to ``out_dir``. A previous generated
    corpus with other settings is replaced; a crash leaves ``out_dir`` untouched.

    Returns:
        ``(counts, reused)``.

    Raises:
        FileExistsError: ``out_dir`` exists, is not empty and has no marker (not a corpus this
            library wrote: it is never deleted).
    """
    out_dir = Path(out_dir)
    marker = read_marker(out_dir)
    if matches(marker, settings):
        return marker["counts"], True
    if out_dir.exists() and marker is None and any(out_dir.iterdir()):
        raise FileExistsError(
            f"{out_dir} exists and is not empty but has no {MARKER} marker: it is not a "
            "complete generated corpus (delete it or choose another folder)"
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(out_dir)
    tmp = Path(
        tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-{os.getpid()}-", dir=out_dir.parent)
    )
    try:
        # mkdtemp creates the folder 0700; give the corpus the permissions of a normal folder.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        counts = build(tmp)
        write_json(tmp / MARKER, {**settings, "counts": counts})
        try:
            os.rename(tmp, out_dir)  # atomic onto a missing or empty folder
        except OSError:
            current = read_marker(out_dir)
            if matches(current, settings):
                # Another process finished the same corpus first: keep theirs.
                shutil.rmtree(tmp, ignore_errors=True)
                return current["counts"], True
            if current is None and out_dir.exists() and any(out_dir.iterdir()):
                raise
            old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}-{tmp.name[-8:]}"
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return counts, False
