from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

from audiorepro.data.embedded.generate import ensure_corpora, espeak_phrase_speech


def test_cli_generates_then_reuses_and_rejects_bad_input(tmp_path):
    out = tmp_path / "corpora"
    cmd = [sys.executable, "-m", "audiorepro.data.embedded", "generate", "--preset", "smoke"]
    done = subprocess.run(
        [*cmd, "--out", str(out), "--only", "words"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (out / "words" / ".complete").is_file()
    marker = (out / "words" / ".complete").read_bytes()
    again = ensure_corpora("smoke", 0, out=out, only=["words"], verbose=False)
    assert again["words"] == out / "words"
    assert (out / "words" / ".complete").read_bytes() == marker
    with pytest.raises(ValueError, match="unknown preset 'paper'"):
        ensure_corpora("paper", 0, out=out)
    with pytest.raises(ValueError, match="unknown corpus"):
        ensure_corpora("smoke", 0, out=out, only=["timit"])
    bad = subprocess.run(
        [*cmd, "--out", str(out), "--only", "timit"], capture_output=True, text=True
    )
    assert bad.returncode != 0


def _contents(root):
    """{relative path: bytes} of every file under root, the markers' timings left out."""
    import json

    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.name == ".complete":
                data = json.dumps({k: v for k, v in json.loads(data).items() if "time" not in k})
            out[str(path.relative_to(root))] = data
    return out


def test_the_scenes_speech_source_pickles_and_speaks_the_same_after():
    speech = espeak_phrase_speech(3)
    copy = pickle.loads(pickle.dumps(speech))
    wav, text = speech("a dog barks", np.random.default_rng(7))
    again, text_again = copy("a dog barks", np.random.default_rng(7))
    assert text == text_again == "a dog barks" and wav.dtype == np.float32
    assert len(wav) > 32_000 * 0.3 and np.array_equal(wav, again)
    other, _ = copy("a dog barks", np.random.default_rng(8))  # another voice
    assert not np.array_equal(wav, other)


@pytest.mark.processes
def test_two_processes_write_the_same_bytes_as_one(tmp_path):
    one = ensure_corpora("smoke", 0, out=tmp_path / "one", workers=1, verbose=False)
    two = ensure_corpora("smoke", 0, out=tmp_path / "two", workers=2, verbose=False)
    assert set(two["timings"]) == {"zerospeech", "words", "audio_caption"}
    a, b = _contents(tmp_path / "one"), _contents(tmp_path / "two")
    assert len(a) > 100 and a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    assert one["words"] == tmp_path / "one" / "words"
