"""``units train`` interrupted (Ctrl-C, a killed job) continues from its last checkpoint when
the same command runs again, and ends with the weights of a run never interrupted."""

from __future__ import annotations

import hashlib

import pytest
from test_cli_odd_inputs import folder
from test_cli_safety import run_cli

from audiorepro.experiments.zerospeech import recordings
from audiorepro.training.callbacks import Callback

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.metrics.checks.ScoreWarning")

STEPS = ("--preset", "smoke", "--set", "train.max_steps=12", "--set", "train.segment_frames=32")


class Steps(Callback):
    """Records the steps a run trains; raises KeyboardInterrupt after ``stop`` (as Ctrl-C)."""

    def __init__(self, stop: int | None = None) -> None:
        self.stop, self.seen = stop, []

    def on_step_end(self, trainer, step, logs):  # noqa: ANN001
        self.seen.append(step)
        if step == self.stop:
            raise KeyboardInterrupt


FIT = recordings.fit_vqvae


def trained_with(monkeypatch, spy: Steps) -> None:
    monkeypatch.setattr(recordings, "fit_vqvae", lambda *a, **k: FIT(*a, **k, callbacks=[spy]))


def digest(run) -> str:
    return hashlib.sha256((run / "model.safetensors").read_bytes()).hexdigest()


def test_an_interrupted_units_train_continues_where_it_stopped(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    audio = folder(tmp_path / "audio")
    whole = Steps()
    trained_with(monkeypatch, whole)
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *STEPS,
                           "--out", tmp_path / "whole")  # fmt: skip
    assert code == 0, err
    assert whole.seen == list(range(1, 13))
    staging = tmp_path / "runs" / "03_zerospeech" / "units-train"
    assert not [p for p in staging.iterdir() if p.name.startswith(".staging")]  # removed

    cut = Steps(stop=9)  # one epoch is 7 steps, checkpointed at its end
    trained_with(monkeypatch, cut)
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *STEPS,
                           "--out", tmp_path / "run")  # fmt: skip
    assert code == 130 and "the same command again continues from the last checkpoint" in err, err
    assert not (tmp_path / "run").exists()  # nothing half-written
    assert [p for p in staging.iterdir() if p.name.startswith(".staging")]  # kept
    again = Steps()
    trained_with(monkeypatch, again)
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *STEPS,
                           "--out", tmp_path / "run")  # fmt: skip
    assert code == 0, err
    assert again.seen == list(range(8, 13))  # from the checkpoint at step 7, not step 1
    assert digest(tmp_path / "run") == digest(tmp_path / "whole")
    assert not [p for p in staging.iterdir() if p.name.startswith(".staging")]
