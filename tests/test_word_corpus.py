"""Embedded Switchboard-like word corpus and the Switchboard word-segment loader."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from audiorepro.config import ConfigError, to_dict
from audiorepro.data.embedded import word_corpus as wc
from audiorepro.data.embedded.lexicon import SWITCHBOARD_SYMBOLS, LexiconError, pronunciation
from audiorepro.data.manifests import check_manifest_dir, read_supervisions
from audiorepro.data.recipes.switchboard import (
    SwitchboardFormatError,
    WordVocab,
    format_key,
    load_vocab,
    load_word_split,
    parse_key,
    read_word_list,
)
from audiorepro.features import load_audio, mfcc_features

SMOKE = wc.word_corpus_config("smoke")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("words") / "smoke"
    return out, wc.generate_word_corpus(out, "smoke", seed=0)


@pytest.fixture(scope="module")
def splits(corpus) -> dict:
    return {s: load_word_split(corpus[0], s) for s in ("train", "dev", "test")}


# --- configuration and lexicon -----------------------------------------------------------------


def test_unknown_preset_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="'paper'.*valid: smoke, embedded"):
        wc.word_corpus_config("paper")
    with pytest.raises(ConfigError, match="unknown preset 'big'"):
        wc.generate_word_corpus("/nonexistent/never-created", "big")


def test_config_rejects_impossible_values() -> None:
    values = to_dict(SMOKE)
    with pytest.raises(ConfigError, match="min_frames 300 > max_frames 200"):
        wc.WordCorpusConfig(**{**values, "min_frames": 300})
    with pytest.raises(ConfigError, match="min_rate <= max_rate"):
        wc.WordCorpusConfig(**{**values, "min_rate": 60})
    with pytest.raises(ConfigError, match=r"unseen_types \(30\) must be < word_types \(30\)"):
        wc.WordCorpusConfig(**{**values, "unseen_types": 30})


def test_a_word_missing_from_the_lexicon_is_a_clear_error() -> None:
    with pytest.raises(LexiconError, match="'qzxwvtt' is not in the CMU pronouncing dictionary"):
        wc.word_pronunciations("qzxwvtt")
    prons = wc.word_pronunciations("either")
    assert prons[0] == list(pronunciation("either")) and len(prons) >= 2


def test_target_words_split_into_seen_and_unseen() -> None:
    seen, unseen = wc.target_words(wc.word_corpus_config("embedded"), seed=0)
    assert len(unseen) == 32 and len(seen) >= 150 and not set(seen) & set(unseen)
    assert all(len(w) >= 6 for w in seen + unseen)
    seen_s, unseen_s = wc.target_words(SMOKE, seed=0)
    assert (len(seen_s), len(unseen_s)) == (24, 6)


# --- the generated corpus ----------------------------------------------------------------------


def test_counts_match_the_preset(corpus, splits) -> None:
    out, counts = corpus
    for split, n in SMOKE.speakers.items():
        assert counts[split]["sides"] == n == len({*splits[split].sides})
        assert counts[split]["tokens"] == len(splits[split])
        assert len((out / f"{split}.list").read_text().split()) == len(splits[split])
    assert 80 <= counts["train"]["tokens"] <= 160
    assert 25 <= counts["dev"]["tokens"] <= 80 and 25 <= counts["test"]["tokens"] <= 80
    assert len(list((out / "audio").glob("*.wav"))) == sum(SMOKE.speakers.values())


def test_manifest_check_passes(corpus) -> None:
    out = corpus[0]
    assert check_manifest_dir(out / wc.MANIFEST_DIR, out, sources=out / wc.SOURCES_FILE) == []


def test_selection_rules(corpus, splits) -> None:
    train_types = set(splits["train"].words)
    counts = Counter(splits["train"].words)
    assert min(counts.values()) >= 2  # Switchboard: train words occur at least twice
    for split, data in splits.items():
        frames = np.array([e - s for s, e in zip(data.starts, data.ends, strict=True)])
        assert frames.min() >= 50 and frames.max() <= 200
        assert (data.lengths == frames).all()
        assert all(len(w) >= 6 and w.isalpha() and w.islower() for w in data.words)
        if split != "train":
            types = set(data.words)
            assert types & train_types and types - train_types  # seen and unseen types
    sides = {split: set(data.sides) for split, data in splits.items()}
    assert not sides["train"] & sides["dev"] and not sides["train"] & sides["test"]
    assert not sides["dev"] & sides["test"]


def test_keys_parse_and_label_rule(corpus) -> None:
    for split in ("train", "dev", "test"):
        for line in (corpus[0] / f"{split}.list").read_text().splitlines():
            parsed = parse_key(line)
            assert parsed.word == "_".join(line.split("_")[:-2])
            assert parsed.side.endswith("-A") and parsed.side[:-2] in parsed.key
            assert line == format_key(parsed.word, parsed.side, parsed.start, parsed.end)
            assert len(line.rsplit("_", 1)[1]) == 13  # SSSSSS-EEEEEE


def test_features_are_slices_of_the_side_features(corpus, splits) -> None:
    out = corpus[0]
    data = splits["dev"]
    side = data.sides[0]
    wav, sr = load_audio(out / "audio" / f"{side}.wav", None)
    side_feats = mfcc_features(wav, sr, 39, cmvn=True)  # per-speaker CMVN over the side
    checked = 0
    for i, s in enumerate(data.sides):
        if s == side:
            np.testing.assert_array_equal(data.feats[i], side_feats[data.starts[i] : data.ends[i]])
            checked += 1
    assert checked >= 5
    assert all(f.dtype == np.float32 and f.shape[1] == 39 for f in data.feats)


def test_vocab_json(corpus, splits) -> None:
    vocab = json.loads((corpus[0] / wc.VOCAB_FILE).read_text())
    words = sorted({w for data in splits.values() for w in data.words})
    assert sorted(vocab["words_to_ids"]) == words
    assert sorted(vocab["words_to_ids"].values()) == list(range(1, len(words) + 1))
    assert vocab["phones_to_ids"] == {p: i + 1 for i, p in enumerate(SWITCHBOARD_SYMBOLS)}
    assert len(vocab["phones_to_ids"]) == 45
    for word in words:
        assert vocab["word_to_phones"][word][0] == list(pronunciation(word))
    data = splits["train"]
    assert data.pronunciations[0] == pronunciation(data.words[0])
    assert data.phone_ids[0] == [vocab["phones_to_ids"][p] for p in data.pronunciations[0]]
    assert data.word_ids[0] == vocab["words_to_ids"][data.words[0]]


def test_supervisions_and_alignments(corpus, splits) -> None:
    out = corpus[0]
    sups = read_supervisions(out / wc.MANIFEST_DIR / "test_supervisions.jsonl.gz")
    data = splits["test"]
    assert [s.id for s in sups] == data.keys
    for sup, start, end in zip(sups, data.starts, data.ends, strict=True):
        assert sup.text == parse_key(sup.id).word and sup.recording_id == parse_key(sup.id).side
        assert sup.custom["pronunciation"] == list(pronunciation(sup.text))
        # the key's frames are the supervision's times rounded to 10 ms
        assert (
            abs(sup.start * 100 - start) <= 0.5 + 1e-9 and abs(sup.end * 100 - end) <= 0.5 + 1e-9
        )
        phones = sup.alignment["phone"]
        assert phones[0].start == pytest.approx(sup.start) and phones[-1].end == pytest.approx(
            sup.end
        )
        for a, b in zip(phones, phones[1:], strict=False):
            assert a.end <= b.start + 1e-9


def test_same_seed_gives_byte_identical_files(corpus, tmp_path) -> None:
    def digests(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    again = tmp_path / "again"
    wc.generate_word_corpus(again, "smoke", seed=0)
    first, second = digests(corpus[0]), digests(again)
    assert "swbd.train.npz" in first and first == second


def test_complete_corpus_is_reused_and_a_partial_one_is_not(corpus, tmp_path) -> None:
    out, counts = corpus
    again = wc.generate_word_corpus(out, "smoke", seed=0)
    assert again["reused"] is True and again["train"] == counts["train"]
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "train.list").write_text("accept_S001-A_000010-000070\n")
    with pytest.raises(FileExistsError, match="no .complete marker"):
        wc.generate_word_corpus(partial, "smoke", seed=0)
    assert (partial / "train.list").exists()


# --- the loader on hand-written files in the real format -----------------------------------------


def _write_real(root: Path, keys: dict[str, np.ndarray], listed: list[str] | None = None):
    root.mkdir(parents=True, exist_ok=True)
    np.savez(root / "swbd.dev.npz", **keys)
    (root / "dev.list").write_text("".join(k + "\n" for k in (listed or list(keys))))
    vocab = WordVocab(
        {"absolutely": 1, "something_1": 2},
        {p: i + 1 for i, p in enumerate(SWITCHBOARD_SYMBOLS)},
        {
            "absolutely": [["AE", "B", "S", "AH", "L", "UW", "T", "L", "IY"]],
            "something_1": [["S", "AH", "M", "TH", "IH", "NG"]],
        },
    )
    (root / "vocab.json").write_text(json.dumps(vocab.to_dict()))


def test_loader_reads_the_real_layout(tmp_path) -> None:
    rng = np.random.default_rng(0)
    keys = {
        "absolutely_sw02001-A_000123-000245": rng.normal(size=(122, 39)).astype(np.float32),
        "something_1_sw04940-B_001000-001060": rng.normal(size=(61, 39)).astype(np.float32),
    }
    _write_real(tmp_path, keys)
    data = load_word_split(tmp_path, "dev")
    assert data.words == ["absolutely", "something_1"]
    assert data.sides == ["sw02001-A", "sw04940-B"] == data.speakers
    assert (data.starts, data.ends) == ([123, 1000], [245, 1060])
    assert data.lengths.tolist() == [122, 61]  # 61 = end - start + 1: within the tolerance
    assert data.word_ids == [1, 2]
    assert data.pronunciations[1] == ("S", "AH", "M", "TH", "IH", "NG")
    bare = load_word_split(tmp_path, "dev", vocab=None, speaker_of_side=lambda s: s[:7])
    assert bare.pronunciations is None and bare.speakers == ["sw02001", "sw04940"]
    with pytest.raises(SwitchboardFormatError, match="61 frames, but the key spans"):
        load_word_split(tmp_path, "dev", frame_tolerance=0)


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        (["absolutely_sw02001-A_000123-000245", "absolutely_sw02001_000123-000245"], r"dev\.list:2: malformed key"),
        (["absolutely_sw02001-A_000245-000123"], r"dev\.list:1: .*end frame 123 is not after start frame 245"),
        (["absolutely_sw02001-A_123-245"], r"dev\.list:1: malformed key"),
        (["absolutely_sw02001-A_000123-000245", "absolutely_sw02001-A_000123-000245"], r"dev\.list:2: key .* repeated \(first on line 1\)"),
        (["absolutely_sw02001-A_000123-000245 extra"], r"dev\.list:1: expected one key per line"),
        (["absolutely_sw09999-A_000123-000245"], r"swbd\.dev\.npz: no features for key 'absolutely_sw09999-A_000123-000245'"),
    ],
)  # fmt: skip
def test_loader_errors_name_file_line_or_key(tmp_path, listed, message) -> None:
    keys = {"absolutely_sw02001-A_000123-000245": np.zeros((122, 39), np.float32)}
    _write_real(tmp_path, keys, listed)
    with pytest.raises(SwitchboardFormatError, match=message):
        load_word_split(tmp_path, "dev")


def test_loader_checks_feature_shapes_and_vocabulary(tmp_path) -> None:
    key = "absolutely_sw02001-A_000123-000245"
    _write_real(tmp_path, {key: np.zeros((122, 13), np.float32)})
    with pytest.raises(
        SwitchboardFormatError, match=rf"{key}.*shape \(frames, 39\), got \(122, 13\)"
    ):
        load_word_split(tmp_path, "dev")
    _write_real(tmp_path, {key: np.zeros((100, 39), np.float32)})
    with pytest.raises(SwitchboardFormatError, match=rf"{key}': 100 frames, but the key spans"):
        load_word_split(tmp_path, "dev")
    _write_real(tmp_path, {key: np.zeros(122, np.float32)})
    with pytest.raises(SwitchboardFormatError, match=r"got \(122,\)"):
        load_word_split(tmp_path, "dev")
    other = "zebra_sw02001-A_000300-000360"
    _write_real(tmp_path, {other: np.zeros((60, 39), np.float32)})
    with pytest.raises(SwitchboardFormatError, match=r"missing from the vocabulary.*'zebra'"):
        load_word_split(tmp_path, "dev")
    bad = json.loads((tmp_path / "vocab.json").read_text())
    bad["words_to_ids"]["something_1"] = 0
    (tmp_path / "vocab.json").write_text(json.dumps(bad))
    with pytest.raises(
        SwitchboardFormatError, match=r"words_to_ids\['something_1'\]: expected an id >= 1"
    ):
        load_vocab(tmp_path / "vocab.json")


def test_read_word_list_rejects_an_empty_list(tmp_path) -> None:
    (tmp_path / "empty.list").write_text("\n")
    with pytest.raises(SwitchboardFormatError, match="holds no key"):
        read_word_list(tmp_path / "empty.list")


def test_a_truncated_feature_file_is_an_error_naming_it(tmp_path) -> None:
    key = "absolutely_sw02001-A_000123-000245"
    _write_real(tmp_path, {key: np.zeros((122, 39), np.float32)})
    path = tmp_path / "swbd.dev.npz"
    path.write_bytes(path.read_bytes()[:-50])
    with pytest.raises(SwitchboardFormatError, match=r"swbd\.dev\.npz: not a readable \.npz"):
        load_word_split(tmp_path, "dev")


# --- voices and channel conditions ---------------------------------------------------------------


@pytest.mark.parametrize("preset", ["smoke", "embedded"])
def test_train_dev_test_voice_variants_are_disjoint(preset) -> None:
    cfg = wc.word_corpus_config(preset)
    speakers = wc.split_speakers(cfg, seed=0)
    variants = {split: {v.variant for v in voices} for split, voices in speakers.items()}
    assert {split: len(v) for split, v in speakers.items()} == cfg.speakers
    assert variants["train"].isdisjoint(variants["dev"] | variants["test"])
    assert variants["dev"].isdisjoint(variants["test"])
    assert all(cfg.min_rate <= v.rate <= cfg.max_rate for vs in speakers.values() for v in vs)


def test_generated_splits_share_no_variant(corpus) -> None:
    out, _ = corpus
    variants = {
        split: {
            s.custom["espeak_variant"]
            for s in read_supervisions(out / wc.MANIFEST_DIR / f"{split}_supervisions.jsonl.gz")
        }
        for split in ("train", "dev", "test")
    }
    assert variants["train"].isdisjoint(variants["dev"] | variants["test"])


def test_too_many_splits_for_the_variants_is_a_config_error(monkeypatch) -> None:
    from audiorepro.data.embedded import espeak

    real = espeak.disjoint_voices

    def few_variants(groups, seed, language, first_id):
        return real(groups, seed, language, first_id, male_variants=("m1", "m2"))

    monkeypatch.setattr(wc, "disjoint_voices", few_variants)
    with pytest.raises(ConfigError, match="3 groups need a male speaker .* only 2 variants"):
        wc.split_speakers(SMOKE, seed=0)


def test_mixed_channels_are_recorded_and_change_the_sides(tmp_path) -> None:
    cfg = dataclasses.replace(
        SMOKE, train_speakers=4, dev_speakers=1, test_speakers=1, sentences_per_speaker=2
    )
    mixed = dataclasses.replace(cfg, channels="mixed")
    conditions = wc.split_conditions(mixed, seed=0)
    assert sorted(conditions["train"]) == ["clean", "noise", "reverb", "telephone"]
    counts = wc.generate_word_corpus(tmp_path / "mixed", "smoke", 0, config=mixed)
    clean = wc.generate_word_corpus(tmp_path / "clean", "smoke", 0, config=cfg)
    assert counts["train"]["channel_conditions"] == {c: 1 for c in conditions["train"]}
    assert clean["train"]["channel_conditions"] == {"clean": 4}
    sups = read_supervisions(tmp_path / "mixed" / wc.MANIFEST_DIR / "train_supervisions.jsonl.gz")
    by_side = {s.recording_id: s.custom["channel"] for s in sups}
    for side, channel in by_side.items():
        a, _ = load_audio(tmp_path / "mixed" / "audio" / f"{side}.wav", None)
        b, _ = load_audio(tmp_path / "clean" / "audio" / f"{side}.wav", None)
        assert a.shape == b.shape
        assert np.array_equal(a, b) == (channel == "clean")
    with pytest.raises(ConfigError, match="channels must be one of"):
        dataclasses.replace(cfg, channels="phone")


def test_accents_are_balanced_per_split_recorded_and_change_the_words_phones(tmp_path) -> None:
    cfg = dataclasses.replace(
        SMOKE, train_speakers=4, dev_speakers=1, test_speakers=2, sentences_per_speaker=2
    )
    # the default: every speaker American English, the voices otherwise unchanged
    plain = wc.split_speakers(cfg, seed=0)
    assert {v.language for vs in plain.values() for v in vs} == {"en-us"}
    four = "en-us,en-029,en-gb-scotland,en-gb-x-rp"
    accented = wc.split_speakers(dataclasses.replace(cfg, accents=four), seed=0)
    assert sorted(v.language for v in accented["train"]) == sorted(four.split(","))
    assert len({v.language for v in accented["test"]}) == 2
    for split in plain:  # only the accent differs
        assert [dataclasses.replace(v, language="en-us") for v in accented[split]] == plain[split]
    assert accented == wc.split_speakers(dataclasses.replace(cfg, accents=four), seed=0)

    counts = wc.generate_word_corpus(
        tmp_path / "acc", "smoke", 0, config=dataclasses.replace(cfg, accents=four)
    )
    assert counts["train"]["sides"] == 4
    sups = read_supervisions(tmp_path / "acc" / wc.MANIFEST_DIR / "train_supervisions.jsonl.gz")
    by_speaker = {s.speaker: s.custom["espeak_language"] for s in sups}
    assert by_speaker == {v.name: v.language for v in accented["train"]}
    # some word is said with other phones by a speaker of another accent
    phones = {}
    for s in sups:
        phones.setdefault(s.text, {})[s.custom["espeak_language"]] = tuple(
            a.symbol for a in s.alignment["phone"]
        )
    assert any(len(set(by.values())) > 1 for by in phones.values())

    for bad, message in [
        ("en-au", "expected eSpeak English accents"),
        ("", "expected eSpeak English accents"),
        ("en-us,en-us", "names an accent twice"),
    ]:
        with pytest.raises(ConfigError, match=message):
            dataclasses.replace(cfg, accents=bad)
