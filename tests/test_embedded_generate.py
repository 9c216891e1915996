from __future__ import annotations

import subprocess
import sys

import pytest

from audiorepro.data.embedded.generate import ensure_corpora


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
