"""Runs side by side: results in order, in this process or in spawned workers, errors raised."""

from __future__ import annotations

import operator
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.parallel import (
    Job,
    ProcessStream,
    Task,
    critical_paths,
    default_workers,
    graph_order,
    map_processes,
    plain,
    run_graph,
    side_by_side_workers,
    train_graph,
    usable_cores,
)


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_back_in_the_order_of_the_items(workers):
    assert map_processes(operator.add, [1, 2, 3], shared=10, workers=workers) == [11, 12, 13]


def test_an_error_in_a_worker_is_raised_here():
    with pytest.raises(ZeroDivisionError):
        map_processes(operator.truediv, [1, 0, 2], shared=1.0, workers=2)


def _mark_then_add(folder: str, item: int) -> int:
    """Leave a file saying ``item`` started; the first item finishes last."""
    (Path(folder) / f"started-{item}").touch()
    if item == 0:
        time.sleep(1.0)
    return item + 100


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stream_yields_in_order_and_runs_at_most_ahead_items_beyond_the_consumer(
    tmp_path, workers
):
    with ProcessStream(_mark_then_add, shared=str(tmp_path), workers=workers, ahead=3) as f:
        results = f(range(8))
        assert next(results) == 100  # the slow first item, though later ones finish first
        # submitted before the first result was consumed: at most `ahead` (1 here: lazily)
        assert len(list(tmp_path.glob("started-*"))) <= (3 if workers > 1 else 1)
        assert list(results) == [101, 102, 103, 104, 105, 106, 107]
        assert list(f([7, 3])) == [107, 103]  # the workers serve later calls too
    assert len(list(tmp_path.glob("started-*"))) == 8


def test_an_error_in_a_stream_is_raised_where_its_result_is_consumed():
    with ProcessStream(operator.truediv, shared=1.0, workers=2) as f:
        results = f([1, 0, 2])
        assert next(results) == 1.0
        with pytest.raises(ZeroDivisionError):
            next(results)


def test_one_worker_per_core_on_the_cpu_and_one_on_a_gpu():
    assert default_workers("cuda") == default_workers("cuda:1") == 1
    assert default_workers("cpu") == usable_cores() >= 1


def _stamp(folder, item):
    """Write ``item``'s marker after checking that the markers it waits for exist."""
    name, after = item
    missing = [a for a in after if not (folder / a).is_file()]
    if missing:
        raise AssertionError(f"{name} started before {missing}")
    (folder / name).write_text(name)
    return name.upper()


def _graph(after: dict[str, tuple[str, ...]], cost: dict[str, float]) -> dict[str, Task]:
    return {k: Task((k, deps), deps, cost[k]) for k, deps in after.items()}


def test_critical_paths_are_hand_computed():
    # a -> b -> d, a -> c; e alone
    tasks = _graph(
        {"a": (), "b": ("a",), "c": ("a",), "d": ("b",), "e": ()},
        {"a": 1, "b": 5, "c": 2, "d": 3, "e": 4},
    )
    assert critical_paths(tasks) == {"a": 9, "b": 8, "c": 2, "d": 3, "e": 4}
    # ready first: a (9) over e (4); then b (8) over e and c; d (3) waits for b, e (4) first
    assert graph_order(tasks) == ["a", "b", "e", "d", "c"]
    ties = _graph({"x": (), "y": (), "z": ()}, {"x": 1, "y": 1, "z": 1})
    assert graph_order(ties) == ["x", "y", "z"]  # equal paths: the given order


def test_unknown_dependencies_and_cycles_are_errors():
    with pytest.raises(ValueError, match="task 'b' waits for 'q', which is not a task"):
        critical_paths(_graph({"a": (), "b": ("q",)}, {"a": 1, "b": 1}))
    with pytest.raises(ValueError, match="cycle"):
        run_graph(_stamp, _graph({"a": ("b",), "b": ("a",)}, {"a": 1, "b": 1}), shared=None)


@pytest.mark.parametrize("workers", [1, 2])
def test_every_task_runs_once_after_the_tasks_it_waits_for(tmp_path, workers):
    after = {"s0": (), "long": (), "p0": ("s0",), "p1": ("s0",), "f0": ("p0",), "f1": ("p1",),
             "both": ("f0", "f1", "long")}  # fmt: skip
    tasks = _graph(after, dict.fromkeys(after, 1.0) | {"long": 10.0})
    results = run_graph(_stamp, tasks, shared=tmp_path, workers=workers)
    assert list(results.items()) == [(k, k.upper()) for k in after]  # in the order of the tasks
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(after)


