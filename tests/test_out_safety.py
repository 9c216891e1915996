"""Where a command writes, checked at its start (sweep 2, F4, F6, F8).

- Two commands writing one ``--out`` at once: the second is refused at its start, naming the
  first (command, process id, since when), instead of replacing the first one's output when it
  ends; the lock (``.<name>.lock`` beside ``--out``) goes with the process, so one left by a
  killed command is taken over.
- An ``--out`` that cannot be written is said before any audio is read or any training runs,
  naming the ``--out`` given and its folder, never a temporary path; an error during the final
  write names ``--out`` too.
- A feature cache that cannot be written says what it is and which variable moves it.

A root user writes every folder, hence ``os.access`` stands in for a folder that refuses.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_cli_safety import one_paragraph, run_cli

from audiorepro import storage
from audiorepro.outputs import LOCK_SUFFIX, OutputBusy, output_lock

SMOKE = ("--preset", "smoke", "--set", "train.max_steps=2", "--set", "train.segment_frames=32")


@pytest.fixture
def audio(tmp_path, monkeypatch):
    return noise_folder(tmp_path, monkeypatch)


def noise_folder(tmp_path, monkeypatch):
    """Two speakers, two noise files each (1 s, 16 kHz); the run store under ``tmp_path``."""
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    folder = tmp_path / "audio"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for speaker in ("ann", "bob"):
        for k in range(2):
            wav = 0.1 * rng.standard_normal(16000).astype(np.float32)
            sf.write(folder / f"{speaker}_{k}.wav", wav, 16000, subtype="PCM_16")
    return folder


def lock_of(out: Path) -> Path:
    return out.absolute().parent / f".{out.name}{LOCK_SUFFIX}"


def no_work(monkeypatch) -> None:
    """Make opening audio (and so any training) fail the test."""

    def opened(*args, **kwargs):
        raise AssertionError("audio was read")

    monkeypatch.setattr(sf, "SoundFile", opened)
    monkeypatch.setattr(sf, "read", opened)
    monkeypatch.setattr(sf, "info", opened)


def deny(monkeypatch, *folders: Path) -> None:
    """``os.access`` says ``folders`` may not be written (a root user writes them all)."""
    refused = {f.absolute() for f in folders}
    access = os.access

    def fake(path, mode, *args, **kwargs):
        if mode & os.W_OK and Path(path).absolute() in refused:
            return False
        return access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", fake)


# ------------------------------------------------------------------ F4: one command per --out


def test_a_second_command_into_the_same_out_is_refused_at_its_start(
    audio, tmp_path, capsys, monkeypatch
):
    """The lock held here stands for a first ``units train`` still running (flock is per open
    file: this one conflicts with the command's own, in one process as in two)."""
    out = tmp_path / "conc"
    lock = lock_of(out)
    note = {"command": "units train", "pid": 4242, "since": time.time() - 60}
    with open(lock, "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        held.write(json.dumps(note).encode())
        held.flush()
        no_work(monkeypatch)
        code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", out)
        assert code == 1 and one_paragraph(err), err
        assert err.startswith(
            f"audiorepro: error: {out}: another audiorepro command is writing this folder "
            "(`units train`, pid 4242, since "
        )
        assert "wait for it to end, or give another --out" in err
        assert not out.exists() and lock.exists()  # the first command's lock is left alone
        table = tmp_path / "seg.tsv"
        with open(lock_of(table), "a+b") as other:
            fcntl.flock(other.fileno(), fcntl.LOCK_EX)
            code, _, err = run_cli(capsys, "segments", "--audio", audio, "--out", table)
        assert code == 1 and "another audiorepro command is writing this file" in err, err
        assert not table.exists()


def test_two_processes_one_out_and_a_lock_left_by_a_killed_one_is_taken_over(
    audio, tmp_path, capsys
):
    """A first process holds the lock, as a running command does; once it is killed, its lock
    file stays behind, and the next command takes it over and removes it when done."""
    out = tmp_path / "run"
    lock = lock_of(out)
    hold = (
        "import fcntl, json, os, sys, time\n"
        "f = open(sys.argv[1], 'a+b')\n"
        "fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n"
        "f.write(json.dumps({'command': 'units train', 'pid': os.getpid(),"
        " 'since': time.time()}).encode()); f.flush()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    first = subprocess.Popen([sys.executable, "-c", hold, str(lock)], stdout=subprocess.PIPE)
    try:
        assert first.stdout.readline().strip() == b"held"
        code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", out)
        assert code == 1 and f"pid {first.pid}, since" in err, err
        assert not out.exists()
    finally:
        first.kill()
        first.wait()
    assert lock.exists()  # left by the killed command
    code, out_text, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", out)
    assert code == 0, err
    assert (out / "model.safetensors").is_file()
    assert not lock.exists()


def test_the_lock_goes_when_the_command_ends_and_takes_no_new_folder_with_it(
    audio, tmp_path, capsys, monkeypatch
):
    from audiorepro.experiments.zerospeech import ensemble

    out = tmp_path / "new" / "deeper" / "run"

    def boom(*args, **kwargs):
        assert lock_of(out).is_file()  # held while the command works
        raise ValueError("boom")

    monkeypatch.setattr(ensemble, "train_units_ensemble", boom)
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", out)
    assert code == 1 and "boom" in err
    assert not (tmp_path / "new").exists()  # neither the lock nor the folders made for it
    monkeypatch.undo()
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    for argv in (
        ("units", "train", "--audio", audio, *SMOKE, "--out", out),
        ("segments", "--audio", audio, "--out", tmp_path / "seg.tsv"),
        ("abx", "items", "--segments", tmp_path / "seg.tsv", "--out", tmp_path / "w.item"),
    ):
        code, _, err = run_cli(capsys, *argv)
        assert code == 0, err
    left = [p.name for p in tmp_path.rglob(f"*{LOCK_SUFFIX}")]
    assert left == []


def test_a_table_written_into_the_audio_folder_leaves_no_lock_there(audio, capsys):
    """A lock file inside the folder the command lists would be named as one of its files:
    there the place is checked and nothing stays (a table beside its audio is allowed)."""
    code, out, err = run_cli(capsys, "segments", "--audio", audio, "--out", audio / "seg.tsv")
    assert code == 0, err
    assert LOCK_SUFFIX not in out
    assert sorted(p.name for p in audio.iterdir() if p.name.startswith(".")) == []


def test_output_lock_refuses_while_held_and_names_the_holder(tmp_path):
    out = tmp_path / "o"
    with output_lock(out, command="units encode", folder=True):
        with pytest.raises(OutputBusy, match=r"o: another audiorepro command .*`units encode`"):
            with output_lock(out, command="units encode", folder=True):
                pass
        assert lock_of(out).is_file()
    assert not lock_of(out).exists()
    with output_lock(out, command="units encode", folder=True):  # free again
        pass


# ------------------------------------------------------- F6: an --out that cannot be written


@pytest.mark.parametrize("deeper", [False, True], ids=["new-folder", "new-folders-under-it"])
def test_an_out_in_a_folder_that_refuses_is_said_before_any_work(
    audio, tmp_path, capsys, monkeypatch, deeper
):
    ro = tmp_path / "ro"
    ro.mkdir()
    deny(monkeypatch, ro)
    no_work(monkeypatch)
    out = ro / "a" / "run" if deeper else ro / "run"
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", out)
    assert code == 1 and one_paragraph(err), err
    assert err.startswith(
        f"audiorepro: error: {out}: --out cannot be written: its folder {ro} is not writable"
    )
    assert "nothing was read or written" in err and "Give an --out in a folder you can" in err
    assert ".tmp" not in err
    assert sorted(os.listdir(ro)) == []


def test_every_writing_command_checks_its_out_first(audio, tmp_path, capsys, monkeypatch):
    table = tmp_path / "seg.tsv"
    assert run_cli(capsys, "segments", "--audio", audio, "--out", table)[0] == 0
    ro = tmp_path / "ro"
    ro.mkdir()
    deny(monkeypatch, ro)
    for argv in (
        ("segments", "--audio", audio, "--out", ro / "x.tsv"),
        ("abx", "items", "--segments", table, "--out", ro / "w.item"),
        ("awe", "train", "--segments", table, "--lexicon", "characters", *SMOKE[:2],
         "--out", ro / "awe"),
        ("awe", "embed", tmp_path / "no-run", "--segments", table, "--out", ro / "e.npz"),
    ):  # fmt: skip
        code, _, err = run_cli(capsys, *argv)
        assert code == 1 and one_paragraph(err), err
        assert f"{argv[-1]}: --out cannot be written: its folder {ro}" in err, err
    assert os.listdir(ro) == []


def test_an_existing_out_folder_that_refuses_and_one_that_is_reused(
    audio, tmp_path, capsys, monkeypatch
):
    """An earlier run folder that may not be written: a run that would write into it is
    refused at once; the same command reusing it writes nothing there and goes on."""
    out = tmp_path / "u"
    argv = ("units", "train", "--audio", audio, *SMOKE, "--out", out)
    assert run_cli(capsys, *argv)[0] == 0
    deny(monkeypatch, out)
    code, _, err = run_cli(capsys, *argv, "--force")
    assert code == 1 and f"{out}: --out cannot be written: the folder itself" in err, err
    deny(monkeypatch, out, tmp_path)
    code, text, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "reusing it" in text


def test_a_write_refused_at_the_end_names_the_out_not_a_temporary_path(
    audio, tmp_path, capsys, monkeypatch
):
    from audiorepro.experiments.zerospeech import recordings

    def refused(model, path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(recordings, "save_model_weights", refused)
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", out)
    assert code == 1 and one_paragraph(err), err
    assert err.startswith(f"audiorepro: error: {out / 'model.safetensors'}: permission denied")
    assert ".tmp" not in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ------------------------------------------------- F8: a feature cache that cannot be written


def test_a_feature_cache_that_cannot_be_written_says_what_it_is_and_how_to_move_it(
    audio, tmp_path, capsys, monkeypatch
):
    runs = tmp_path / "data" / "runs"
    monkeypatch.delenv("AUDIOREPRO_RUNS")
    monkeypatch.setenv("AUDIOREPRO_DATA", str(tmp_path / "data"))
    mkdir = Path.mkdir

    def refused(self, *args, **kwargs):
        if self.absolute().is_relative_to(runs):
            raise PermissionError(errno.EPERM, "Operation not permitted", str(self))
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refused)
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", audio, *SMOKE, "--out", tmp_path / "run"
    )
    assert code == 1 and one_paragraph(err), err
    assert "cannot write the feature cache" in err
    assert f"({runs / '03_zerospeech' / 'features'}, under AUDIOREPRO_DATA/runs)" in err
    assert "operation not permitted" in err
    assert "Set AUDIOREPRO_RUNS (or AUDIOREPRO_DATA) to a folder you can write" in err
    assert not (tmp_path / "run").exists()


def test_a_run_store_given_its_root_says_so_without_the_variables(tmp_path, monkeypatch):
    store = storage.RunStore("c", root=tmp_path / "store")

    def refused(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(storage.WriteError) as caught:
        store.cached("m", {"a": 1}, lambda folder: None, lambda r: r)
    text = str(caught.value)
    assert "the run store, where audiorepro keeps its m runs" in text
    assert "AUDIOREPRO_RUNS" not in text and "Give another root" in text
