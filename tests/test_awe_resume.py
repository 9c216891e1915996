"""``awe train`` interrupted (Ctrl-C, a killed job) continues from its last checkpoint when the
same command runs again, in the development training or in the refit, and ends with the
weights of a run never interrupted."""

from __future__ import annotations

import hashlib

import pytest
from test_cli_safety import run_cli
from test_units_resume import Steps

from audiorepro.experiments.awe import recordings
from conftest import espeak_word_files

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.metrics.checks.ScoreWarning")

HEADER = "path\tword\tspeaker\tstart\tend\n"
# one step an epoch (smoke); the last epoch's weights and no decay, so the refit trains 4
ARGS = ("--preset", "smoke", "--set", "train.num_epochs=4", "--set", "select=final",
        "--set", "train.patience=10",
        "--speeds", "1", "--warps", "1")  # fmt: skip


FIT, REFIT = recordings.fit, recordings.refit


def spied(monkeypatch, development: Steps, again: Steps) -> None:
    monkeypatch.setattr(recordings, "fit", lambda *a, **k: FIT(*a, **k, callbacks=[development]))
    monkeypatch.setattr(recordings, "refit", lambda *a, **k: REFIT(*a, **k, callbacks=[again]))


def digests(run) -> list[str]:
    return [
        hashlib.sha256((run / name).read_bytes()).hexdigest()
        for name in ("model.safetensors", "final.safetensors")
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    (root / "audio").mkdir()
    rows = [
        f"audio/{name}\t{word}\t{voice}\t\t\n"
        for name, word, voice, _, _ in espeak_word_files(root / "audio", ("garden", "yellow"))
    ]
    (root / "seg.tsv").write_text(HEADER + "".join(rows))
    return root / "seg.tsv"


def staged(runs) -> list:
    kind = runs / "04_awe" / "awe-train"
    return [p for p in kind.iterdir() if p.name.startswith(".staging")] if kind.is_dir() else []


@pytest.mark.parametrize("where", ["development", "refit"])
def test_an_interrupted_awe_train_continues_where_it_stopped(
    table, tmp_path, monkeypatch, capsys, where
):
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    whole = Steps(), Steps()
    spied(monkeypatch, *whole)
    code, _, err = run_cli(capsys, "awe", "train", "--segments", table, *ARGS,
                           "--out", tmp_path / "whole")  # fmt: skip
    assert code == 0, err
    assert [s.seen for s in whole] == [[1, 2, 3, 4], [1, 2, 3, 4]]
    assert staged(tmp_path / "runs") == []  # removed once --out is written

    cut = (Steps(stop=3), Steps()) if where == "development" else (Steps(), Steps(stop=3))
    spied(monkeypatch, *cut)
    code, _, err = run_cli(capsys, "awe", "train", "--segments", table, *ARGS,
                           "--out", tmp_path / "run")  # fmt: skip
    assert code == 130, err
    assert "the same command again continues from the last checkpoint (every epoch)" in err
    assert not (tmp_path / "run").exists()  # nothing half-written
    assert len(staged(tmp_path / "runs")) == 1  # kept
    again = Steps(), Steps()
    spied(monkeypatch, *again)
    code, _, err = run_cli(capsys, "awe", "train", "--segments", table, *ARGS,
                           "--out", tmp_path / "run")  # fmt: skip
    assert code == 0, err
    if where == "development":  # from the checkpoint of epoch 2, then the whole refit
        assert [s.seen for s in again] == [[3, 4], [1, 2, 3, 4]]
    else:  # the development run finished: nothing trained again; the refit from epoch 2
        assert [s.seen for s in again] == [[], [3, 4]]
    assert digests(tmp_path / "run") == digests(tmp_path / "whole")
    assert staged(tmp_path / "runs") == []
