"""The real speech the book ships (``book/real_speech/italian``) and the recipe that cut it from
its Debian packages (:mod:`audiorepro.data.recipes.asterisk`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiorepro.data.recipes import asterisk
from audiorepro.data.recordings import find_wavs, read_segments


def _package(root: Path, speaker: str, prompts: dict[str, np.ndarray], digits: list[str]) -> Path:
    """An extracted package tree of ``speaker`` in the real layout: 8 kHz 16-bit wavs."""
    sounds = root / asterisk.SOUNDS[speaker]
    (sounds / "digits").mkdir(parents=True)
    for name, samples in prompts.items():
        sf.write(sounds / f"{name}.wav", samples, 8000, subtype="PCM_16")
    rng = np.random.default_rng([len(digits), *map(ord, speaker)])  # each speaker's own
    for name in digits:
        sf.write(
            sounds / "digits" / f"{name}.wav", rng.integers(-3000, 3000, 800, dtype=np.int16), 8000
        )
    return root


def test_the_subset_keeps_shared_prompts_with_sound_and_every_shared_number(tmp_path):
    rng = np.random.default_rng(0)
    sound = {f"p{i:02d}": rng.integers(-2000, 2000, 400, dtype=np.int16) for i in range(20)}
    silent = {"p05": np.zeros(400, dtype=np.int16)}  # silent for one speaker: left out for both
    carlo = _package(
        tmp_path / "c", "carlo", sound | {"only-carlo": sound["p00"]}, ["1", "2", "3"]
    )
    menardi = _package(tmp_path / "m", "menardi", sound | silent, ["1", "2", "mille"])
    out = tmp_path / "out"
    counts = asterisk.write_subset({"carlo": carlo, "menardi": menardi}, out)

    kept = [n for n in sorted(sound) if n != "p05"][:: asterisk.EVERY]
    assert counts == {"prompts": len(kept), "numbers": 2}
    for speaker in ("carlo", "menardi"):
        assert sorted(p.stem for p in (out / "prompts" / speaker).glob("*.flac")) == kept
        for name in kept:  # lossless: the package's samples, bit for bit
            samples, rate = sf.read(out / "prompts" / speaker / f"{name}.flac", dtype="int16")
            original = silent.get(name, sound[name]) if speaker == "menardi" else sound[name]
            assert rate == 8000 and np.array_equal(samples, original)
    rows = read_segments(out / "numbers.tsv")
    assert sorted((r.word, r.speaker) for r in rows) == sorted(
        (w, s) for w in ("1", "2") for s in ("carlo", "menardi")
    )
    assert all(r.start is None and r.end is None for r in rows)


def test_a_missing_package_tree_is_named(tmp_path):
    carlo = _package(tmp_path / "c", "carlo", {}, ["1"])
    with pytest.raises(FileNotFoundError, match="menardi"):
        asterisk.write_subset({"carlo": carlo, "menardi": tmp_path / "nothing"}, tmp_path / "out")


def test_the_shipped_folder_is_what_the_pages_expect():
    folder = asterisk.italian_folder()
    rows = read_segments(folder / "numbers.tsv")
    speakers = {"carlo", "menardi"}
    assert {r.speaker for r in rows} == speakers
    words = {s: sorted(r.word for r in rows if r.speaker == s) for s in speakers}
    assert words["carlo"] == words["menardi"] and len(words["carlo"]) == 119
    prompts = find_wavs(folder / "prompts")
    assert len(prompts) == 2 * 37
    assert {p.parent.name for p in prompts.values()} == speakers
    assert all(sf.info(p).samplerate == 8000 for p in prompts.values())
    for name in ("README.md", "copyright.asterisk-core-sounds-it-wav",
                 "copyright.asterisk-prompt-it-menardi-wav"):  # fmt: skip
        assert (folder.parent / name).is_file(), name


def test_the_chapter_runs_the_commands_path_on_the_shipped_speech(tmp_path, capsys):
    """``zs.units_on_real_speech`` gives the numbers the four commands give on the same folder
    (smoke preset, one seed), and its lines are what ``abx score`` prints."""
    from audiorepro.cli import main
    from audiorepro.experiments.zerospeech.real_speech import units_on_real_speech

    run = units_on_real_speech("smoke", 0, tmp_path / "page")
    folder, cli = asterisk.italian_folder(), tmp_path / "cli"
    commands = [
        ("abx", "items", "--segments", folder / "numbers.tsv", "--audio", folder / "numbers",
         "--out", cli / "numbers.item"),
        ("units", "train", "--audio", folder / "prompts", "--speaker-of", "parent",
         "--preset", "smoke", "--set", "seed=0", "--out", cli / "run"),
        ("units", "encode", cli / "run", "--audio", folder / "numbers", "--speaker-of",
         "parent", "--out", cli / "units"),
    ]  # fmt: skip
    for argv in commands:
        assert main([str(a) for a in argv]) == 0, argv
    capsys.readouterr()
    assert main(["abx", "score", str(cli / "numbers.item"), str(cli / "units")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == run.lines[4:]  # the table and the verdict, number for number
    assert run.lines[1].startswith("feature normalisation: speaker, for recordings of 2 ")
    assert run.lines[2].startswith("training pairs: nearest, for recordings of 2 speakers")
    assert "\npairs: " in run.lines[2] and "mutual DTW nearest neighbours" in run.lines[2]
    assert "train.max_steps" in run.lines[3]
    assert [r.what for r in run.rows] == ["vectors", "kmeans", "frames"]
    assert all(0 <= r.error <= 100 for r in run.rows)
    assert run.error("vectors") == run.rows[0].error


def test_the_number_words_split_by_word_and_keep_both_speakers_together(tmp_path):
    from audiorepro.experiments.awe import real_speech

    tables = real_speech.number_word_tables(tmp_path)
    rows = {split: read_segments(table) for split, table in tables.items()}
    words = {split: {r.word for r in rs} for split, rs in rows.items()}
    assert sum(len(w) for w in words.values()) == 119
    assert not (words["train"] & words["dev"] or words["train"] & words["test"]
                or words["dev"] & words["test"])  # fmt: skip
    assert (len(words["test"]), len(words["dev"])) == (40, 20)
    for split, rs in rows.items():  # every word twice: once by each speaker
        assert sorted((r.word, r.speaker) for r in rs) == sorted(
            (w, s) for w in words[split] for s in ("carlo", "menardi")
        ), split


def test_the_chapter_runs_the_awe_commands_path_on_the_shipped_words(tmp_path, capsys):
    """``awe.awe_on_real_speech`` prints what ``awe ap`` prints of the same run's test words."""
    from audiorepro.cli import main
    from audiorepro.experiments.awe.real_speech import awe_on_real_speech

    run = awe_on_real_speech("smoke", 0, tmp_path)
    capsys.readouterr()
    assert main(["awe", "ap", str(tmp_path / "test-seed0.npz")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1:] == run.lines[5:]  # after the word rule: the table and the verdict
    assert run.lines[2].startswith("feature normalisation: per speaker (2 speakers, at least ")
    assert run.lines[3] == "epochs: at most 1 (the preset's train.num_epochs)"  # no table_steps
    assert run.lines[0].startswith("training rows: 118 and ")
    assert run.baseline["num_pairs"] == 80 * 79 // 2
    assert run.baseline["chance"] == pytest.approx(40 / (80 * 79 // 2))
    assert 0 <= run.ap <= 1


def test_units_train_trains_for_its_step_budget_whatever_the_amount_of_audio(tmp_path, capsys):
    """On a few files the preset's epochs would end training after a step or two: the command
    trains for train.max_steps unless train.num_epochs is given, and says which limit ended
    training, with the numbers."""
    import shutil

    from audiorepro.cli import main
    from audiorepro.experiments import zerospeech as zs
    from audiorepro.experiments.zerospeech.recordings import step_budget

    few = tmp_path / "few"
    for speaker in ("carlo", "menardi"):
        (few / speaker).mkdir(parents=True)
        for path in sorted((asterisk.italian_folder() / "prompts" / speaker).glob("*"))[:2]:
            shutil.copy(path, few / speaker / path.name)
    base = ["units", "train", "--audio", str(few), "--speaker-of", "parent", "--preset",
            "smoke"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "budget")]) == 0  # smoke: 1 epoch, 3 steps
    printed = capsys.readouterr().out
    assert "6 steps: train.max_steps, the step budget" in printed  # smoke's 3, twice: pairs
    assert "for 6 steps (2 x the preset's)" in printed
    recorded = json.loads((tmp_path / "budget" / "run.json").read_text())["config"]["train"]
    assert recorded["num_epochs"] == recorded["max_steps"] == 6  # the epochs lifted, recorded
    sets = ["--set", "train.num_epochs=1", "--set", "train.max_steps=1000"]
    assert main([*base, *sets, "--out", str(tmp_path / "epochs")]) == 0
    out = capsys.readouterr().out
    assert "train.num_epochs = 1 epochs over these files" in out
    assert "before train.max_steps = 1000" in out

    cfg = zs.load_config("embedded")
    assert step_budget(cfg, {}).train.num_epochs == cfg.train.max_steps == 1200
    for given in ({"train.num_epochs": 2}, {"train": {"num_epochs": 2}}):
        assert step_budget(zs.load_config("embedded", given), given).train.num_epochs == 2


def test_units_train_normalises_per_speaker_when_speakers_have_audio_to_normalise_by():
    """Two or more speakers with 10 s each: per-speaker normalisation, said with why; one
    speaker, a speaker with too little audio, or the user's own setting: the preset's or
    theirs, said with why."""
    from audiorepro.experiments import zerospeech as zs
    from audiorepro.experiments.zerospeech.recordings import feature_norm_default

    cfg = zs.load_config("embedded")
    assert cfg.model.feature_norm == "none"
    speakers = {"a1": "a", "a2": "a", "b1": "b"}
    frames = {"a1": 600, "a2": 400, "b1": 1000}  # 10 s each
    chosen, why = feature_norm_default(cfg, {}, speakers, frames, "parent")
    assert chosen.model.feature_norm == "speaker"
    assert why.startswith("feature normalisation: speaker, for recordings of 2 speakers")
    assert "--speaker-of parent, at least 10 s each" in why
    assert "--set model.feature_norm=none for the preset's" in why

    chosen, why = feature_norm_default(cfg, {}, speakers, frames | {"b1": 999}, "parent")
    assert chosen.model.feature_norm == "none"
    assert "1 of 2 speakers (--speaker-of parent) have less than 10 s" in why
    assert "(first: b, 9.99 s)" in why

    chosen, why = feature_norm_default(cfg, {}, {"a1": "a"}, {"a1": 5000}, "prefix")
    assert chosen.model.feature_norm == "none" and "one speaker's (--speaker-of prefix)" in why

    for given in ({"model.feature_norm": "none"}, {"model": {"feature_norm": "utterance"}}):
        mine = zs.load_config("embedded", given)
        chosen, why = feature_norm_default(mine, given, speakers, frames, "parent")
        assert chosen is mine and why.endswith("(--set model.feature_norm)")
