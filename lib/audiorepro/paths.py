"""Where data, results and the book live.

Every location can be moved with an environment variable, so a researcher can keep corpora on a
large disk and CI can keep test output in a temporary folder:

- ``AUDIOREPRO_DATA``: generated and prepared corpora (default ``<repo>/data``);
- ``AUDIOREPRO_RESULTS``: the results ledger (default ``<repo>/results``);
- ``AUDIOREPRO_RUNS``: the run store (default ``<data dir>/runs``);
- ``AUDIOREPRO_CHECKPOINTS``: downloaded released checkpoints, under their published file names
  (default ``<data dir>/checkpoints``).

``<repo>`` is the checkout holding this package when installed editable (``pip install -e .``),
otherwise the current working directory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def repo_root() -> Path:
    """The checkout this package lives in, or the working directory for a non-editable install."""
    here = Path(__file__).resolve()
    candidate = here.parents[2]  # lib/audiorepro/paths.py -> repository root
    if (candidate / "pyproject.toml").is_file() and (candidate / "book").is_dir():
        return candidate
    return Path.cwd()


def data_dir() -> Path:
    """Root folder of the corpora: ``$AUDIOREPRO_DATA`` or ``<repo>/data``."""
    env = os.environ.get("AUDIOREPRO_DATA")
    return Path(env).expanduser() if env else repo_root() / "data"


def results_dir() -> Path:
    """Folder of the results ledger: ``$AUDIOREPRO_RESULTS`` or ``<repo>/results``."""
    env = os.environ.get("AUDIOREPRO_RESULTS")
    return Path(env).expanduser() if env else repo_root() / "results"


def runs_dir() -> Path:
    """Root of the run store (trained models, feature caches, teacher stores):
    ``$AUDIOREPRO_RUNS`` or ``<data dir>/runs``."""
    env = os.environ.get("AUDIOREPRO_RUNS")
    return Path(env).expanduser() if env else data_dir() / "runs"


def runs_dir_origin() -> tuple[str, str]:
    """Where :func:`runs_dir` comes from, for a message: ``(what sets it, what to set to move
    it)``, e.g. ``("AUDIOREPRO_DATA/runs", "AUDIOREPRO_RUNS (or AUDIOREPRO_DATA)")``."""
    move = "AUDIOREPRO_RUNS (or AUDIOREPRO_DATA)"
    if os.environ.get("AUDIOREPRO_RUNS"):
        return "set by AUDIOREPRO_RUNS", "AUDIOREPRO_RUNS"
    if os.environ.get("AUDIOREPRO_DATA"):
        return "AUDIOREPRO_DATA/runs", move
    return "the installation's data/runs: neither AUDIOREPRO_RUNS nor AUDIOREPRO_DATA is set", move


def checkpoints_dir() -> Path:
    """Folder of released checkpoints, downloaded by hand under their published file names
    (``passt-s-f128-p16-s16-ap.468.pt``, ``Cnn14_mAP=0.431.pth``, ...):
    ``$AUDIOREPRO_CHECKPOINTS`` or ``<data dir>/checkpoints``."""
    env = os.environ.get("AUDIOREPRO_CHECKPOINTS")
    return Path(env).expanduser() if env else data_dir() / "checkpoints"


def _size(num_bytes: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if num_bytes < 1000 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "bytes" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1000
    raise AssertionError  # pragma: no cover


def free_space(path: str | Path) -> str:
    """The space left on the file system that holds ``path`` (or its nearest existing folder),
    for a message: ``"1.2 GB free"``."""
    folder = Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return f"{_size(shutil.disk_usage(folder).free)} free"
    except OSError:
        return "free space unknown"
