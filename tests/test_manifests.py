"""Manifests (lhotse JSONL) and sources.yaml: round trips, exact format, and every error path."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import textwrap
from pathlib import Path

import pytest

from audiorepro.config import ConfigError
from audiorepro.data.manifests import (
    AlignmentItem,
    AudioSource,
    ManifestError,
    Recording,
    Supervision,
    read_manifest,
    read_recordings,
    read_supervisions,
    validate,
    write_manifest,
)
from audiorepro.data.problems import Problem
from audiorepro.data.sources import (
    SourcesError,
    checksum,
    load_sources,
    verify_downloads,
)


def recording(id="rec1", num_samples=48000, sampling_rate=16000, channels=(0,), **kw):
    return Recording(
        id=id,
        sources=[AudioSource("file", list(channels), f"wav/{id}.wav")],
        sampling_rate=sampling_rate,
        num_samples=num_samples,
        duration=num_samples / sampling_rate,
        channel_ids=list(channels),
        **kw,
    )


def full_supervision():
    return Supervision(
        id="rec1-0",
        recording_id="rec1",
        start=0.5,
        duration=1.25,
        channel=[0, 1],
        text="a dog barks twice",
        language="en",
        speaker="spk7",
        gender="f",
        custom={"caption_index": 3, "keywords": ["dog", "bark"], "pron": "D AO1 G"},
        alignment={
            "word": [AlignmentItem("dog", 0.5, 0.4), AlignmentItem("barks", 0.9, 0.5, 0.75)],
            "phone": [AlignmentItem("D", 0.5, 0.1)],
        },
    )


@pytest.mark.parametrize("name", ["m.jsonl", "m.jsonl.gz"])
def test_round_trip_keeps_every_field(tmp_path, name):
    items = [
        recording("rec1", channels=(0, 1)),
        recording("rec2", num_samples=8000, sampling_rate=8000, transforms=[{"name": "Speed"}]),
        full_supervision(),
        Supervision("rec2-0", "rec2", 0.0, 1.0),
    ]
    path = write_manifest(tmp_path / name, items)
    back = read_manifest(path)
    assert back == items
    for a, b in zip(back, items, strict=True):
        assert dataclasses.asdict(a) == dataclasses.asdict(b) | {"origin": a.origin}
    assert [item.origin for item in back] == [(str(path), i) for i in range(1, 5)]
    # Sequences are stored as tuples whatever the caller passed, so equality is by value.
    assert back[0].channel_ids == (0, 1) and back[2].channel == (0, 1)
    assert back[2].alignment["word"][1] == AlignmentItem("barks", 0.9, 0.5, 0.75)
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
        with gzip.open(path, "rt") as f:
            assert len(f.read().splitlines()) == 4
    else:
        assert len(path.read_text().splitlines()) == 4


def test_written_lines_are_lhotse_json(tmp_path):
    sup_min = Supervision("r-0", "r", 0.25, 1.5)
    path = write_manifest(tmp_path / "m.jsonl", [recording("r"), sup_min, full_supervision()])
    rec_line, sup_line, full_line = (json.loads(x) for x in path.read_text().splitlines())
    assert rec_line == {
        "id": "r",
        "sources": [{"type": "file", "channels": [0], "source": "wav/r.wav"}],
        "sampling_rate": 16000,
        "num_samples": 48000,
        "duration": 3.0,
        "channel_ids": [0],
    }
    assert list(rec_line) == [
        "id",
        "sources",
        "sampling_rate",
        "num_samples",
        "duration",
        "channel_ids",
    ]
    # lhotse leaves out optional fields that are None.
    assert sup_line == {
        "id": "r-0",
        "recording_id": "r",
        "start": 0.25,
        "duration": 1.5,
        "channel": 0,
    }
    assert set(full_line) == {
        "id",
        "recording_id",
        "start",
        "duration",
        "channel",
        "text",
        "language",
        "speaker",
        "gender",
        "custom",
        "alignment",
    }
    assert full_line["alignment"]["word"][0] == {
        "symbol": "dog",
        "start": 0.5,
        "duration": 0.4,
        "score": None,
    }
    assert list(full_line["alignment"]["word"][0]) == ["symbol", "start", "duration", "score"]


def test_reads_lhotse_list_form_alignment(tmp_path):
    # lhotse >= 1.8 writes alignment items as [symbol, start, duration, score] lists.
    line = {
        "id": "s",
        "recording_id": "r",
        "start": 1.0,
        "duration": 0.5,
        "channel": 0,
        "alignment": {"phone": [["AY0", 1.0, 0.3, None], ["S", 1.3, 0.2]]},
    }
    path = tmp_path / "sup.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (sup,) = read_supervisions(path)
    assert sup.alignment == {
        "phone": (AlignmentItem("AY0", 1.0, 0.3), AlignmentItem("S", 1.3, 0.2))
    }


def test_gzip_output_is_deterministic_and_atomic(tmp_path):
    path = tmp_path / "a" / "train_recordings.jsonl.gz"
    items = [recording("r1"), recording("r2")]
    first = write_manifest(path, items).read_bytes()
    assert write_manifest(path, items).read_bytes() == first
    # A failed write (duplicate id) leaves the previous file untouched and no temporary file.
    with pytest.raises(ManifestError, match=r"train_recordings.jsonl.gz:2: id: duplicate"):
        write_manifest(path, [recording("r1"), recording("r1")])
    assert path.read_bytes() == first
    assert sorted(p.name for p in path.parent.iterdir()) == ["train_recordings.jsonl.gz"]


GOOD_REC = (
    '{"id": "ok", "sources": [{"type": "file", "channels": [0], "source": "ok.wav"}], '
    '"sampling_rate": 16000, "num_samples": 16000, "duration": 1.0, "channel_ids": [0]}'
)


def bad_rec(**change):
    data = json.loads(GOOD_REC) | {"id": "bad"} | change
    return json.dumps({k: v for k, v in data.items() if v is not ...})


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        ('{"id": "bad", "sources": [', "<line>", "not valid JSON"),
        (bad_rec(sampling_rate=...), "sampling_rate", "missing required field"),
        (bad_rec(sampling_rate="16000"), "sampling_rate", "positive integer, got string '16000'"),
        (bad_rec(num_samples=1.5), "num_samples", "positive integer, got number 1.5"),
        (bad_rec(duration=-1.0), "duration", "positive number of seconds, got number -1.0"),
        (bad_rec(duration=1.002), "duration", "16000/16000 = 1.000000 s (tolerance 1 ms)"),
        (bad_rec(duration=True), "duration", "got boolean true"),
        (bad_rec(sample_rate=16000), "sample_rate", "unknown field in a recording"),
        (bad_rec(channel_ids=[0, 1]), "channel_ids", "the sources provide [0]"),
        (
            bad_rec(sources=[{"type": "url", "channels": [0], "source": "x"}]),
            "sources[0].type",
            "expected 'file'",
        ),
        (
            bad_rec(sources=[{"type": "file", "channels": [-1], "source": "x"}]),
            "sources[0].channels",
            "integers >= 0",
        ),
        (GOOD_REC, "id", "duplicate recording id 'ok' (first on line 1)"),
        (GOOD_REC.replace("1.0,", "NaN,"), "<line>", "NaN is not valid JSON"),
        ('{"id": "x"}', "<line>", "expected a recording (an object with 'sources')"),
        ('{"id": "s", "recording_id": "ok", "start": 0, "duration": -2}', "duration", "positive"),
        ('{"id": "s", "recording_id": "ok", "start": "0", "duration": 1}', "start", "string '0'"),
        ('{"id": "s", "recording_id": "ok", "duration": 1}', "start", "missing required"),
        (
            '{"id": "s", "recording_id": "ok", "start": 0, "duration": 1, "alignment": '
            '{"word": [{"symbol": "w", "start": 0.5, "duration": 0.6}]}}',
            "alignment.word[0]",
            "outside the supervision 0.0000-1.0000 s",
        ),
        (
            '{"id": "s", "recording_id": "ok", "start": 0, "duration": 1, "alignment": '
            '{"word": [{"symbol": "w", "start": "0"}]}}',
            "alignment.word[0].duration",
            "missing required",
        ),
    ],
)
def test_malformed_line_names_file_line_and_field(tmp_path, line, field, expected):
    path = tmp_path / "train_mixed.jsonl"
    path.write_text(GOOD_REC + "\n" + line + "\n")
    with pytest.raises(ManifestError) as info:
        read_manifest(path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 2, field)
    assert expected in err.message
    assert str(err).startswith(f"{path}:2: {field}: ")


def test_gzip_manifest_error_names_gz_file(tmp_path):
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(gzip.compress((GOOD_REC + "\n\n" + bad_rec(duration=-1) + "\n").encode()))
    with pytest.raises(ManifestError, match=rf"^{path}:3: duration: expected a positive"):
        read_manifest(path)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ManifestError, match=rf"^{path}:1: file: cannot read"):
        read_manifest(path)


def test_typed_readers_reject_the_other_type(tmp_path):
    path = write_manifest(tmp_path / "m.jsonl", [recording("r"), Supervision("s", "r", 0, 1)])
    with pytest.raises(ManifestError, match=r":2: <line>: expected a recording in this manifest"):
        read_recordings(path)
    with pytest.raises(
        ManifestError, match=r":1: <line>: expected a supervision in this manifest"
    ):
        read_supervisions(path)
    with pytest.raises(ManifestError, match=r"file: manifest file not found"):
        read_manifest(tmp_path / "missing.jsonl")


def test_direct_construction_is_checked_too():
    with pytest.raises(ManifestError, match=r"^<manifest>: duration: expected a positive"):
        Supervision("s", "r", 0.0, 0.0)
    with pytest.raises(ValueError, match=r"num_samples: expected a positive integer"):
        recording(num_samples=0)


def test_validate_reports_every_cross_check(tmp_path):
    recs = [
        recording("a", num_samples=16000),  # 1.000 s at 16 kHz: tolerance 1 ms
        recording("b", num_samples=100, sampling_rate=100),  # 1 s at 100 Hz: one sample = 10 ms
        recording("a", num_samples=8000),  # duplicate id
    ]
    sups = [
        Supervision("ok-edge", "a", 0.5, 0.5009),  # ends 0.9 ms after the end: tolerated
        Supervision("late", "a", 0.5, 0.502),  # 2 ms past the end
        Supervision("after", "a", 1.5, 0.1),  # starts after the end
        Supervision("ok-sample", "b", 0.0, 1.009),  # 9 ms past, within one 100 Hz sample
        Supervision("ghost", "zzz", 0.0, 0.1),
        Supervision("chan", "a", 0.0, 0.1, channel=1),
        Supervision("late", "b", 0.0, 0.1),  # duplicate supervision id
    ]
    problems = validate(recs, sups)
    assert [(p.path, p.line, p.field) for p in problems] == [
        ("<recordings>", 3, "id"),
        ("<supervisions>", 2, "duration"),
        ("<supervisions>", 3, "start"),
        ("<supervisions>", 5, "recording_id"),
        ("<supervisions>", 6, "channel"),
        ("<supervisions>", 7, "id"),
    ]
    assert "ends after recording 'a' (1.0000 s, tolerance 1 ms)" in problems[1].message
    assert "first at <recordings>:1" in problems[0].message
    assert validate(recs[:2], [s for s in sups if s.id.startswith("ok")]) == []

    # Items read from files are located at their file and line.
    rec_path = write_manifest(tmp_path / "r.jsonl", recs[:1])
    sup_path = write_manifest(tmp_path / "s.jsonl", [sups[0], sups[2]])
    (problem,) = validate(read_recordings(rec_path), read_supervisions(sup_path))
    assert problem == Problem(str(sup_path), 2, "start", problem.message)
    assert str(problem).startswith(f"{sup_path}:2: start: supervision 1.5000-1.6000 s")


# --- sources.yaml -------------------------------------------------------------------------------

SOURCES = """\
name: tiny
description: A tiny test corpus.
homepage: https://example.org/tiny
licence: CC0
citation: |
  @misc{tiny2024,
    title = {Tiny},
  }
