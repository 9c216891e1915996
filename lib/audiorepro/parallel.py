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

import collections
import dataclasses
import multiprocessing
import numbers
import os
import pickle
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Generic, TypeVar

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)

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


def _call(fn: Callable[[Any, T], R], item: T) -> bytes:
    """``fn(shared, item)`` in a worker, returned as plain pickle bytes (:func:`_result`): a
    result holding tensors then crosses to the parent by value. Left to the pool, torch shares
    each tensor's storage through a file descriptor that the parent fetches from the worker
    while the worker goes on, which fails now and then ("received 0 items of ancdata") and
    breaks the whole pool (the book's chapter 01 lost its train-ahead pool to it)."""
    return pickle.dumps(fn(_SHARED, item))


def _result(future: Future[bytes]) -> Any:
    """What :func:`_call` computed (its exception raised here)."""
    return pickle.loads(future.result())


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
            return [_result(f) for f in futures]
        except BaseException:
            for f in futures:  # not started yet: drop them rather than wait for them
                f.cancel()
            raise


class ProcessStream(Generic[S, T, R]):
    """``fn(shared, item)`` for the items of each call, yielded in their order while later
    ones are still computing: up to ``workers`` processes that live as long as the stream
    (``shared`` reaches each once, as in :func:`map_processes`), at most ``ahead`` items
    (default 4 per worker) submitted beyond the one being consumed, so finished results that
    wait for the consumer stay few. With ``workers`` <= 1 each item is computed here when it
    is asked for. Use it as a context manager (or :meth:`close` it); the first exception of a
    call is raised where its result is consumed."""

    def __init__(
        self,
        fn: Callable[[S, T], R],
        *,
        shared: S,
        workers: int = 1,
        ahead: int | None = None,
    ) -> None:
        self.fn, self.shared, self.pool = fn, shared, None
        self.ahead = max(1, ahead if ahead is not None else 4 * int(workers))
        if workers > 1:
            self.pool = ProcessPoolExecutor(
                max_workers=int(workers),
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_keep_shared,
                initargs=(shared,),
            )

    def __call__(self, items: Iterable[T]) -> Iterator[R]:
        if self.pool is None:
            for item in items:
                yield self.fn(self.shared, item)
            return
        pending: collections.deque[Future[R]] = collections.deque()
        for item in items:
            pending.append(self.pool.submit(_call, self.fn, item))
            if len(pending) >= self.ahead:
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())

    def close(self) -> None:
        """Stop the workers; items submitted and not started are dropped."""
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def __enter__(self) -> ProcessStream[S, T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class Task(Generic[T]):
    """One call of :func:`run_graph`: its ``item``, the keys of the tasks it must wait for
    (``after``) and a rough ``cost`` (seconds, or any unit shared by the graph) used to start
    the longest remaining path first."""

    item: T
    after: tuple[Hashable, ...] = ()
    cost: float = 1.0


def critical_paths(tasks: Mapping[K, Task[Any]]) -> dict[K, float]:
    """Each task's cost plus the costliest path of tasks that wait for it (its "bottom
    level"). Raises ``ValueError`` naming an unknown ``after`` key or a cycle."""
    waiting: dict[Hashable, list[K]] = {k: [] for k in tasks}
    for key, task in tasks.items():
        for dep in task.after:
            if dep not in tasks:
                raise ValueError(f"task {key!r} waits for {dep!r}, which is not a task")
            waiting[dep].append(key)
    level: dict[K, float] = {}
    visiting: set[Hashable] = set()

    def bottom(key: K) -> float:
        if key in level:
            return level[key]
        if key in visiting:
            raise ValueError(f"the tasks' order has a cycle through {key!r}")
        visiting.add(key)
        level[key] = tasks[key].cost + max((bottom(w) for w in waiting[key]), default=0.0)
        visiting.discard(key)
        return level[key]

    for key in tasks:
        bottom(key)
    return level


def graph_order(tasks: Mapping[K, Task[Any]]) -> list[K]:
    """The order in which :func:`run_graph` starts the tasks on one worker: of the tasks whose
    ``after`` are done, the one with the costliest remaining path first (ties: given order)."""
    level = critical_paths(tasks)
    position = {k: i for i, k in enumerate(tasks)}
    done: set[Hashable] = set()
    order: list[K] = []
    while len(order) < len(tasks):
        ready = [k for k in tasks if k not in done and all(d in done for d in tasks[k].after)]
        key = min(ready, key=lambda k: (-level[k], position[k]))
        order.append(key)
        done.add(key)
    return order


def run_graph(
    fn: Callable[[S, T], R], tasks: Mapping[K, Task[T]], *, shared: S, workers: int = 1
) -> dict[K, R]:
    """``{key: fn(shared, task.item)}`` for every task (in the order of ``tasks``), each started
    once the tasks it waits for (``task.after``) have returned, up to ``workers`` processes at
    once.

    Of the tasks ready to start, the one with the costliest remaining path
    (:func:`critical_paths`) goes first, so a long chain of dependent tasks starts early and
    the short independent ones fill the other workers. The workers live as long as the graph:
    ``shared`` reaches each of them once, and whatever a worker loads from it (a corpus) serves
    every task it runs. With ``workers`` <= 1 the tasks run here in :func:`graph_order`. The
    first exception raised by a call is raised here once the running calls have returned;
    tasks not yet started are dropped."""
    order = graph_order(tasks)  # validates the graph before any process starts
    workers = min(int(workers), len(tasks))
    if workers <= 1:
        here = {key: fn(shared, tasks[key].item) for key in order}
        return {key: here[key] for key in tasks}
    level = critical_paths(tasks)
    position = {k: i for i, k in enumerate(tasks)}
    results: dict[K, R] = {}
    running: dict[Future[R], K] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_keep_shared, initargs=(shared,)
    ) as pool:
        while len(results) < len(tasks):
            started = set(running.values()) | set(results)
            ready = [k for k in tasks if k not in started and set(tasks[k].after) <= set(results)]
            ready.sort(key=lambda k: (-level[k], position[k]))
            for key in ready[: workers - len(running)]:
                running[pool.submit(_call, fn, tasks[key].item)] = key
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                key = running.pop(future)
                results[key] = _result(future)  # raises; the pool waits for the running ones
    return {key: results[key] for key in tasks}