def test_an_error_in_a_graph_task_is_raised_and_its_dependents_never_start(tmp_path):
    tasks = _graph({"a": (), "b": ("a",)}, {"a": 1, "b": 1})
    (tmp_path / "a").mkdir()  # a's marker cannot be written: a fails
    with pytest.raises(IsADirectoryError):
        run_graph(_stamp, tasks | {"c": Task(("c", ()), ())}, shared=tmp_path, workers=2)
    assert not (tmp_path / "b").exists()


# ----------------------------------------------------------------------------- train_graph


_LOADS: list[str] = []


def _load_offset(source: int) -> dict[str, int]:
    """A 'corpus' loaded from ``source``; each load leaves a trace in this process."""
    _LOADS.append(f"load {source}")
    return {"offset": source, "loads": len(_LOADS)}


def _train(config: int, data: dict[str, int] | None = None, times: int = 1) -> tuple[int, int]:
    """A 'run': its config times ``times`` plus the data's offset, and the worker's load count."""
    if data is None:
        return config * times, 0
    return config * times + data["offset"], data["loads"]


@pytest.mark.parametrize("workers", [1, 2])
def test_train_graph_gives_every_job_the_data_or_its_loaders_result(workers):
    tasks = {
        "a": Task(Job(_train, 1, {"times": 3})),
        "b": Task(Job(_train, 2), after=("a",)),
        "c": Task(Job(_train, 5), cost=10.0),
    }
    data = _load_offset(100)
    here = train_graph(tasks, workers=workers, data=data, load=_load_offset, source=100)
    assert {k: v[0] for k, v in here.items()} == {"a": 103, "b": 102, "c": 105}
    assert list(here) == ["a", "b", "c"]  # in the order of the tasks
    # In workers, the loader ran once per worker process, never once per job.
    assert all(v[1] == 1 for v in here.values()) or workers == 1
    sent = train_graph(tasks, workers=workers, data=data)  # no loader: the data itself
    assert {k: v[0] for k, v in sent.items()} == {"a": 103, "b": 102, "c": 105}
    assert train_graph(tasks, workers=workers) == {"a": (3, 0), "b": (2, 0), "c": (5, 0)}


def test_side_by_side_workers_share_the_cores_by_threads(monkeypatch):
    monkeypatch.setattr("audiorepro.parallel.usable_cores", lambda: 8)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert side_by_side_workers(1, "cpu") == 8
    assert side_by_side_workers(3, "cpu") == 2
    assert side_by_side_workers(16, "cpu") == 1
    assert side_by_side_workers(None, "cpu") == 1  # threads not set: torch takes every core
    assert side_by_side_workers(1, "cuda") == 1
    monkeypatch.setenv("WORLD_SIZE", "2")  # accelerate launch: one run over all processes
    assert side_by_side_workers(1, "cpu") == 1


def _train_model(config: int, data: None = None) -> Any:
    """A 'run' that returns its trained model: a module of many small tensors."""
    import torch

    torch.manual_seed(config)
    return torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(100)])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_job_hands_back_plain_data_and_never_a_model(workers):
    # A trained model stays in the run store. Sent back from a worker it cost a copy of all it
    # referenced (the book's chapter 01 ran out of memory) or, shared by file descriptor, broke
    # the pool now and then ("received 0 items of ancdata").
    tasks = {seed: Task(Job(_train_model, seed)) for seed in range(3)}
    assert train_graph(tasks, workers=workers) == {0: None, 1: None, 2: None}
    assert plain({"a": (1, 2.5, "x", None), "b": [True]}) == {
        "a": (1, 2.5, "x", None),
        "b": [True],
    }
    assert plain(np.int64(3)) == 3 and plain(Path("p")) == Path("p")
    assert plain((1, object())) is None and plain({"m": _train_model(0)}) is None


def _embed(shared: int, item: int) -> Any:
    """A 'chunk of embeddings': a tensor computed in the worker."""
    import torch

    return torch.full((3, 4), float(shared + item))


def test_tensors_come_back_by_value_from_map_processes_and_streams():
    import torch

    got = map_processes(_embed, range(5), shared=10, workers=2)
    assert [float(t[0, 0]) for t in got] == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert not any(t.is_shared() for t in got)
    stream = ProcessStream(_embed, shared=1, workers=2)
    try:
        streamed = list(stream(range(3)))
    finally:
        stream.close()
    assert all(torch.equal(t, torch.full((3, 4), 1.0 + i)) for i, t in enumerate(streamed))
    assert not any(t.is_shared() for t in streamed)
