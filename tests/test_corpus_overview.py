"""The summaries behind the embedded-corpora page, on hand-made files and on the smoke corpora."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from audiorepro.data.embedded import overview
from audiorepro.data.embedded.generate import ensure_corpora
from audiorepro.data.manifests import read_recordings, read_supervisions
from audiorepro.data.recipes.switchboard import SwitchboardFormatError
from audiorepro.data.recipes.zerospeech import ZeroSpeechFormatError

ITEMS = """#file onset offset #phone prev-phone next-phone speaker
f1 0.1 0.2 AA B C s1
f2 0.1 0.2 AA B C s2
f3 0.1 0.2 IY B C s1
f3 0.3 0.4 AA D C s1
"""


def test_abx_summary_hand_computed(tmp_path):
    path = tmp_path / "x.item"
    path.write_text(ITEMS)
    counts, phones = overview.abx_summary(path)
    assert counts == {
        "items": 4,
        "files": 3,
        "speakers": 2,
        "phones": 2,
        "contexts": 2,  # (B, C) and (D, C)
        "cells shared by >= 2 speakers": 1,  # only AA in B_C is said by s1 and s2
    }
    assert phones.to_dict() == {"AA": 3, "IY": 1}
    path.write_text(ITEMS + "f4 0.5 0.4 AA B C s1\n")
    with pytest.raises(ZeroSpeechFormatError, match=r"x.item:6"):
        overview.abx_summary(path)


def test_word_summary_and_tokens_hand_computed(tmp_path):
    lists = {
        "train": [
            "cabin_S1-A_000010-000060",
            "cabin_S2-A_000000-000080",
            "river_S1-A_000100-000170",
        ],
        "dev": ["cabin_S3-A_000000-000050", "paper_S3-A_000100-000300"],
        "test": ["paper_S4-A_000000-000120"],
    }
    for split, keys in lists.items():
        (tmp_path / f"{split}.list").write_text("\n".join(keys) + "\n")
    table = overview.word_summary(tmp_path)
    assert table.loc["train"].to_dict() == {
        "tokens": 3,
        "types": 2,
        "speakers": 2,
        "types seen in train": 2,
        "frames min": 50,
        "frames median": 70,
        "frames max": 80,
    }
    assert table.loc["dev", "types seen in train"] == 1  # cabin seen, paper unseen
    assert table.loc["test", "types seen in train"] == 0
    np.testing.assert_array_equal(overview.word_lengths(tmp_path, "dev"), [50, 200])

    # tokens are cut from the side's audio at the key's frames (10 ms)
    (tmp_path / "audio").mkdir()
    sr = 16000
    for side in ("S1-A", "S2-A"):
        ramp = np.arange(2 * sr, dtype=np.float32) / (4 * sr)
        sf.write(tmp_path / "audio" / f"{side}.wav", ramp, sr, subtype="FLOAT")
    word, tokens = overview.word_tokens(tmp_path, "", "train", n=5)
    assert word == "cabin" and [k for k, _, _ in tokens] == lists["train"][:2]
    key, wav, token_sr = tokens[0]
    assert token_sr == sr and wav.size == 50 * 160
    assert wav[0] == pytest.approx(10 * 160 / (4 * sr))
    with pytest.raises(KeyError, match="'table' has no token"):
        overview.word_tokens(tmp_path, "table")
    (tmp_path / "test.list").write_text("not-a-key\n")
    with pytest.raises(SwitchboardFormatError, match=r"test.list:1"):
        overview.word_summary(tmp_path)


@pytest.fixture(scope="module")
def smoke(session_data_dir):
    return ensure_corpora("smoke", 0, out=session_data_dir / "overview_smoke", verbose=False)


def test_summaries_agree_with_the_manifests(smoke):
    english = smoke["zerospeech"] / "english"
    table = overview.manifest_summary(english)
    assert list(table.index) == ["test", "train-unit", "train-voice"]
    for split in table.index:
        recs = read_recordings(english / "manifests" / f"{split}_recordings.jsonl.gz")
        sups = read_supervisions(english / "manifests" / f"{split}_supervisions.jsonl.gz")
        assert table.loc[split, "recordings"] == len(recs)
        assert table.loc[split, "speakers"] == len({s.speaker for s in sups})
        assert table.loc[split, "hours"] == pytest.approx(
            sum(r.duration for r in recs) / 3600, abs=1e-3
        )
    assert table.loc["train-voice", "speakers"] == 2  # the two target voices

    wav, sr, tiers, text = overview.aligned_utterance(english, "train-unit", 0)
    assert sr == 16000 and wav.ndim == 1
    words = [w for w, _, _ in tiers["word"]]
    assert " ".join(words).lower() == text.rstrip(".").lower()
    assert all(0 <= s < e <= wav.size / sr + 1e-3 for _, s, e in tiers["phone"])


def test_caption_summary_and_scene_example(smoke):
    clotho = smoke["audio_caption"] / "clotho"
    table, lengths = overview.caption_summary(clotho)
    assert list(table.index) == ["development", "validation", "evaluation"]
    for split in table.index:
        assert table.loc[split, "captions"] == 5 * table.loc[split, "clips"]
        assert len(lengths[split]) == table.loc[split, "captions"]
        assert 8 <= table.loc[split, "words min"] <= table.loc[split, "words max"] <= 20
        assert 0 <= table.loc[split, "shared captions %"] <= 100
    scene = overview.scene_example(clotho, "development", 1)
    assert scene["path"].is_file() and len(scene["captions"]) == 5
    assert all(c not in scene["paraphrases"][c] for c in scene["captions"])
    assert 3 <= len(scene["keywords"]) <= 6
    assert set(scene["events"].columns) >= {"event_class", "start", "duration"}
    info = sf.info(str(scene["path"]))
    assert (scene["events"]["start"] + scene["events"]["duration"]).max() <= info.duration + 1e-3
