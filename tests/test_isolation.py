"""The test session writes nothing into the checkout, from module fixtures either."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from audiorepro.paths import data_dir, results_dir, runs_dir

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def folders_seen_by_a_module_fixture() -> dict[str, Path]:
    return {"data": data_dir(), "results": results_dir(), "runs": runs_dir()}


def test_module_fixtures_write_outside_the_checkout(folders_seen_by_a_module_fixture):
    for name, folder in folders_seen_by_a_module_fixture.items():
        folder = folder.resolve()
        assert folder != REPO and REPO not in folder.parents, (name, folder)


def test_test_workers_share_the_cores_unless_the_caller_chose(monkeypatch):
    import conftest
    from audiorepro.parallel import usable_cores

    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    conftest._share_cores_between_workers()
    assert not any(name in os.environ for name in names)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    conftest._share_cores_between_workers()
    share = str(max(1, usable_cores() // 2))
    assert [os.environ[n] for n in names] == ["7", share, share]
