"""Independent training runs side by side, one process each.

The book's CPU presets train small models on one torch thread (a second thread costs more in
synchronisation than it saves), so a machine with two cores runs two of them in the time of
one. Each run seeds itself and writes only its own entry of the run store
(:class:`audiorepro.storage.RunStore` publishes with one rename), so its result is the same
whether it runs here, alone, or in a worker process beside another.

Workers are started with ``spawn``: a process that already holds torch's thread pools is never
forked. They inherit the environment (``AUDIOREPRO_*``), so they read and write the same data
folder and run store as the calling process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

_SHARED: Any = None


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_workers(device: str) -> int:
    """Processes to train at once on ``device``: one per usable core on the CPU, one on a GPU
    (runs there would only queue on the one device)."""
    return 1 if str(device).startswith("cuda") else usable_cores()


def _keep_shared(shared: Any) -> None:
    """Worker initializer: keep the shared argument, sent once per worker."""
    global _SHARED
    _SHARED = shared


def _call(fn: Callable[[Any, T], R], item: T) -> R:
    return fn(_SHARED, item)


def map_processes(
    fn: Callable[[S, T], R], items: Iterable[T], *, shared: S, workers: int = 1
) -> list[R]:
    """``[fn(shared, item) for item in items]``, computed by up to ``workers`` processes.

    ``fn`` must be a module-level function (it is pickled by name). ``shared`` (e.g. a
    corpus) is sent to each worker once rather than with every item. Items are started in
    their order, so give the longest first. With ``workers`` <= 1 or a single item everything
    runs in this process. Results come back in the order of ``items``; the first exception
    raised by a call is raised here.
    """
    items = list(items)
    workers = min(int(workers), len(items))
    if workers <= 1:
        return [fn(shared, item) for item in items]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_keep_shared,
        initargs=(shared,),
    ) as pool:
        futures = [pool.submit(_call, fn, item) for item in items]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:  # not started yet: drop them rather than wait for them
                f.cancel()
            raise


__all__ = ["default_workers", "map_processes", "usable_cores"]
