"""The test session writes nothing into the checkout, from module fixtures either."""

from __future__ import annotations

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
