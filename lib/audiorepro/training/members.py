"""Several models of one command's data from consecutive seeds (``awe train`` and ``units
train`` ``--models N``): the first trained in the calling process, the others side by side one
process a core, each finished model kept in the run store until the run folder is written
whole, so that an interrupted command trains only the models it had not finished."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from audiorepro.parallel import default_workers, map_processes
from audiorepro.storage import RunStore, output_folder, write_json

MEMBER = "member-{}"
"""The folder of the k-th model (from 2) inside a run folder (the first model's own)."""


def earlier_member(run_file: str) -> Callable[[Path], bool]:
    """For :func:`audiorepro.storage.output_folder`'s ``stale``: is a path the folder of a model
    that an earlier run of several models wrote (``member-K`` holding its ``run_file``)? A run
    written over it with fewer models does not list that folder, and nothing would read it."""

    def stale(path: Path) -> bool:
        name = path.name.removeprefix("member-")
        return name.isdigit() and (path / run_file).is_file()

    return stale


def member_seeds(seed: int, models: int) -> list[int]:
    """The seeds of ``models`` models of a run of seed ``seed``: ``seed``, ``seed + 1``, ..."""
    if isinstance(models, bool) or not isinstance(models, int) or models < 1:
        raise ValueError(f"--models: expected a whole number >= 1, got {models!r}")
    return [seed + k for k in range(models)]


def train_members(
    store: RunStore,
    kind: str,
    identity: dict[str, Any],
    first: Callable[[Path], object],
    member: Callable[[Any, int], object],
    shared: Any,
    out: str | Path,
    *,
    seeds: Sequence[int],
    run_file: str,
    note: str,
    workers: int | None = None,
) -> None:
    """Train ``len(seeds)`` models and write them to ``out``: ``first(folder)`` trains the first
    here (its warnings and progress show), then ``member((shared, home), k)`` (a module-level
    function) trains the k-th (from 2) into ``home/member-k`` in up to ``workers`` processes
    (``None``: one a usable core, one on a GPU; each holds ``shared``). ``out`` is then the
    first model's folder with ``member-2/`` ... inside, its ``run_file`` listing them
    (``members``, ``member_seeds``, ``ensemble_note``: ``note``). Finished models wait in the run store's ``kind`` entry named
    by ``identity`` (what defines the models: data, settings and their number)."""
    models = len(seeds)
    entry = store.run(kind, identity)
    with store.resumable(entry) as staging:
        home = staging if staging is not None else Path(tempfile.mkdtemp(prefix=f"{kind}-"))
        try:
            one = home / MEMBER.format(1)
            if not (one / run_file).is_file():
                first(one)
            rest = [k for k in range(2, models + 1) if not (home / MEMBER.format(k)).is_dir()]
            if workers is None:  # a GPU trains one model at a time, the CPU one a core
                workers = default_workers("cuda" if torch.cuda.is_available() else "cpu")
            if rest:  # minutes without a progress bar: say what is running
                s = "s" if len(rest) > 1 else ""
                print(
                    f"training model{s} {', '.join(map(str, rest))} of {models} (seed{s} "
                    f"{', '.join(str(seeds[k - 1]) for k in rest)}), "
                    f"{max(1, min(workers, len(rest)))} at once, without a progress bar",
                    file=sys.stderr,
                    flush=True,
                )
            map_processes(member, rest, shared=(shared, str(home)), workers=workers)
            names = [MEMBER.format(k) for k in range(2, models + 1)]
            with output_folder(out, stale=earlier_member(run_file)) as folder:
                for item in one.iterdir():
                    shutil.copy2(item, folder / item.name)
                for name in names:
                    shutil.copytree(home / name, folder / name)
                info = json.loads((folder / run_file).read_text(encoding="utf-8"))
                info.update(members=names, member_seeds=list(seeds), ensemble_note=note)
                write_json(folder / run_file, info)
        finally:
            if staging is None:
                shutil.rmtree(home, ignore_errors=True)


def listed_members(run: Path, info: dict[str, Any], run_file: str, command: str) -> list[Path]:
    """The folders of every model of a run (``info``: its ``run_file``), the run first (itself
    alone for a run of one model); a listed model without its ``run_file`` is an error naming
    it."""
    found = [run, *(run / name for name in info.get("members", []))]
    if missing := [f for f in found[1:] if not (f / run_file).is_file()]:
        raise FileNotFoundError(
            f"{run}: {run_file} lists the model {missing[0].name}, but {missing[0] / run_file} "
            f"is missing: the run folder is incomplete; train it again ({command} --force)"
        )
    return found
