"""Embedded ZeroSpeech 2019 corpus and the ZeroSpeech recipe: layout, ABX items, determinism."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiorepro.config import ConfigError
from audiorepro.data.embedded import zerospeech_corpus as zc
from audiorepro.data.embedded.atomic import matches
from audiorepro.data.embedded.channels import CONDITIONS
from audiorepro.data.manifests import (
    check_manifest_dir,
    read_recordings,
    read_supervisions,
)
from audiorepro.data.recipes.zerospeech import (
    ITEM_HEADER,
    AbxItem,
    ZeroSpeechFormatError,
    prepare_zerospeech2019,
    read_bitrate_filelist,
    read_item_file,
    read_synthesis_list,
    speaker_of,
    write_item_file,
)

SMOKE = zc.zerospeech_config("smoke")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("zs") / "smoke"
    counts = zc.generate_zerospeech_corpus(out, "smoke", seed=0)
    return out, counts


def _supervisions(lang_dir: Path, split: str) -> dict[str, object]:
    path = lang_dir / zc.MANIFEST_DIR / f"{split}_supervisions.jsonl.gz"
    return {s.id: s for s in read_supervisions(path)}


def _brute_force_triplet_members(items: list[AbxItem]) -> set[int]:
    """Indices of items in at least one across-speaker triplet, by enumerating every (A, B, X)."""
    members = set()
    for (ia, a), (ib, b), (ix, x) in itertools.product(enumerate(items), repeat=3):
        if (
            a.context == b.context == x.context
            and a.phone == x.phone
            and b.phone != a.phone
            and a.speaker == b.speaker
            and x.speaker != a.speaker
        ):
            members.update((ia, ib, ix))
    return members


# --- configuration -----------------------------------------------------------------------------


def test_unknown_preset_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="'paper'.*valid: smoke, embedded"):
        zc.zerospeech_config("paper")
    with pytest.raises(ConfigError, match="unknown preset 'tiny'"):
        zc.generate_zerospeech_corpus("/nonexistent/never-created", "tiny")


def test_config_rejects_impossible_sizes() -> None:
    base = SMOKE.english
    with pytest.raises(ConfigError, match="test_speakers must be >= 2"):
        zc.LanguageCorpusConfig(**{**zc.to_dict(base), "test_speakers": 1})
    with pytest.raises(ConfigError, match="excerpt_sentences = 5 exceeds excerpt_pool = 2"):
        zc.LanguageCorpusConfig(**{**zc.to_dict(base), "excerpt_pool": 2})
    with pytest.raises(ConfigError, match="bitrate_sentences = 3 exceeds full_sentences"):
        zc.LanguageCorpusConfig(**{**zc.to_dict(base), "bitrate_sentences": 3})


def test_embedded_preset_sizes_follow_the_brief() -> None:
    emb = zc.zerospeech_config("embedded")
    en, sur = emb.english, emb.surprise
    assert en.unit_speakers + en.test_speakers + en.target_voices >= 30
    assert sur.unit_speakers + sur.test_speakers + sur.target_voices >= 10
    assert en.target_voices == 2 and sur.target_voices == 1


# --- the generated corpus ----------------------------------------------------------------------


@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_counts_match_the_preset_and_the_files(corpus, language) -> None:
    out, counts = corpus
    cfg, c, lang_dir = SMOKE.language(language), counts[language], out / language
    splits = c["splits"]
    assert splits["train-unit"]["recordings"] == cfg.unit_speakers * cfg.unit_utterances
    assert splits["train-unit"]["speakers"] == cfg.unit_speakers
    assert splits["train-voice"]["recordings"] == cfg.target_voices * cfg.voice_utterances
    assert splits["train-voice"]["speakers"] == cfg.target_voices
    assert splits["test"]["speakers"] == cfg.test_speakers
    assert c["test_sentences"] == cfg.test_speakers * cfg.full_sentences
    assert splits["test"]["recordings"] == c["test_excerpts"] + c["test_sentences"]
    assert c["items"] == c["test_excerpts"] >= 40  # enough items for a smoke ABX
    assert c["sentence_items"] >= 10
    assert c["bitrate_files"] == cfg.test_speakers * cfg.bitrate_sentences
    assert c["synthesis"] == cfg.test_speakers * cfg.synthesis_sentences
    for split, folder in (("train-unit", "train/unit"), ("train-voice", "train/voice")):
        assert len(list((lang_dir / folder).glob("*.wav"))) == splits[split]["recordings"]
    assert len(list((lang_dir / "test").glob("*.wav"))) == splits["test"]["recordings"]
    # 2019 tree only: no stray files in the audio folders
    assert sorted(p.name for p in (lang_dir / "train").iterdir()) == ["unit", "voice"]
    assert all(p.suffix == ".wav" for p in (lang_dir / "test").iterdir())


@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_manifest_check_passes(corpus, language) -> None:
    lang_dir = corpus[0] / language
    problems = check_manifest_dir(
        lang_dir / zc.MANIFEST_DIR, lang_dir, sources=lang_dir / zc.SOURCES_FILE
    )
    assert problems == []


@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_audio_format_and_speaker_names(corpus, language) -> None:
    lang_dir = corpus[0] / language
    for wav in list(lang_dir.rglob("*.wav"))[:40]:
        info = sf.info(str(wav))
        assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    unit = {speaker_of(p.name) for p in (lang_dir / "train/unit").glob("*.wav")}
    voice = {speaker_of(p.name) for p in (lang_dir / "train/voice").glob("*.wav")}
    test = {speaker_of(p.name) for p in (lang_dir / "test").glob("*.wav")}
    assert voice == ({"V001", "V002"} if language == "english" else {"V001"})
    assert unit.isdisjoint(test) and voice.isdisjoint(test) and voice.isdisjoint(unit)
    first = "S001" if language == "english" else "S101"
    assert first in unit


@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_excerpt_items_are_whole_files_and_triplet_capable(corpus, language) -> None:
    lang_dir = corpus[0] / language
    items = read_item_file(lang_dir / zc.ITEM_FILE)
    test_sups = _supervisions(lang_dir, "test")
    excerpts = {k for k, s in test_sups.items() if s.custom["kind"] == "excerpt"}
    assert {it.file for it in items} == excerpts  # every excerpt file is exactly one item
    assert len(items) == len(excerpts)
    for it in items:
        frames = sf.info(str(lang_dir / "test" / f"{it.file}.wav")).frames
        assert it.onset == 0.0
        assert it.offset == pytest.approx(frames / 16000, abs=1e-7)
        assert it.speaker == speaker_of(it.file)
        # the file's phone alignment is exactly prev, phone, next
        phones = [a.symbol for a in test_sups[it.file].alignment["phone"]]
        assert phones == [it.prev_phone, it.phone, it.next_phone]
    # every item takes part in a triplet (brute force over all ordered triples)
    assert _brute_force_triplet_members(items) == set(range(len(items)))
    durations = np.array([it.offset for it in items])
    assert np.median(durations) < 0.5  # triphone-sized, like the real test set
    assert (durations < 0.5).mean() > 0.9


@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_sentence_items_lie_on_phone_boundaries(corpus, language) -> None:
    lang_dir = corpus[0] / language
    items = read_item_file(lang_dir / zc.SENTENCE_ITEM_FILE)
    test_sups = _supervisions(lang_dir, "test")
    assert _brute_force_triplet_members(items) == set(range(len(items)))
    for it in items:
        sup = test_sups[it.file]
        assert sup.custom["kind"] == "sentence"
        phones = sup.alignment["phone"]
        k = next(i for i, p in enumerate(phones) if abs(p.start - it.onset) < 1e-6)
        assert phones[k].symbol == it.phone
        assert phones[k].end == pytest.approx(it.offset, abs=1e-6)
        assert (phones[k - 1].symbol, phones[k + 1].symbol) == it.context
        assert it.offset <= sup.duration


@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_alignments_are_monotone_and_nested(corpus, language) -> None:
    lang_dir = corpus[0] / language
    for split in ("train-unit", "train-voice", "test"):
        for sup in _supervisions(lang_dir, split).values():
            if sup.custom["kind"] != "sentence":
                continue
            phones, words = sup.alignment["phone"], sup.alignment["word"]
            assert sup.text and words and phones
            for seq in (phones, words):
                for prev, nxt in itertools.pairwise(seq):
                    assert prev.end <= nxt.start + 1e-9
                assert seq[-1].end <= sup.duration + 1e-9
            for p in phones:  # every phone inside exactly one word
                inside = [w for w in words if w.start - 1e-9 <= p.start and p.end <= w.end + 1e-9]
                assert len(inside) == 1


@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_file_lists(corpus, language) -> None:
    lang_dir = corpus[0] / language
    test_sups = _supervisions(lang_dir, "test")
    bitrate = read_bitrate_filelist(lang_dir / zc.BITRATE_FILELIST)
    for name, duration in bitrate:
        stem = name[: -len(".txt")]
        assert test_sups[stem].custom["kind"] == "sentence"
        frames = sf.info(str(lang_dir / "test" / f"{stem}.wav")).frames
        assert f"{duration:.6f}" == f"{frames / 16000:.6f}"  # 6 decimals, as the real list
    embedding = read_bitrate_filelist(lang_dir / zc.EMBEDDING_FILELIST)
    assert sorted(n[:-4] for n, _ in embedding) == sorted(test_sups)
    voices = {speaker_of(p.name) for p in (lang_dir / "train/voice").glob("*.wav")}
    synthesis = read_synthesis_list(lang_dir / zc.SYNTHESIS_LIST)
    assert synthesis
    for source, voice in synthesis:
        assert (lang_dir / f"{source}.wav").is_file() and voice in voices
        assert test_sups[source[len("test/") :]].custom["kind"] == "sentence"


def test_recipe_reads_the_generated_corpus_like_a_real_one(corpus, tmp_path) -> None:
    lang_dir = corpus[0] / "english"
    counts = prepare_zerospeech2019(lang_dir, tmp_path / "manifests")
    for split in ("train-unit", "train-voice", "test"):
        ours = read_recordings(lang_dir / zc.MANIFEST_DIR / f"{split}_recordings.jsonl.gz")
        recipe = read_recordings(tmp_path / "manifests" / f"{split}_recordings.jsonl.gz")
        assert recipe == ours
        assert counts[split]["recordings"] == len(ours)
        sups = read_supervisions(tmp_path / "manifests" / f"{split}_supervisions.jsonl.gz")
        assert all(s.speaker == speaker_of(s.id) and s.language == "en" for s in sups)
    problems = check_manifest_dir(
        tmp_path / "manifests", lang_dir, sources=lang_dir / zc.SOURCES_FILE
    )
    assert problems == []


def test_same_seed_gives_byte_identical_files(corpus, tmp_path) -> None:
    def digests(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    again = tmp_path / "again"
    zc.generate_zerospeech_corpus(again, "smoke", seed=0)
    first, second = digests(corpus[0]), digests(again)
    assert len(first) > 150 and first == second


def test_complete_corpus_is_reused_and_a_partial_one_is_not(corpus, tmp_path) -> None:
    out, counts = corpus
    marker = json.loads((out / zc.MARKER).read_text())
    assert (marker["preset"], marker["seed"], marker["generator"]) == (
        "smoke",
        0,
        "zerospeech2019",
    )
    mtime = (out / zc.MARKER).stat().st_mtime_ns
    again = zc.generate_zerospeech_corpus(out, "smoke", seed=0)
    assert again["reused"] is True and again["english"] == counts["english"]
    assert (out / zc.MARKER).stat().st_mtime_ns == mtime

    # A folder with files but no marker (an interrupted copy, someone else's data) is never
    # taken for a corpus, nor deleted.
    partial = tmp_path / "partial"
    (partial / "english" / "train" / "unit").mkdir(parents=True)
    (partial / "english" / "train" / "unit" / "S001_0001.wav").write_bytes(b"RIFF")
    with pytest.raises(FileExistsError, match="no .complete marker"):
        zc.generate_zerospeech_corpus(partial, "smoke", seed=0)
    assert (partial / "english" / "train" / "unit" / "S001_0001.wav").exists()

    # A crashed run's temporary sibling (dead pid) is not the corpus and gets cleaned up.
    target = tmp_path / "fresh"
    stale = tmp_path / f".fresh.partial-{2**22 + 12345}-abcd"
    (stale / "english").mkdir(parents=True)
    (stale / zc.MARKER).write_text(json.dumps({"preset": "smoke", "seed": 0}))
    assert zc.read_marker(target) is None
    tiny = zc.ZeroSpeechCorpusConfig(
        english=zc.LanguageCorpusConfig(**{**zc.to_dict(SMOKE.english), "unit_utterances": 1}),
        surprise=zc.LanguageCorpusConfig(**{**zc.to_dict(SMOKE.surprise), "unit_utterances": 1}),
    )
    result = zc.generate_zerospeech_corpus(target, "smoke", seed=0, config=tiny)
    assert result["reused"] is False and not stale.exists()
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700


# --- ABX triplets --------------------------------------------------------------------------------


def _item(phone: str, ctx: tuple[str, str], speaker: str) -> AbxItem:
    return AbxItem("f", 0.0, 1.0, phone, ctx[0], ctx[1], speaker)


def test_triplet_mask_hand_computed() -> None:
    c1, c2 = ("p", "n"), ("q", "n")
    items = [
        _item("a", c1, "s1"),  # A
        _item("b", c1, "s1"),  # B
        _item("a", c1, "s2"),  # X
        _item("c", c2, "s1"),  # alone in its context
        _item("b", c1, "s3"),  # X of (A=b s1, B=a s1)
        _item("d", c1, "s4"),  # s4 has one phone; nobody else says d
        _item("a", c2, "s1"),  # context c2: two phones by s1, no other speaker
    ]
    assert zc.triplet_mask(items) == [True, True, True, False, True, False, False]
    assert zc.triplet_capable(items) == [items[i] for i in (0, 1, 2, 4)]


def test_triplet_mask_matches_brute_force_on_random_items() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(1, 30))
        items = [
            _item(
                str(rng.choice(list("abc"))),
                (str(rng.choice(list("xy"))), str(rng.choice(list("xz")))),
                str(rng.choice(["s1", "s2", "s3"])),
            )
            for _ in range(n)
        ]
        expected = _brute_force_triplet_members(items)
        assert zc.triplet_mask(items) == [i in expected for i in range(n)]


# --- the recipe on hand-written files in the real format -----------------------------------------


def test_read_item_file_real_format(tmp_path) -> None:
    path = tmp_path / "byCtxt_acSpkr.item"
    path.write_text(
        "#file onset offset #phone prev-phone next-phone speaker\n"
        "S002_0006942614 0 0.2350 AH D N S002\n"
        "\n"
        "S130_0000000001 0.0 0.1875 IY B T S130\n"
    )
    items = read_item_file(path)
    assert items == [
        AbxItem("S002_0006942614", 0.0, 0.235, "AH", "D", "N", "S002"),
        AbxItem("S130_0000000001", 0.0, 0.1875, "IY", "B", "T", "S130"),
    ]
    out = write_item_file(tmp_path / "copy.item", items)
    assert read_item_file(out) == items
    assert out.read_text().splitlines()[0] == " ".join(ITEM_HEADER)
    # written by a Windows editor: a byte-order mark and CRLF line ends read the same
    windows = tmp_path / "windows.item"
    windows.write_bytes(path.read_text().replace("\n", "\r\n").encode("utf-8-sig"))
    assert read_item_file(windows) == items


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty item file"),
        ("#file onset offset #phone speaker\n", r":1: expected the header"),
        ("#file onset offset #phone prev-phone next-phone speaker\nS1_1 0 0.2 AH D N\n", r":2: expected 7 fields"),
        ("#file onset offset #phone prev-phone next-phone speaker\nS1_1 0.3 0.2 AH D N S1\n", r":2: onset must be < offset"),
        ("#file onset offset #phone prev-phone next-phone speaker\nS1_1 0 abc AH D N S1\n", r":2: offset: expected seconds, got 'abc'"),
        ("#file onset offset #phone prev-phone next-phone speaker\n\nS1_1 0 nan AH D N S1\n", r":3: offset: expected finite"),
        ("#file onset offset #phone prev-phone next-phone speaker\nS1_1 -1 0.2 AH D N S1\n", r":2: onset must be >= 0"),
    ],
)  # fmt: skip
def test_read_item_file_errors_name_file_and_line(tmp_path, content, message) -> None:
    path = tmp_path / "bad.item"
    path.write_text(content)
    with pytest.raises(ZeroSpeechFormatError, match=message) as err:
        read_item_file(path)
    assert str(path) in str(err.value)


def test_read_bitrate_filelist_real_format_and_errors(tmp_path) -> None:
    path = tmp_path / "bitrate_filelist.txt"
    path.write_text("S011_4019527684.txt 4.883875\nS002_0006942614.txt 0.235\n")
    assert read_bitrate_filelist(path) == [
        ("S011_4019527684.txt", 4.883875),
        ("S002_0006942614.txt", 0.235),
    ]
    for content, message in (
        ("S011_4019527684.txt\n", r":1: expected 2 fields"),
        ("S011_4019527684.wav 4.8\n", r":1: expected an embedding file name ending in .txt"),
        ("S011_4019527684.txt four\n", r":1: duration: expected seconds"),
        (
            "S011_1.txt 1.0\nS011_1.txt 2.0\n",
            r":2: S011_1.txt is listed twice \(first on line 1\)",
        ),
        ("S011_1.txt 0\n", r":1: duration must be > 0"),
    ):
        path.write_text(content)
        with pytest.raises(ZeroSpeechFormatError, match=message):
            read_bitrate_filelist(path)


def test_prepare_real_layout(tmp_path) -> None:
    root = tmp_path / "2019" / "surprise"
    tone = (0.1 * np.sin(np.linspace(0, 200, 8000))).astype(np.float32)
    for rel in (
        "train/unit/S015_0000123456.wav",
        "train/unit/S016_0000000042.wav",
        "train/voice/V001_0000654321.wav",
        "test/S009_117291.wav",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(root / rel), tone, 16000, subtype="PCM_16")
    counts = prepare_zerospeech2019(root)
    assert counts["train-unit"] == {"recordings": 2, "supervisions": 2, "speakers": 2}
    sups = read_supervisions(root / "manifests" / "test_supervisions.jsonl.gz")
    assert [(s.id, s.speaker, s.language, s.duration) for s in sups] == [
        ("S009_117291", "S009", "id", 0.5)
    ]
    recs = read_recordings(root / "manifests" / "train-voice_recordings.jsonl.gz")
    assert recs[0].sources[0].source == "train/voice/V001_0000654321.wav"
    assert check_manifest_dir(root / "manifests", root) == []

    sf.write(str(root / "test" / "nospeaker.wav"), tone, 16000)
    with pytest.raises(ZeroSpeechFormatError, match=r"nospeaker\.wav.*prefix before the first"):
        prepare_zerospeech2019(root)
    with pytest.raises(ZeroSpeechFormatError, match="missing folder"):
        prepare_zerospeech2019(tmp_path / "2019", tmp_path / "m")


# --- voices and channel conditions ---------------------------------------------------------------


@pytest.mark.parametrize("preset", ["smoke", "embedded"])
@pytest.mark.parametrize("language", zc.LANGUAGES)
def test_unit_and_test_voice_variants_are_disjoint(preset, language) -> None:
    cfg = zc.zerospeech_config(preset).language(language)
    unit, test, targets = zc.speaker_voices(language, cfg, seed=0)
    assert (len(unit), len(test)) == (cfg.unit_speakers, cfg.test_speakers)
    unit_variants = {v.variant for v in unit}
    test_variants = {v.variant for v in test}
    assert unit_variants.isdisjoint(test_variants)
    assert {v.variant for v in targets}.isdisjoint(unit_variants | test_variants)
    names = [v.name for v in unit + test]
    assert len(set(names)) == len(names)


def test_generated_test_speakers_use_no_training_variant(corpus) -> None:
    for language in zc.LANGUAGES:
        lang_dir = corpus[0] / language
        variants = {
            split: {s.custom["espeak_variant"] for s in _supervisions(lang_dir, split).values()}
            for split in ("train-unit", "train-voice", "test")
        }
        assert variants["train-unit"].isdisjoint(variants["test"])
        assert variants["train-voice"].isdisjoint(variants["train-unit"] | variants["test"])


def test_a_split_that_cannot_be_disjoint_is_a_config_error() -> None:
    from audiorepro.data.embedded.espeak import disjoint_voices

    with pytest.raises(ConfigError, match="cannot make the speaker groups .* disjoint"):
        disjoint_voices([2, 2, 2], 0, female_variants=("f1", "f3"))
    # two female variants are enough for two groups
    train, test = disjoint_voices([2, 2], 0, female_variants=("f1", "f3"))
    assert {v.variant for v in train}.isdisjoint({v.variant for v in test})


def test_channel_fields_are_checked() -> None:
    base = zc.to_dict(SMOKE.english)
    for key, value, message in (
        ("channels", "studio", "channels must be one of"),
        ("noise_color", "brown", "noise_color must be one of"),
        ("snr_db", 100.0, "snr_db must be in"),
        ("rt60_s", 0.0, "rt60_s must be in"),
    ):
        with pytest.raises(ConfigError, match=message):
            zc.LanguageCorpusConfig(**{**base, key: value})


def test_mixed_channels_degrade_each_speaker_and_are_not_reused_as_clean(corpus, tmp_path) -> None:
    lang = dict(zc.to_dict(SMOKE.english), unit_speakers=4, test_speakers=4, unit_utterances=1)
    lang.update(voice_utterances=1, channels="mixed", snr_db=10.0)
    cfg = zc.LanguageCorpusConfig(**lang)
    unit_conditions, test_conditions = zc.speaker_conditions("english", cfg, seed=0)
    assert sorted(unit_conditions) == sorted(test_conditions) == sorted(CONDITIONS)
    root = tmp_path / "english"
    counts = zc._generate_language(root, "english", cfg, seed=0)
    assert counts["channel_conditions"]["test"] == {c: 1 for c in CONDITIONS}
    clean_cfg = zc.LanguageCorpusConfig(**{**lang, "channels": "none"})
    clean_root = tmp_path / "clean" / "english"
    zc._generate_language(clean_root, "english", clean_cfg, seed=0)
    sups = _supervisions(root, "train-unit")
    for sup in sups.values():
        wav, _ = sf.read(root / "train" / "unit" / f"{sup.id}.wav", dtype="float32")
        clean, _ = sf.read(clean_root / "train" / "unit" / f"{sup.id}.wav", dtype="float32")
        assert wav.shape == clean.shape  # alignments stay valid
        if sup.custom["channel"] == "clean":
            assert np.array_equal(wav, clean)
        elif sup.custom["channel"] == "noise":
            assert float(np.mean(clean**2) / np.mean((wav - clean) ** 2)) == pytest.approx(
                10.0, rel=0.15
            )
        else:
            assert not np.array_equal(wav, clean)

    # The channel settings are part of the marker: a smoke corpus is not reused for other ones.
    out, _ = corpus
    other = zc.ZeroSpeechCorpusConfig(
        english=dataclasses.replace(SMOKE.english, channels="telephone"), surprise=SMOKE.surprise
    )
    settings = zc.corpus_settings("zerospeech2019", "smoke", 0, other)
    assert not matches(zc.read_marker(out), settings)
    assert matches(zc.read_marker(out), zc.corpus_settings("zerospeech2019", "smoke", 0, SMOKE))


def test_score_units_scores_both_modes_as_two_single_mode_calls(corpus) -> None:
    """score_units' within error (one abx_modes call for both modes) is the error a separate
    within-speaker abx call gives, and its across error the across call's."""
    from audiorepro.experiments.zerospeech.evaluate import score_units
    from audiorepro.metrics.abx import abx

    lang_dir = corpus[0] / "english"
    rng = np.random.default_rng(0)
    names = sorted(p.stem for p in (lang_dir / "test").glob("*.wav"))
    shift = 0.04
    vectors = {
        n: rng.normal(size=(int(sf.info(str(lang_dir / "test" / f"{n}.wav")).duration / shift) + 3, 4))
        for n in names
    }  # fmt: skip
    codes = {n: rng.integers(0, 8, size=len(v)) for n, v in vectors.items()}
    metrics = score_units(codes, vectors, lang_dir, shift, within=True)
    item = lang_dir / zc.ITEM_FILE
    assert metrics["abx_across"] == abx(vectors, item, "angular", "across", shift).error
    assert metrics["abx_within"] == abx(vectors, item, "angular", "within", shift).error
    assert "abx_within" not in score_units(codes, vectors, lang_dir, shift)