sampling_rate: 16000
files:
  - url: https://example.org/tiny/a.bin
    filename: dl/a.bin
    md5: MD5
    size_bytes: 3
  - url: https://example.org/tiny/b.bin
    filename: dl/b.bin
    sha256: SHA256
expected_counts:
  train: {recordings: 4, supervisions: 5}
  test:
    recordings: 1
    supervisions: 1
"""

ABC_MD5 = "900150983cd24fb0d6963f7d28e17f72"  # RFC 1321 test suite: MD5("abc")
ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2


def fill(text, md5=ABC_MD5, sha256=ABC_SHA256):
    return text.replace("MD5", md5).replace("SHA256", sha256)


def write_sources(tmp_path, text=None):
    path = tmp_path / "sources.yaml"
    path.write_text(text if text is not None else fill(SOURCES))
    return path


def test_load_sources(tmp_path):
    src = load_sources(write_sources(tmp_path))
    assert (src.name, src.sampling_rate, src.licence) == ("tiny", 16000, "CC0")
    assert src.citation.startswith("@misc{tiny2024,")
    assert [f.filename for f in src.files] == ["dl/a.bin", "dl/b.bin"]
    assert src.files[0].digests == {"md5": ABC_MD5} and src.files[0].size_bytes == 3
    assert src.files[1].digests == {"sha256": ABC_SHA256} and src.files[1].size_bytes is None
    assert {k: (v.recordings, v.supervisions) for k, v in src.expected_counts.items()} == {
        "train": (4, 5),
        "test": (1, 1),
    }
    assert src.where("expected_counts.test.supervisions") == (src.path, 22)
    assert src.where("files[1].md5") == (src.path, 15)  # no md5 key: the entry's line


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            ("licence:", "license:"),
            r"sources.yaml:4: license: unknown key \(did you mean 'licence'",
        ),
        (("    size_bytes: 3\n", "    size: 3\n"), r":14: files\[0\].size: unknown key"),
        (("    md5: MD5\n", ""), r":11: files\[0\]: expected a checksum: md5 or sha256"),
        (("md5: MD5", "md5: abc"), r":13: files\[0\].md5: expected 32 hex digits"),
        (("sampling_rate: 16000", "sampling_rate: 16k"), r":9: sampling_rate: expected an int"),
        (("  @misc", "  misc"), r":5: citation: expected a BibTeX entry"),
        (("dl/b.bin", "../b.bin"), r":16: files\[1\].filename: expected a relative POSIX path"),
        (("    recordings: 1\n", ""), r":20: expected_counts.test: missing required key 'recor"),
        (("licence: CC0\n", "licence: CC0\nlicence: MIT\n"), r":5: licence: key given twice"),
        (("name: tiny\n", ""), r"sources.yaml: name: missing required key 'name'"),
    ],
)
def test_bad_sources_name_file_line_and_key(tmp_path, edit, match):
    text = fill(SOURCES.replace(*edit))
    with pytest.raises(SourcesError, match=match) as info:
        load_sources(write_sources(tmp_path, text))
    assert isinstance(info.value, ConfigError)


def test_checksum_streams_known_digests(tmp_path):
    path = tmp_path / "abc"
    path.write_bytes(b"abc")
    assert checksum(path, "md5") == ABC_MD5
    assert checksum(path) == ABC_SHA256
    big = tmp_path / "big"
    data = bytes(range(256)) * 1000
    big.write_bytes(data)
    assert checksum(big, "sha256", chunk_size=7) == hashlib.sha256(data).hexdigest()
    with pytest.raises(ValueError, match="unknown checksum algorithm 'crc99'"):
        checksum(path, "crc99")


def test_verify_downloads(tmp_path):
    src = load_sources(write_sources(tmp_path))
    root = tmp_path / "root"
    (root / "dl").mkdir(parents=True)
    assert [(p.line, p.field) for p in verify_downloads(src, root)] == [
        (11, "files[0].filename"),
        (15, "files[1].filename"),
    ]
    (root / "dl" / "a.bin").write_bytes(b"abc")
    (root / "dl" / "b.bin").write_bytes(b"abd!")
    problems = verify_downloads(src, root)
    assert [(p.line, p.field) for p in problems] == [(17, "files[1].sha256")]
    assert problems[0].message == (
        f"expected {ABC_SHA256}, {root / 'dl' / 'b.bin'} has {hashlib.sha256(b'abd!').hexdigest()}"
    )
    assert verify_downloads(src, root, checksums=False) == []
    (root / "dl" / "b.bin").write_bytes(b"abc")
    (root / "dl" / "a.bin").write_bytes(b"abcd")
    assert [(p.line, p.field) for p in verify_downloads(src, root)] == [
        (14, "files[0].size_bytes"),
        (13, "files[0].md5"),
    ]
    (root / "dl" / "a.bin").write_bytes(b"abc")
    assert verify_downloads(src, root) == []


def test_sources_files_may_list_both_digests(tmp_path):
    text = SOURCES.replace("    sha256: SHA256\n", "    sha256: SHA256\n    md5: MD5\n")
    src = load_sources(write_sources(tmp_path, fill(text, md5=ABC_MD5.upper())))
    assert src.files[1].digests == {"md5": ABC_MD5, "sha256": ABC_SHA256}


def test_sources_round_trip_in_dedent(tmp_path):
    # A file with no downloadable files (an LDC corpus) and a mixed sampling rate is valid.
    text = textwrap.dedent(
        """\
        name: swb
        description: Switchboard word segments.
        homepage: https://catalog.ldc.upenn.edu/LDC97S62
        licence: LDC User Agreement
        citation: "@misc{swb, title={Switchboard}}"
        sampling_rate: null
        files: []
        expected_counts: {train: {recordings: 2, supervisions: 9}}
        """
    )
    src = load_sources(write_sources(tmp_path, text))
    assert src.files == () and src.sampling_rate is None
    assert verify_downloads(src, tmp_path) == []
    assert Path(src.path) == tmp_path / "sources.yaml"


def test_find_manifests_accepts_lhotse_recipe_names(tmp_path):
    from audiorepro.data.manifests import find_manifests

    for name in (
        "librispeech_recordings_dev-clean.jsonl.gz",
        "librispeech_supervisions_dev-clean.jsonl.gz",
        "train_recordings.jsonl",
        "notes_recordings.txt",
    ):
        (tmp_path / name).write_bytes(b"")
    found = find_manifests(tmp_path)
    assert set(found) == {"dev-clean", "train"}
    assert found["dev-clean"]["supervisions"].name == "librispeech_supervisions_dev-clean.jsonl.gz"
