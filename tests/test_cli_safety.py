"""Nothing a user made is overwritten, and no traceback reaches a user (issue 38, items 3-4).

The ``audiorepro`` command writes into a new folder or file, or into its own earlier output when
the recorded inputs and settings match (then it reuses it and says so); anything else needs
``--force``, and the message names what would be replaced. Outputs never go over inputs.
Every error is one paragraph naming the file or field and what to do, exit status 1."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiorepro import pages
from audiorepro.cli import main, parse_sets
from audiorepro.config import ConfigError
from audiorepro.data.embedded.espeak import english_voices, synthesize_raw

WORDS = ("garden", "yellow", "window")
HEADER = "path\tword\tspeaker\tstart\tend\n"
SMOKE = ("--preset", "smoke", "--set", "train.max_steps=4", "--set", "train.segment_frames=32")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """3 speakers x 3 words, one eSpeak word per 22.05 kHz wav, a transcript ``<id>.txt``
    beside each, and the whole-file segments table."""
    root = tmp_path_factory.mktemp("safety")
    audio = root / "audio"
    audio.mkdir()
    rows = []
    for voice in english_voices(3, seed=0):
        for word in WORDS:
            raw = synthesize_raw(word, dataclasses.replace(voice, rate=170))
            name = f"{voice.name}_{word}"
            sf.write(audio / f"{name}.wav", raw.samples, 22050, subtype="PCM_16")
            (audio / f"{name}.txt").write_text(f"{word}\n")
            rows.append(f"audio/{name}.wav\t{word}\t{voice.name}\t\t\n")
    (root / "seg.tsv").write_text(HEADER + "".join(rows))
    return root


@pytest.fixture(scope="module")
def units_run(corpus):
    """A units run trained once for the module (4 steps of the smoke preset)."""
    code = main(["units", "train", "--audio", str(corpus / "audio"), *SMOKE, "--out",
                 str(corpus / "u")])  # fmt: skip
    assert code == 0
    return corpus / "u"


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def one_paragraph(err: str) -> bool:
    return "\n\n" not in err.strip() and err.startswith("audiorepro: error: ")


# ---------------------------------------------------------------- nothing a user made is replaced


def test_units_train_reuses_its_own_run_and_refuses_another_without_force(
    corpus, units_run, capsys
):
    model = units_run / "model.safetensors"
    stamp = model.stat().st_mtime_ns
    code, out, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", *SMOKE, "--out", units_run
    )
    assert code == 0, err
    assert "same inputs and settings" in out and "reusing" in out
    # the reused run says what it trained on, as when it was trained (run.json keeps it)
    assert "trained on 3 speakers, 9 files; left out 9: S001_garden.txt (not audio" in out
    assert model.stat().st_mtime_ns == stamp
    other = tmp = corpus / "u-other"
    shutil.copytree(units_run, tmp)
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", *SMOKE,
        "--set", "train.max_steps=5", "--out", other,
    )  # fmt: skip
    assert code == 1 and one_paragraph(err)
    assert "model.safetensors" in err and "--force" in err and "settings" in err
    # a larger codebook than the audio has code frames: no k-means file; --force removes the old
    code, out, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", *SMOKE,
        "--set", "model.codebook_size=4096", "--out", other, "--force",
    )  # fmt: skip
    assert code == 0, err
    assert "replac" in out and "kmeans.npz" in out
    assert not (other / "kmeans.npz").exists()
    assert "skipped" in json.loads((other / "run.json").read_text())["kmeans"]


def test_a_folder_of_someone_elses_files_needs_force(corpus, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", *SMOKE, "--out", mine
    )
    assert code == 1 and one_paragraph(err)
    assert "notes.txt" in err and "--force" in err and "new folder" in err


def test_units_encode_never_writes_over_or_into_its_audio_folder(corpus, units_run, capsys):
    audio = corpus / "audio"
    before = {p.name: p.read_text() for p in audio.glob("*.txt")}
    for out in (audio, audio / "units"):
        for force in ((), ("--force",)):
            code, _, err = run_cli(
                capsys, "units", "encode", units_run, "--audio", audio, "--out", out, *force
            )
            assert code == 1 and one_paragraph(err)
            assert "--audio" in err and "input" in err
    assert {p.name: p.read_text() for p in audio.glob("*.txt")} == before
    assert not (audio / "units").exists()


def test_units_encode_names_the_files_it_would_replace(corpus, units_run, tmp_path, capsys):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "S001_garden.txt").write_text("mine\n")
    args = ("units", "encode", units_run, "--audio", corpus / "audio", "--out", sub)
    code, _, err = run_cli(capsys, *args)
    assert code == 1 and "S001_garden.txt" in err and "--force" in err
    assert (sub / "S001_garden.txt").read_text() == "mine\n"
    code, out, err = run_cli(capsys, *args, "--force")
    assert code == 0, err
    assert (sub / "S001_garden.txt").read_text() != "mine\n"
    code, out, err = run_cli(capsys, *args)  # the same command again: its own output
    assert code == 0 and "reusing" in out
    code, _, err = run_cli(capsys, *args, "--what", "codes")  # other settings
    assert code == 1 and "--what" in err


def test_file_outputs_are_never_replaced_without_force_nor_written_over_inputs(
    corpus, tmp_path, capsys
):
    seg = tmp_path / "seg.tsv"
    seg.write_text("mine\n")
    code, _, err = run_cli(capsys, "segments", "--audio", corpus / "audio", "--out", seg)
    assert code == 1 and one_paragraph(err) and "seg.tsv" in err and "--force" in err
    assert seg.read_text() == "mine\n"
    code, _, err = run_cli(
        capsys, "segments", "--audio", corpus / "audio", "--out", seg, "--force"
    )
    assert code == 0, err
    assert seg.read_text().startswith("path\tword")
    items = corpus / "seg.tsv"
    text = items.read_text()
    for force in ((), ("--force",)):
        code, _, err = run_cli(capsys, "abx", "items", "--segments", items, "--out", items, *force)
        assert code == 1 and "--segments" in err
    wav = corpus / "audio" / "S001_garden.wav"
    code, _, err = run_cli(
        capsys, "segments", "--audio", corpus / "audio", "--out", wav, "--force"
    )
    assert code == 1 and "--audio" in err
    assert items.read_text() == text
    code, _, err = run_cli(capsys, "abx", "items", "--segments", items, "--out", tmp_path)
    assert code == 1 and "is a folder" in err


def test_the_files_of_a_run_a_command_reads_are_never_replaced(corpus, units_run, capsys):
    """awe embed RUN --out RUN/model.safetensors --force wrote the .npz over the weights;
    units encode RUN --out RUN/run.json likewise: refused with or without --force. A new
    file or folder inside the run stays allowed, and its second run replaces it with --force."""
    run, table = corpus / "awe-run", corpus / "twice.tsv"
    rows = (corpus / "seg.tsv").read_text().splitlines()[1:]
    (corpus / "twice").mkdir()
    for row in rows:  # two tokens of every word and speaker: its file, and a quieter copy
        name = row.split("\t")[0]
        shutil.copy(corpus / name, corpus / "twice" / Path(name).name)
        samples, rate = sf.read(corpus / name)  # not the same bytes: two recordings
        sf.write(
            corpus / "twice" / Path(name.replace(".wav", "_again.wav")).name, 0.5 * samples, rate
        )
    twice = [r.replace("audio/", "twice/") for r in rows]
    twice += [r.replace(".wav", "_again.wav") for r in twice]
    table.write_text(HEADER + "".join(f"{r}\n" for r in twice))
    code, _, err = run_cli(
        capsys, "awe", "train", "--segments", table, "--lexicon", "characters",
        *SMOKE[:4], "--speeds", "1", "--warps", "1", "--out", run,
    )  # fmt: skip
    assert code == 0, err
    weights = (run / "model.safetensors").read_bytes()
    for force in ((), ("--force",)):
        code, _, err = run_cli(
            capsys, "awe", "embed", run, "--segments", table,
            "--out", run / "model.safetensors", *force,
        )  # fmt: skip
        assert code == 1 and one_paragraph(err), err
        assert "model.safetensors of the RUN folder" in err
    assert (run / "model.safetensors").read_bytes() == weights
    args = ("awe", "embed", run, "--segments", table, "--out", run / "emb.npz")
    assert run_cli(capsys, *args)[0] == 0
    code, out, _ = run_cli(capsys, *args, "--force")
    assert code == 0 and f"--force: replacing {run / 'emb.npz'}" in out
    assert "(what this run does not write again is removed once it succeeds)" in out
    for inside in (units_run / "run.json", units_run / "kmeans.npz"):
        code, _, err = run_cli(
            capsys, "units", "encode", units_run, "--audio", corpus / "audio",
            "--out", inside, "--force",
        )  # fmt: skip
        assert code == 1 and "of the RUN folder" in err, err


def test_an_existing_file_given_as_the_out_folder_is_an_error(corpus, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("x")
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", *SMOKE, "--out", taken, "--force"
    )
    assert code == 1 and one_paragraph(err) and "is a file" in err and "taken" in err
    assert taken.read_text() == "x"


# ----------------------------------------------------------------------------- no traceback


def test_set_with_an_empty_value_is_an_error():
    with pytest.raises(ConfigError, match="train.max_steps.*empty"):
        parse_sets(["train.max_steps="])
    with pytest.raises(ConfigError, match="null"):
        parse_sets(["train.max_steps=null"])


def test_set_errors_name_the_field_given(corpus, tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", "--preset", "smoke",
        "--set", "train.max_steps=abc", "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and one_paragraph(err)
    assert "max_steps" in err and "num_epochs" not in err and "abc" in err
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", "--preset", "smoke",
        "--set", "train.max_steps=", "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and "train.max_steps" in err and "empty" in err
    assert not (tmp_path / "r").exists()


def test_a_non_finite_loss_says_which_setting_to_change(corpus, tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", "--preset", "smoke",
        "--set", "train.lr=1e9", "--set", "train.max_steps=20", "--set",
        "train.segment_frames=32", "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and one_paragraph(err)
    assert "non-finite" in err and "--set train.lr=" in err
    assert not (tmp_path / "r").exists()


def test_a_corrupt_checkpoint_names_the_file(corpus, units_run, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(units_run, broken)
    (broken / "model.safetensors").write_bytes(b"not a tensor file")
    code, _, err = run_cli(
        capsys, "units", "encode", broken, "--audio", corpus / "audio", "--out", tmp_path / "s"
    )
    assert code == 1 and one_paragraph(err)
    assert "model.safetensors" in err and "units train" in err


def test_an_npy_where_an_npz_is_expected(tmp_path, capsys):
    np.save(tmp_path / "emb.npy", np.ones((4, 3)))
    code, _, err = run_cli(capsys, "awe", "ap", tmp_path / "emb.npy")
    assert code == 1 and one_paragraph(err) and "emb.npy" in err and ".npz" in err


def test_file_system_errors_name_the_path(corpus, tmp_path, capsys, monkeypatch):
    from audiorepro.experiments.zerospeech import ensemble

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "r" / "run.json"))

    monkeypatch.setattr(ensemble, "train_units_ensemble", denied)
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", *SMOKE, "--out", tmp_path / "r"
    )
    assert code == 1 and one_paragraph(err)
    assert "run.json" in err and "permission denied" in err.lower()


def test_an_unexpected_error_is_one_paragraph_and_debug_shows_the_traceback(
    corpus, tmp_path, capsys, monkeypatch
):
    from audiorepro.experiments.zerospeech import ensemble

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(ensemble, "train_units_ensemble", boom)
    argv = ["units", "train", "--audio", corpus / "audio", *SMOKE, "--out", tmp_path / "r"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 1 and one_paragraph(err) and "boom" in err and "AUDIOREPRO_DEBUG" in err
    monkeypatch.setenv("AUDIOREPRO_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main([str(a) for a in argv])


# ------------------------------------------------------------------------------------ pages run

PAGE = "book/00_data/01_audio_features.py"


def test_pages_run_refuses_a_page_source_or_a_file_it_did_not_write(tmp_path, capsys):
    root = Path(__file__).resolve().parents[1]
    # copies: on a main without the check, the test must not write over the book's own pages
    source = tmp_path / "page.py"
    shutil.copy(root / PAGE, source)
    mine = tmp_path / "mine.txt"
    mine.write_text("keep")
    foreign = tmp_path / "foreign.ipynb"
    foreign.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                   "nbformat_minor": 5}))  # fmt: skip
    for out in (source, mine, foreign, tmp_path, tmp_path / "new.py", root / PAGE):
        before = out.read_bytes() if out.is_file() else None
        if out == root / PAGE:
            code = pages.main(["run", str(root / PAGE), str(out), "-p", "nonsense", "1"])
        else:
            code = pages.main(["run", str(root / PAGE), str(out), "-p", "preset", "smoke"])
        _, err = capsys.readouterr()
        assert code == 1 and "Traceback" not in err, err
        assert str(out.name) in err
        assert (out.read_bytes() if out.is_file() else None) == before
    assert not (tmp_path / "new.py").exists()


def test_pages_run_of_a_page_that_does_not_exist(tmp_path, capsys):
    code = pages.main(["run", "book/00_data/99_nothing.py", str(tmp_path / "o.ipynb")])
    _, err = capsys.readouterr()
    assert code == 1 and "99_nothing.py" in err and "pages list" in err
    code = pages.main(["script", "book/00_data/99_nothing.py"])
    _, err = capsys.readouterr()
    assert code == 1 and "99_nothing.py" in err


def test_pages_main_turns_an_unexpected_error_into_one_paragraph(tmp_path, capsys, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(pages, "execute_page", boom)
    root = Path(__file__).resolve().parents[1]
    code = pages.main(["run", str(root / PAGE), str(tmp_path / "o.ipynb")])
    _, err = capsys.readouterr()
    assert code == 1 and "boom" in err and "AUDIOREPRO_DEBUG" in err and "Traceback" not in err
    assert os.environ.get("AUDIOREPRO_DEBUG") is None
