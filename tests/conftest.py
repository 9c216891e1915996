"""Shared fixtures: every test writes its ledger and corpora into temporary folders."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def session_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data folder per test session, so smoke corpora are generated once and reused."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture(autouse=True)
def _isolated_outputs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, session_data_dir: Path
) -> None:
    """Keep the results ledger and corpora of tests out of the checkout."""
    monkeypatch.setenv("AUDIOREPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("AUDIOREPRO_DATA", str(session_data_dir))


class Killed(RuntimeError):
    """Stands in for a page killed mid-training (the resumption tests)."""


class KillAt:
    """A Trainer callback that raises :class:`Killed` at optimizer step ``step`` (``None``:
    never) and records every step it saw."""

    def __init__(self, step: int | None = None) -> None:
        self.kill_step, self.steps = step, []

    def on_step_end(self, trainer, step, logs) -> None:
        self.steps.append(step)
        if step == self.kill_step:
            raise Killed(f"killed at step {step}")
