"""Inputs ``abx score`` and ``units encode`` refuse rather than score or encode: relative-time
items read with a frame shift, and silent or very short files read as if they were speech."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from audiorepro.cli import main
from audiorepro.data.recipes.zerospeech import ZeroSpeechFormatError
from audiorepro.data.recordings import RecordingsError
from audiorepro.features.audio import SILENT_PEAK, AudioError, load_audio
from audiorepro.metrics.abx import abx_error, item_frames

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.metrics.checks.ScoreWarning")

HEADER = "#file onset offset #phone prev-phone next-phone speaker\n"


def speech_like(seconds=0.5, rate=16000, seed=0):
    """Noise under a slow envelope: not silent, not one repeated frame."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * rng.standard_normal(t.size) * (0.6 + 0.4 * np.sin(7 * t))).astype(np.float32)


def four_files(n_frames=40, dim=3):
    """Two speakers saying two words each, ``n_frames`` frames a file (1.6 s at 40 ms)."""
    rng = np.random.default_rng(0)
    return {f"S{s}_{w}": rng.normal(size=(n_frames, dim)) for s in (1, 2) for w in "ab"}


def item_file(path, lines):
    path.write_text(HEADER + "".join(lines))
    return path


def whole_files(onset="0", offset="1"):
    return [f"S{s}_{w} {onset} {offset} {w} - - S{s}\n" for s in (1, 2) for w in "ab"]


# ----------------------------------------------------------------------------- bug 1


def test_relative_whole_file_items_with_a_frame_shift_are_refused(tmp_path):
    """``0 1`` for every item is the 2019 relative form: with a frame shift it would be the
    first second of each file (here 24 of 40 frames, past the 50 % reach check)."""
    feats = four_files()
    items = item_file(tmp_path / "x.item", whole_files())
    with pytest.raises(ZeroSpeechFormatError, match=r"x\.item:2: item S1_a 0-1: all 4 items") as e:
        abx_error(feats, items, frame_shift=0.04)
    assert "score without --frame-shift" in str(e.value)
    assert "abx items --times seconds" in str(e.value)
    assert 0.0 <= abx_error(feats, items) <= 100.0  # the 2019 rule reads them whole


def test_items_in_seconds_that_happen_to_be_0_1_still_score(tmp_path):
    feats = four_files()
    one = item_file(tmp_path / "one.item", whole_files()[:1])  # a single item: not refused
    items, frames = item_frames(feats, one, frame_shift=0.04)
    assert len(items) == 1 and frames[0].shape == (24, 3)  # [0, floor(1 / 0.04 - 0.5))
    lines = whole_files(offset="1.6")
    lines[0] = lines[0].replace(" 1.6 ", " 1 ")  # one item is 0 1 in seconds, the others not
    mixed = item_file(tmp_path / "mixed.item", lines)
    assert 0.0 <= abx_error(feats, mixed, frame_shift=0.04) <= 100.0


def test_abx_score_refuses_relative_items_with_a_frame_shift(tmp_path, capsys):
    sub = tmp_path / "sub"
    sub.mkdir()
    for name, x in four_files().items():
        (sub / f"{name}.txt").write_text("\n".join(" ".join(f"{v:.6f}" for v in r) for r in x))
    items = item_file(tmp_path / "x.item", whole_files())
    code = main(["abx", "score", str(items), str(sub), "--frame-shift", "0.04"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert f"{items}:2: item S1_a 0-1: all 4 items are onset 0, offset 1" in err
    assert main(["abx", "score", str(items), str(sub)]) == 0
    capsys.readouterr()


# ----------------------------------------------------------------------------- bug 2


def test_load_audio_refuses_a_silent_file_read_whole_as_mono(tmp_path):
    zero, quiet, low = tmp_path / "zero.wav", tmp_path / "quiet.wav", tmp_path / "low.wav"
    sf.write(zero, np.zeros(800, np.float32), 8000, subtype="PCM_16")
    square = np.sign(np.sin(np.arange(8000) / 3)).astype(np.float32)
    sf.write(quiet, 10 ** (-90 / 20) * square, 8000, subtype="FLOAT")  # below SILENT_PEAK
    sf.write(low, 10 ** (-60 / 20) * square, 8000, subtype="FLOAT")  # quiet, not silent
    with pytest.raises(AudioError, match=r"zero\.wav: silent: every sample is 0, so the file"):
        load_audio(zero, 16000)
    with pytest.raises(AudioError, match=r"quiet\.wav: silent: peak -90 dBFS, below -70 dBFS"):
        load_audio(quiet, None)
    assert load_audio(low, 16000)[0].size == 16000
    # the channels as they are (what units train judges with content_problem) and excerpts
    # (a pause inside a file) are read
    assert load_audio(zero, None, mono=False)[0].shape == (1, 800)
    assert load_audio(zero, None, offset=0.01)[0].size == 720


def test_one_silence_threshold_for_loading_and_training():
    from audiorepro.data import recordings

    assert recordings.SILENT_PEAK == SILENT_PEAK


@pytest.fixture(scope="module")
def units_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("units")
    (root / "audio").mkdir()
    for k, speaker in enumerate(("S1", "S2")):
        for i in range(2):
            sf.write(root / "audio" / f"{speaker}_{i}.wav", speech_like(seed=2 * k + i), 16000)
    code = main(
        ["units", "train", "--audio", str(root / "audio"), "--preset", "smoke", "--set",
         "train.max_steps=2", "--set", "train.segment_frames=32", "--out", str(root / "u")]
    )  # fmt: skip
    assert code == 0
    return root


def test_units_encode_refuses_silent_and_very_short_files(units_run, tmp_path, capsys):
    from audiorepro.experiments.zerospeech.recordings import unit_rows

    capsys.readouterr()
    for name, samples, why in [
        ("S1_9.wav", np.zeros(8000, np.float32), "S1_9.wav: silent: every sample is 0"),
        ("S1_8.wav", speech_like(seconds=0.001), "S1_8.wav: too short: 1 frame of 10 ms, fewer"),
    ]:
        audio = tmp_path / name
        audio.mkdir()
        sf.write(audio / "S1_0.wav", speech_like(seed=7), 16000)
        sf.write(audio / name, samples, 16000)
        code = main(["units", "encode", str(units_run / "u"), "--audio", str(audio), "--out",
                     str(tmp_path / f"sub-{name}")])  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 1 and out == "" and why in err, err
        assert not (tmp_path / f"sub-{name}").exists()
        # the input frames abx score scores as a baseline beside the units
        with pytest.raises((AudioError, RecordingsError), match=why.split(": ", 1)[1]):
            unit_rows(units_run / "u", audio, "frames")
