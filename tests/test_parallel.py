"""Runs side by side: results in order, in this process or in spawned workers, errors raised."""

from __future__ import annotations

import operator

import pytest

from audiorepro.parallel import default_workers, map_processes, usable_cores


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_back_in_the_order_of_the_items(workers):
    assert map_processes(operator.add, [1, 2, 3], shared=10, workers=workers) == [11, 12, 13]


def test_an_error_in_a_worker_is_raised_here():
    with pytest.raises(ZeroDivisionError):
        map_processes(operator.truediv, [1, 0, 2], shared=1.0, workers=2)


def test_one_worker_per_core_on_the_cpu_and_one_on_a_gpu():
    assert default_workers("cuda") == default_workers("cuda:1") == 1
    assert default_workers("cpu") == usable_cores() >= 1
