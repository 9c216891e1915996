"""Seeds, thread counts and the environment snapshot recorded with every result."""

from __future__ import annotations

import contextlib
import os
import platform
import random
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

TRACKED_PACKAGES = (
    "audiorepro",
    "torch",
    "numpy",
    "scipy",
    "librosa",
    "soundfile",
    "transformers",
    "accelerate",
    "pandas",
    "safetensors",
)


def seed_everything(seed: int, *, deterministic: bool = True) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA) from one integer.

    With ``deterministic=True`` torch uses deterministic algorithms where it has them (warning
    instead of failing where it has none), so the same seed gives the same numbers on CPU.
    Returns a ``torch.Generator`` seeded with ``seed`` for code that wants its own stream.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if hasattr(torch.backends, "cudnn"):
            torch.backends.cudnn.benchmark = False
    return torch.Generator().manual_seed(seed)


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """Run torch on ``threads`` intra-op threads inside the block (restored afterwards);
    ``None`` leaves torch's setting.

    CPU results depend on the thread count (a reduction splits differently), so a run whose
    configuration names its threads gives the same numbers in any process, on any machine
    with that many cores or more.
    """
    if threads is None:
        yield
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be None or an int >= 1, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def single_thread():
    """Run torch on one intra-op thread inside the block (restored afterwards).

    Small models on a shared 2-core machine: a second intra-op thread costs far more in
    synchronisation than it saves (measured on chapter 03: 20× slower steps under load).
    """
    with torch_threads(1):
        yield


def git_sha(path: str | Path | None = None) -> str | None:
    """The commit of the repository holding ``path`` (default: this file), with ``-dirty``."""
    cwd = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return sha + ("-dirty" if dirty else "")


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names`` (``None`` where a package is missing)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def device_description() -> str:
    """What computes here: the CUDA device name, ``mps`` or ``cpu (N threads)``."""
    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return f"cpu ({torch.get_num_threads()} threads, {platform.processor() or platform.machine()})"


def environment_snapshot() -> dict[str, Any]:
    """Package versions, git SHA, Python, platform and device: recorded with every result."""
    return {
        "git_sha": git_sha(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "device": device_description(),
        "packages": package_versions(),
    }