@dataclasses.dataclass(frozen=True)
class Job:
    """A call that trains (or reloads) runs into a run store: ``fn(config, data=data,
    **kwargs)``, or ``fn(config, **kwargs)`` for a job that loads what it needs itself
    (``data`` is ``None``). ``fn`` is a module-level function, sent to a worker by name."""

    fn: Callable[..., Any]
    config: Any
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __call__(self, data: Any = None) -> Any:
        if data is None:
            return self.fn(self.config, **self.kwargs)
        return self.fn(self.config, data=data, **self.kwargs)


def side_by_side_workers(torch_threads: int | None, device: str) -> int:
    """How many runs train at once: one per ``torch_threads`` usable cores on the CPU
    (:func:`usable_cores`); one when the threads are not set, on a GPU (``device`` ``auto``
    resolves to CUDA when there is one), or under several processes (``accelerate launch``
    runs one run on all of them)."""
    if device == "auto":
        import torch  # only here: the module itself stays free of torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if torch_threads is None or device != "cpu" or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return 1
    return max(1, usable_cores() // torch_threads)


_LOADED: dict[str, Any] = {}


def _loaded(load: Callable[[Any], Any], source: Any) -> Any:
    """``load(source)`` once per process (a worker runs many jobs)."""
    key = f"{load.__module__}.{load.__qualname__}:{source!r}"
    if key not in _LOADED:
        _LOADED[key] = load(source)
    return _LOADED[key]


def plain(value: Any) -> Any:
    """``value`` when it is plain data (``None``, numbers, strings, paths, and tuples, lists
    and dicts of them), else ``None``: what a :class:`Job` hands back from
    :func:`train_graph`. A trained model stays in the run store and is reloaded from there;
    sent back from a worker it would cost a copy of everything it references (the chapter 01
    book build ran out of memory that way) or, shared by file descriptor, break the pool."""
    return value if _is_plain(value) else None


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, numbers.Number | str | os.PathLike):
        return True
    if isinstance(value, tuple | list):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(k) and _is_plain(v) for k, v in value.items())
    return False


def _run_job(shared: tuple[Callable[[Any], Any] | None, Any], job: Job) -> Any:
    load, source = shared
    return plain(job(source if load is None else _loaded(load, source)))


def train_graph(
    tasks: Mapping[K, Task[Job]],
    *,
    workers: int,
    data: Any = None,
    load: Callable[[Any], Any] | None = None,
    source: Any = None,
) -> dict[K, Any]:
    """Every chapter's way of training its runs ahead of the pages: run the :class:`Job` of
    each task once the tasks it waits for are done, up to ``workers`` processes at once
    (:func:`run_graph`: the costliest remaining path first), and return what each returned
    when it is plain data (:func:`plain`: a count, a path, a dict of numbers), else ``None``.

    Here (``workers`` <= 1, or one task) every job gets ``data``. In worker processes each job
    gets ``load(source)``, loaded once per worker, when ``load`` is given (a corpus cheaper to
    load than to send; ``data`` must be what ``load(source)`` returns), else ``data`` itself,
    sent once per worker. The workers live until the last job, so one graph for a whole
    chapter leaves no core idle between pages. Two tasks must not train the same run; every
    run seeds itself, so its numbers are those it would have had in the page's own process."""
    if workers <= 1 or len(tasks) <= 1:
        here = {key: plain(tasks[key].item(data)) for key in graph_order(tasks)}
        return {key: here[key] for key in tasks}
    shared = (load, source) if load is not None else (None, data)
    return run_graph(_run_job, tasks, shared=shared, workers=workers)


__all__ = [
    "Job",
    "ProcessStream",
    "Task",
    "critical_paths",
    "default_workers",
    "graph_order",
    "map_processes",
    "run_graph",
    "side_by_side_workers",
    "train_graph",
    "usable_cores",
]
