"""``python -m audiorepro.data check`` on a tiny corpus written with soundfile."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import soundfile

from audiorepro.data.__main__ import main
from audiorepro.data.manifests import (
    Recording,
    Supervision,
    check_manifest_dir,
    find_manifests,
    write_manifest,
)
from audiorepro.data.sources import checksum, load_sources
from conftest import subprocess_timeout

SR = 16000
NUM_SAMPLES = 4000  # 0.25 s

SOURCES = """\
name: tiny
description: Four short tones.
homepage: https://example.org/tiny
licence: CC0
citation: "@misc{tiny, title={Tiny}}"
sampling_rate: 16000
files:
  - url: https://example.org/tiny/a.wav
    filename: a.wav
    sha256: SHA256
expected_counts:
  train:
    recordings: 4
    supervisions: 5
  test: {recordings: 1, supervisions: 1}
"""

HEADERS_ONLY = "; audio checked by headers only, samples not decoded (--samples decodes them)"


def tone(num_samples=NUM_SAMPLES, sr=SR):
    t = np.arange(num_samples) / sr
    return (0.1 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


@pytest.fixture
def corpus(tmp_path):
    """Audio under ``audio/``, manifests under ``manifests/`` (train: a-d, test: e), sources."""
    audio, manifests = tmp_path / "audio", tmp_path / "manifests"
    (audio / "sub").mkdir(parents=True)
    for name in "abcde":
        soundfile.write(audio / "sub" / f"{name}.wav", tone(), SR)
    recs = [Recording.from_file(audio / "sub" / f"{n}.wav", relative_to=audio) for n in "abcde"]
    assert recs[0].sources[0].source == "sub/a.wav"
    sups = [Supervision(f"{r.id}-0", r.id, 0.0, 0.25, text=f"tone {r.id}") for r in recs]
    sups.append(Supervision("a-1", "a", 0.1, 0.1))
    write_manifest(manifests / "train_recordings.jsonl.gz", recs[:4])
    write_manifest(manifests / "train_supervisions.jsonl.gz", sups[:4] + sups[5:])
    write_manifest(manifests / "test_recordings.jsonl", recs[4:])
    write_manifest(manifests / "test_supervisions.jsonl", sups[4:5])
    sources = tmp_path / "sources.yaml"
    sources.write_text(SOURCES.replace("SHA256", checksum(audio / "sub" / "a.wav")))
    sources.write_text(sources.read_text().replace("filename: a.wav", "filename: sub/a.wav"))
    return audio, manifests, sources


def test_clean_corpus_has_no_problem(corpus, capsys):
    audio, manifests, sources = corpus
    assert check_manifest_dir(manifests, audio, sources, checksums=True) == []
    argv = ["check", str(manifests), "--root", str(audio), "--sources", str(sources)]
    assert main(argv + ["--checksums"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"0 problems in {manifests} (2 splits: test, train)" + HEADERS_ONLY]


def test_every_problem_is_reported_with_its_line(corpus):
    audio, manifests, sources = corpus
    train_rec = manifests / "train_recordings.jsonl.gz"
    train_sup = manifests / "train_supervisions.jsonl.gz"
    (audio / "sub" / "b.wav").unlink()  # recordings line 2
    soundfile.write(audio / "sub" / "c.wav", tone(sr=8000), 8000)  # line 3: same samples, 8 kHz
    (audio / "sub" / "d.wav").write_bytes(b"RIFF\x00\x00 this is not a wav file")  # line 4
    sups = [
        Supervision("a-0", "a", 0.0, 0.25),
        Supervision("b-0", "b", 0.0, 0.25),
        Supervision("c-0", "c", 0.0, 0.25),
        Supervision("d-0", "d", 0.0, 0.25),
        Supervision("a-1", "a", 0.1, 0.1),
        Supervision("a-late", "a", 0.2, 0.1),  # line 6: ends at 0.3 s > 0.25 s
    ]
    write_manifest(train_sup, sups)  # 6 supervisions where sources.yaml expects 5
    (audio / "sub" / "a.wav").write_bytes((audio / "sub" / "a.wav").read_bytes() + b"\0")

    result = subprocess.run(
        [sys.executable, "-m", "audiorepro.data", "check", str(manifests), "--root", str(audio)]
        + ["--sources", str(sources), "--checksums"],
        capture_output=True,
        text=True,
        timeout=subprocess_timeout(120),
    )
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    expected_prefixes = [
        f"{train_rec}:2: sources[0].source: audio file not found: {audio / 'sub' / 'b.wav'}",
        f"{train_rec}:3: sampling_rate: manifest says 16000 Hz, {audio / 'sub' / 'c.wav'} is "
        "8000 Hz",
        f"{train_rec}:4: sources[0].source: cannot read the audio header of "
        f"{audio / 'sub' / 'd.wav'}",
        f"{train_sup}:6: duration: supervision 0.2000-0.3000 s ends after recording 'a'",
        f"{sources}:14: expected_counts.train.supervisions: expected 5 supervisions in split "
        "'train', found 6",
        f"{sources}:10: files[0].sha256: expected ",
    ]
    assert len(lines) == len(expected_prefixes) + 1, result.stdout
    for prefix in expected_prefixes:
        assert sum(line.startswith(prefix) for line in lines) == 1, (prefix, result.stdout)
    assert lines[-1] == f"6 problems in {manifests} (2 splits: test, train)" + HEADERS_ONLY


def test_malformed_lines_are_all_reported_and_the_rest_checked(corpus):
    audio, manifests, _ = corpus
    path = manifests / "test_supervisions.jsonl"
    good = path.read_text()
    path.write_text(
        good
        + '{"id": "x", "recording_id": "e", "start": "0", "duration": 1}\n'
        + "{not json\n"
        + good  # a duplicate id
        + '{"id": "y", "recording_id": "nope", "start": 0, "duration": 0.1}\n'
    )
    problems = check_manifest_dir(manifests, audio)
    assert [(p.path, p.line, p.field) for p in problems] == [
        (str(path), 2, "start"),
        (str(path), 3, "<line>"),
        (str(path), 4, "id"),
        (str(path), 5, "recording_id"),
    ]
    assert "duplicate supervision id 'e-0' (first on line 1)" in problems[2].message


def test_counts_and_corpus_rate_against_sources(corpus):
    audio, manifests, sources = corpus
    (manifests / "test_recordings.jsonl").unlink()
    (manifests / "test_supervisions.jsonl").rename(manifests / "dev_supervisions.jsonl")
    text = sources.read_text().replace("sampling_rate: 16000", "sampling_rate: 44100")
    sources.write_text(text)
    problems = check_manifest_dir(manifests, audio, sources)
    assert [(p.path, p.line, p.field) for p in problems] == [
        (str(manifests / "dev_supervisions.jsonl"), None, "recordings"),
        *[
            (str(manifests / "train_recordings.jsonl.gz"), i, "sampling_rate")
            for i in (1, 2, 3, 4)
        ],
        (str(sources), 15, "expected_counts.test.recordings"),
        (str(sources), 15, "expected_counts.test.supervisions"),
        (str(sources), 11, "expected_counts"),
    ]
    assert "expected the corpus rate 44100 Hz" in problems[1].message
    assert problems[-1].message.startswith("no expected counts for split 'dev'")


def test_header_mismatches(corpus):
    audio, manifests, _ = corpus
    soundfile.write(audio / "sub" / "e.wav", np.zeros((NUM_SAMPLES + 1, 2), np.float32), SR)
    problems = check_manifest_dir(manifests, audio)
    path = str(manifests / "test_recordings.jsonl")
    assert [(p.path, p.line, p.field) for p in problems] == [
        (path, 1, "num_samples"),
        (path, 1, "sources[0].channels"),
    ]
    assert problems[0].message.endswith(f"has {NUM_SAMPLES + 1}")
    assert problems[1].message.startswith("manifest lists 1 channel(s) [0],")


def test_manifest_naming_rule(tmp_path):
    for name in [
        "train_recordings.jsonl.gz",
        "dev-clean_supervisions.jsonl",
        "dev-clean_recordings.jsonl",
        "train_recordings.jsonl",  # same split and kind as the .gz
        "recordings.jsonl",  # no split
        "notes.txt",
        "other.jsonl",
    ]:
        (tmp_path / name).write_text("")
    problems = []
    found = find_manifests(tmp_path, problems)
    assert found == {
        "dev-clean": {
            "recordings": tmp_path / "dev-clean_recordings.jsonl",
            "supervisions": tmp_path / "dev-clean_supervisions.jsonl",
        },
        "train": {"recordings": tmp_path / "train_recordings.jsonl"},
    }
    assert [(p.path, p.field) for p in problems] == [
        (str(tmp_path / "recordings.jsonl"), "name"),
        (str(tmp_path / "train_recordings.jsonl.gz"), "name"),
    ]


def test_usage_errors_exit_2(corpus, tmp_path, capsys):
    audio, manifests, sources = corpus
    bad = tmp_path / "bad.yaml"
    bad.write_text(sources.read_text().replace("licence:", "license:"))
    for argv, message in [
        (["check", str(tmp_path / "nope"), "--root", str(audio)], "not a directory"),
        (["check", str(manifests), "--root", str(audio), "--checksums"], "needs --sources"),
        (["check", str(manifests), "--root", str(audio), "--sources", str(bad)], "bad.yaml:4"),
        (["check", str(manifests)], "--root"),
    ]:
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        assert message in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["check", str(empty), "--root", str(audio)]) == 1
    assert "manifests: no <split>_recordings" in capsys.readouterr().out
    assert load_sources(sources).files[0].filename == "sub/a.wav"


def test_samples_flag_decodes_every_file_and_names_non_finite_samples(corpus, capsys):
    audio, manifests, _ = corpus
    bad = tone()
    bad[100:110] = np.nan
    bad[200] = np.inf
    soundfile.write(audio / "sub" / "b.wav", bad, SR, subtype="FLOAT")
    argv = ["check", str(manifests), "--root", str(audio)]
    # The header is valid, so a headers-only check passes and says what it did not look at.
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(HEADERS_ONLY)
    assert main(argv + ["--samples"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"{manifests / 'train_recordings.jsonl.gz'}:2: sources[0].samples: "
        f"{audio / 'sub' / 'b.wav'}: 11 non-finite (NaN or inf) sample(s), the first at frame "
        "100; expected finite samples",
        f"1 problem in {manifests} (2 splits: test, train); every audio file decoded",
    ]
