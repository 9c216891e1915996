"""Shared fixtures: every test writes its ledger and corpora into temporary folders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from audiorepro.parallel import usable_cores  # imports neither torch nor numba

REPO = Path(__file__).resolve().parents[1]


def _share_cores_between_workers() -> None:
    """Under ``pytest -n N`` each worker (and every process it starts: page kernels, training
    workers) gets its share of the cores for torch, BLAS and numba, unless the caller chose.
    By default every worker's torch and numba take all cores, so ``make test``'s two workers ran
    four busy threads on two cores, waiting on each other (``pytest -n 2 --dist loadfile`` took
    440 s that way and 408 s with one thread each, on 2 cores). Set here, before torch or numba
    is imported."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return
    share = str(max(1, usable_cores() // workers))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(name, share)


_share_cores_between_workers()


def subprocess_timeout(seconds: float) -> float:
    """How long a test waits for a process it started before calling it hung: ``seconds`` on
    a machine the tests have to themselves, times ``AUDIOREPRO_TEST_TIMEOUT_SCALE`` where they
    share it. CI's second run of the unit tests runs at ``nice 19`` beside the book, which takes
    both cores: there a two-process training that takes 18 s alone timed out at 300 s."""
    scale = os.environ.get("AUDIOREPRO_TEST_TIMEOUT_SCALE", "1")
    try:
        factor = float(scale)
    except ValueError:
        raise ValueError(f"AUDIOREPRO_TEST_TIMEOUT_SCALE={scale!r}: expected a number") from None
    if not factor > 0:
        raise ValueError(f"AUDIOREPRO_TEST_TIMEOUT_SCALE={scale!r}: expected a number above 0")
    return seconds * factor


@pytest.fixture(scope="session")
def session_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data folder per test session, so smoke corpora are generated once and reused."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="session", autouse=True)
def _session_outputs(
    session_data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Corpora, caches, runs and the ledger of the whole session outside the checkout, set
    before any module fixture runs (a module-scoped fixture is set up before the
    function-scoped one below: two that loaded the smoke corpus used to write it, its
    log-mel and 61 cached captions into the checkout's ``data/``, where the book found them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUDIOREPRO_DATA", str(session_data_dir))
        patch.setenv("AUDIOREPRO_RESULTS", str(tmp_path_factory.mktemp("results")))
        patch.delenv("AUDIOREPRO_RUNS", raising=False)  # runs under the session's data folder
        yield


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


def espeak_word_files(
    audio: Path, words: tuple[str, ...]
) -> list[tuple[str, str, str, int, float]]:
    """Writes each of ``words`` spoken by 3 eSpeak voices at 2 rates (150, 190 words a minute)
    into ``audio`` as ``<voice>_<word><k>.wav`` at eSpeak's 22050 Hz; returns ``(file name,
    word, voice, k, seconds)`` of each, in order: the small real-format corpus of the command's
    tests."""
    import dataclasses

    import soundfile as sf

    from audiorepro.data.embedded.espeak import english_voices, synthesize_raw

    out = []
    for voice in english_voices(3, seed=0):
        for word in words:
            for k, rate in enumerate((150, 190)):
                raw = synthesize_raw(word, dataclasses.replace(voice, rate=rate))
                name = f"{voice.name}_{word}{k}.wav"
                sf.write(audio / name, raw.samples, 22050, subtype="PCM_16")
                out.append((name, word, voice.name, k, len(raw.samples) / 22050))
    return out
