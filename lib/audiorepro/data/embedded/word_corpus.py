"""The embedded Switchboard-like word corpus for acoustic word embeddings (AWE chapter).

Switchboard word segments cannot be downloaded, so this module synthesises English sentences
with eSpeak NG (:mod:`~audiorepro.data.embedded.espeak`), cuts word tokens out of them with the
exact word alignments (in context, so they are coarticulated like conversational words), and
writes them in the layout the chapter's Switchboard loader reads
(:mod:`audiorepro.data.recipes.switchboard`; Kamper et al. 2016, He et al. 2017)::

    <out_dir>/
      .complete                  JSON marker: preset, seed, config, counts, version
      audio/S001-A.wav           one "conversation side" per speaker: its sentences, 16 kHz
      train.list dev.list test.list   keys word_S001-A_000123-000245 (10 ms frames in the side)
      swbd.train.npz ...         key -> float32 (frames, 39) MFCC + Δ + ΔΔ, per-speaker CMVN
      vocab.json                 words_to_ids, phones_to_ids (45 symbols), word_to_phones
      manifests/{train,dev,test}_{recordings,supervisions}.jsonl.gz   side recordings, tokens
      sources.yaml               expected counts for ``python -m audiorepro.data check``

**Selection, as on Switchboard** (``shared/reference/awe.md`` §4, Settle's ``kaldi/run.sh``):
written words of at least ``min_chars`` = 6 characters, tokens of 50 to 200 frames of 10 ms,
and train words occurring at least twice (train types with one token are dropped). eSpeak's
default rate (175 words per minute) makes most six-letter words shorter than 50 frames, so the
speakers of this corpus talk slowly (80-115 words per minute), which brings almost all target
tokens into range; tokens outside it are dropped, not stretched. Six characters suffice (no
relaxation to five was needed): the embedded vocabulary has 215 such words.

**Splits by speaker.** Speakers (:func:`split_speakers`: ``disjoint_voices``, slowed down) are
split into train, dev and test; each has one side. No eSpeak voice variant occurs in two splits
(``ConfigError`` when the variant pools cannot serve the splits). With ``channels`` set, each
side is heard through one channel condition (:func:`split_conditions`;
:mod:`~audiorepro.data.embedded.channels`), applied to the whole side before its features are
computed. With several ``accents`` each speaker talks in one of eSpeak's English accents (its
pronunciation rules: rhoticity, vowels), so tokens of one word differ in phones as well as voice
between speakers; supervisions record ``custom["espeak_variant"]``,
``custom["espeak_language"]`` and ``custom["channel"]``. A
seeded subset of the target words (``unseen_types``) never occurs in train sentences, so dev
and test hold both seen and unseen word types. Sentences mix target words (probability
``target_fraction``) with shorter words of the vocabulary, which give the targets varied
neighbours.

**Pronunciations.** From the CMU dictionary (first pronunciation, stress removed,
:func:`~audiorepro.data.embedded.lexicon.pronunciation`) over the 39 ARPAbet phones, inside the
45-symbol Switchboard-like set :data:`~audiorepro.data.embedded.lexicon.SWITCHBOARD_SYMBOLS`
that ``vocab.json`` numbers (ids from 1; 0 is padding). A word missing from the dictionary is a
:class:`~audiorepro.data.embedded.lexicon.LexiconError` naming it.

**Features** are computed on each side as written to disk (16-bit): 13 MFCCs, CMVN over the
side (one side per speaker, so per-speaker CMVN as in Kamper's ``cmvn_dd.sh``), then Δ and ΔΔ
(:func:`audiorepro.features.mfcc_features`); a token's matrix is frames ``[start, end)`` of its
side. ``swbd.<split>.npz`` is written with fixed zip timestamps, so equal seeds give
byte-identical files, as for everything else here. Generation is atomic and reused like the
ZeroSpeech corpus (:func:`~audiorepro.data.embedded.atomic.generate_atomically`).
"""

from __future__ import annotations

import dataclasses
import io
import os
import zipfile
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.config import ConfigError, field
from audiorepro.data.embedded.atomic import generate_atomically, write_json
from audiorepro.data.embedded.channels import apply_condition, assign_conditions
from audiorepro.data.embedded.corpus_presets import CORPUS_PRESETS, corpus_preset
from audiorepro.data.embedded.espeak import SAMPLE_RATE, Voice, disjoint_voices, synthesize
from audiorepro.data.embedded.lexicon import (
    SWITCHBOARD_SYMBOLS,
    cmu_dictionary,
    english_vocabulary,
    pronunciation,
    sentence_text,
    strip_stress,
)
from audiorepro.data.embedded.zerospeech_corpus import (
    CHANNEL_FIELDS,
    check_channel_fields,
    check_seed,
    corpus_settings,
)
from audiorepro.data.manifests import (
    AlignmentItem,
    AudioSource,
    Recording,
    Supervision,
    write_manifest,
)
from audiorepro.data.recipes.switchboard import SPLITS, format_key
from audiorepro.data.sources import write_sources_yaml
from audiorepro.features import load_audio, mfcc_features, save_audio

AUDIO_DIR = "audio"
VOCAB_FILE = "vocab.json"
MANIFEST_DIR = "manifests"
SOURCES_FILE = "sources.yaml"
FRAMES_PER_SECOND = 100

# Stream ids for np.random.default_rng([seed, role, ...]); 10+ keeps them apart from ZeroSpeech.
_ROLE_VOCAB, _ROLE_RATE, _ROLE_SENTENCE, _ROLE_CHANNEL, _ROLE_ACCENT = 10, 11, 12, 13, 14
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


ACCENTS = (
    "en-us",
    "en-us-nyc",
    "en",
    "en-029",
    "en-gb-scotland",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-gb-x-rp",
)
"""The English accents of eSpeak NG (its ``lang`` files; ``en-shaw``, a script, left out)."""


def accent_list(accents: str) -> tuple[str, ...]:
    """The accents of ``WordCorpusConfig.accents`` (comma separated) as a tuple.

    Raises:
        ConfigError: an empty list, a repeated accent or one not in :data:`ACCENTS`.
    """
    names = tuple(a.strip() for a in str(accents).split(","))
    bad = [a for a in names if a not in ACCENTS]
    if bad or not names:
        raise ConfigError(
            f"accents: expected eSpeak English accents from {', '.join(ACCENTS)} (comma "
            f"separated), got {accents!r}"
        )
    if len(set(names)) < len(names):
        raise ConfigError(f"accents: {accents!r} names an accent twice")
    return names


@dataclasses.dataclass(frozen=True)
class WordCorpusConfig:
    """Sizes and selection rules of the embedded Switchboard-like word corpus."""

    train_speakers: int = field(help="speakers (one side each) of the train split")
    dev_speakers: int = field(help="speakers of the dev split")
    test_speakers: int = field(help="speakers of the test split")
    sentences_per_speaker: int = field(help="synthesised sentences per speaker")
    unseen_types: int = field(help="target words kept out of train (dev/test only)")
    word_types: int = field(
        0, help="target words used (a seeded subset of the >= min_chars words; 0: all)"
    )
    min_chars: int = field(6, help="fewest written characters of a target word (Switchboard: 6)")
    min_frames: int = field(50, help="fewest 10 ms frames of a token (Switchboard: 50)")
    max_frames: int = field(200, help="most 10 ms frames of a token (Switchboard: 200)")
    min_train_tokens: int = field(2, help="tokens a word needs to stay in train (Switchboard: 2)")
    min_rate: int = field(80, help="slowest speaking rate (eSpeak words per minute)")
    max_rate: int = field(115, help="fastest speaking rate (eSpeak words per minute)")
    target_fraction: float = field(0.7, help="probability that a sentence word is a target word")
    min_words: int = field(4, help="fewest words in a sentence")
    max_words: int = field(7, help="most words in a sentence")
    gap_s: float = field(0.3, help="silence before each sentence in a side (s)")
    feature_dim: int = field(39, help="MFCC + Δ + ΔΔ dimension: 39 (13 x 3) or 36 (12 x 3)")
    channels: str = field(
        "none",
        help="channel conditions of the sides: none, telephone, noise, reverb (every speaker), "
        "or mixed (each speaker one of clean, telephone, noise, reverb, balanced per split; "
        "audiorepro.data.embedded.channels)",
    )
    snr_db: float = field(20.0, help="signal-to-noise ratio of the noise condition (dB)")
    noise_color: str = field("pink", help="noise of the noise condition: white or pink")
    rt60_s: float = field(0.4, help="reverberation time of the reverb condition (s)")
    accents: str = field(
        "en-us",
        help="eSpeak English accents of the speakers: one language (every speaker) or several, "
        "comma separated, each speaker one of them, balanced per split (seeded; e.g. "
        f"{','.join(ACCENTS)})",
    )

    def __post_init__(self) -> None:
        check_channel_fields(self)
        accent_list(self.accents)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("target_fraction", "gap_s", "accents", *CHANNEL_FIELDS):
                continue
            low = 0 if f.name in ("word_types", "unseen_types") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{f.name} must be an integer >= {low}, got {value!r}")
        if not 0.0 < self.target_fraction <= 1.0:
            raise ConfigError(f"target_fraction must be in (0, 1], got {self.target_fraction}")
        if not 0.0 <= self.gap_s <= 5.0:
            raise ConfigError(f"gap_s must be in [0, 5] s, got {self.gap_s}")
        if self.min_frames > self.max_frames:
            raise ConfigError(f"min_frames {self.min_frames} > max_frames {self.max_frames}")
        if not 80 <= self.min_rate <= self.max_rate <= 450:
            raise ConfigError(
                f"need 80 <= min_rate <= max_rate <= 450 (eSpeak), got {self.min_rate}, "
                f"{self.max_rate}"
            )
        if self.min_words > self.max_words:
            raise ConfigError(f"min_words {self.min_words} > max_words {self.max_words}")
        if self.word_types and self.unseen_types >= self.word_types:
            raise ConfigError(
                f"unseen_types ({self.unseen_types}) must be < word_types ({self.word_types})"
            )
        if self.feature_dim not in (36, 39):
            raise ConfigError(f"feature_dim must be 36 or 39, got {self.feature_dim}")

    @property
    def speakers(self) -> dict[str, int]:
        """Speakers per split."""
        return {"train": self.train_speakers, "dev": self.dev_speakers, "test": self.test_speakers}


def word_corpus_config(preset: str) -> WordCorpusConfig:
    """The configuration of a preset (``smoke`` or ``embedded``).

    Raises:
        ConfigError: an unknown preset (``paper`` included: it uses the real corpus).
    """
    if preset not in CORPUS_PRESETS:
        raise ConfigError(
            f"unknown preset {preset!r} for the embedded word corpus; valid: "
            f"{', '.join(CORPUS_PRESETS)} (the paper preset reads the real Switchboard word "
            "segments with audiorepro.data.recipes.switchboard)"
        )
    return corpus_preset(WordCorpusConfig, preset, "word_corpus")


def word_pronunciations(word: str) -> list[list[str]]:
    """Every CMU dictionary pronunciation of ``word``, stress removed, the first first.

    Raises:
        LexiconError: the word is not in the dictionary (the message names it).
    """
    first = list(pronunciation(word))
    prons = [first]
    for pron in cmu_dictionary()[word.lower()]:
        bare = list(strip_stress(pron))
        if bare not in prons:
            prons.append(bare)
    return prons


def target_words(config: WordCorpusConfig, seed: int) -> tuple[list[str], list[str]]:
    """``(seen, unseen)`` target words: ``seen`` may occur in train, ``unseen`` only in dev/test.

    Targets are the vocabulary words of at least ``min_chars`` characters (a seeded subset of
    ``word_types`` of them when non-zero); each must be in the CMU dictionary (LexiconError).
    """
    vocab = english_vocabulary()
    long_words = [w for w in vocab if len(w) >= config.min_chars]
    for word in long_words:
        pronunciation(word)
    if config.word_types > len(long_words):
        raise ConfigError(
            f"word_types = {config.word_types}, but only {len(long_words)} words have >= "
            f"{config.min_chars} characters"
        )
    order = np.random.default_rng([seed, _ROLE_VOCAB]).permutation(len(long_words))
    chosen = [long_words[int(i)] for i in order]
    if config.word_types:
        chosen = chosen[: config.word_types]
    if config.unseen_types >= len(chosen):
        raise ConfigError(
            f"unseen_types = {config.unseen_types} leaves no seen word of {len(chosen)}"
        )
    unseen = sorted(chosen[: config.unseen_types])
    seen = sorted(chosen[config.unseen_types :])
    return seen, unseen


def split_speakers(config: WordCorpusConfig, seed: int) -> dict[str, list[Voice]]:
    """Slow speakers per split (``S001...`` over train, dev, test in that order).

    Voices come from :func:`~audiorepro.data.embedded.espeak.disjoint_voices`: no eSpeak voice
    variant is used in two splits; each speaker's rate is then redrawn in
    [min_rate, max_rate], and its accent is ``config.accents``' one, or with several, the next
    of the split's own seeded permutation of them (every accent once per that many speakers).

    Raises:
        ConfigError: the splits cannot be made disjoint (too few variants).
    """
    groups = disjoint_voices(list(config.speakers.values()), seed, "en-us", 1)
    accents = accent_list(config.accents)
    out, k = {}, 0
    for g, (split, voices) in enumerate(zip(config.speakers, groups, strict=True)):
        out[split] = []
        order = (
            np.random.default_rng([seed, _ROLE_ACCENT, g]).permutation(len(accents))
            if len(accents) > 1
            else [0]
        )
        for i, voice in enumerate(voices):
            rng = np.random.default_rng([seed, _ROLE_RATE, k])
            rate = int(rng.integers(config.min_rate, config.max_rate + 1))
            accent = accents[int(order[i % len(accents)])]
            out[split].append(dataclasses.replace(voice, rate=rate, language=accent))
            k += 1
    return out


def split_conditions(config: WordCorpusConfig, seed: int) -> dict[str, list[str]]:
    """The channel condition of each speaker per split
    (:func:`~audiorepro.data.embedded.channels.assign_conditions`, seeded by the corpus
    seed)."""
    conditions = assign_conditions(
        list(config.speakers.values()), config.channels, [seed, _ROLE_CHANNEL]
    )
    return dict(zip(config.speakers, conditions, strict=True))


def _sentence(
    rng: np.random.Generator, targets: list[str], fillers: list[str], cfg: WordCorpusConfig
) -> list[str]:
    length = int(rng.integers(cfg.min_words, cfg.max_words + 1))
    words: list[str] = []
    while len(words) < length:
        pool = targets if rng.random() < cfg.target_fraction else fillers
        word = pool[int(rng.integers(len(pool)))]
        if words and word == words[-1]:
            continue
        words.append(word)
    return words


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """``numpy.savez`` with fixed zip timestamps (byte-identical for equal arrays), atomically.

    ``np.load`` reads it like any npz; keys are written in sorted order.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
            for key in sorted(arrays):
                buffer = io.BytesIO()
                np.lib.format.write_array(
                    buffer, np.ascontiguousarray(arrays[key]), allow_pickle=False
                )
                info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_TIME)
                info.external_attr = 0o644 << 16
                archive.writestr(info, buffer.getvalue())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclasses.dataclass(frozen=True)
class _Token:
    key: str
    word: str
    side: str
    start_s: float
    end_s: float
    start: int
    end: int
    phones: tuple[tuple[str, float, float], ...]


def _write_side(
    root: Path,
    voice: Voice,
    split: str,
    speaker_index: int,
    condition: str,
    targets: set[str],
    vocabulary: tuple[list[str], list[str]],
    cfg: WordCorpusConfig,
    seed: int,
) -> tuple[Recording, list[_Token], np.ndarray, int]:
    """Synthesise one side, write its wav; returns the recording, the in-range target tokens,
    the side's features (T, F) and the number of target tokens dropped for their length."""
    side = f"{voice.name}-A"
    targets_list, fillers = vocabulary
    gap = int(round(cfg.gap_s * SAMPLE_RATE))
    pieces: list[np.ndarray] = []
    offset = 0
    spans: list[tuple[str, float, float, list[tuple[str, float, float]]]] = []
    for j in range(cfg.sentences_per_speaker):
        rng = np.random.default_rng([seed, _ROLE_SENTENCE, speaker_index, j])
        syn = synthesize(sentence_text(_sentence(rng, targets_list, fillers, cfg)), voice)
        pieces += [np.zeros(gap, dtype=np.float32), syn.wav]
        offset += gap
        shift = offset / SAMPLE_RATE
        for (text, start, end), indices in zip(syn.words, syn.word_phones, strict=True):
            phones = [
                (syn.phones[i][0], syn.phones[i][1] + shift, syn.phones[i][2] + shift)
                for i in indices
            ]
            spans.append((text.lower(), start + shift, end + shift, phones))
        offset += syn.wav.shape[0]
    relative = f"{AUDIO_DIR}/{side}.wav"
    side_wav = np.concatenate(pieces)
    if condition != "clean":
        # One channel per conversation side, applied to the whole side (gaps included).
        side_wav = apply_condition(
            side_wav,
            SAMPLE_RATE,
            condition,
            np.random.default_rng([seed, _ROLE_CHANNEL, speaker_index]),
            snr=cfg.snr_db,
            noise_color=cfg.noise_color,
            rt60_s=cfg.rt60_s,
        )
    save_audio(root / relative, side_wav, SAMPLE_RATE)
    # Features from the 16-bit samples on disk, so that they can be recomputed from the wav.
    wav, _ = load_audio(root / relative, None)
    feats = mfcc_features(wav, SAMPLE_RATE, cfg.feature_dim, cmvn=True)  # (T, F)
    recording = Recording(
        id=side,
        sources=(AudioSource("file", (0,), relative),),
        sampling_rate=SAMPLE_RATE,
        num_samples=int(wav.shape[0]),
        duration=wav.shape[0] / SAMPLE_RATE,
        channel_ids=(0,),
    )
    tokens, dropped = [], 0
    for word, start_s, end_s, phones in spans:
        if word not in targets:
            continue  # short filler words, and word pairs eSpeak spoke as one unit
        start = int(round(start_s * FRAMES_PER_SECOND))
        end = int(round(end_s * FRAMES_PER_SECOND))
        if not cfg.min_frames <= end - start <= cfg.max_frames or end > feats.shape[0]:
            dropped += 1
            continue
        key = format_key(word, side, start, end)
        tokens.append(_Token(key, word, side, start_s, end_s, start, end, tuple(phones)))
    return recording, tokens, feats, dropped


def _build(root: Path, cfg: WordCorpusConfig, seed: int) -> dict[str, Any]:
    seen, unseen = target_words(cfg, seed)
    fillers = [w for w in english_vocabulary() if len(w) < cfg.min_chars]
    speakers = split_speakers(cfg, seed)
    conditions = split_conditions(cfg, seed)
    side_voice = {
        f"{voice.name}-A": {
            "espeak_variant": voice.variant,
            "espeak_language": voice.language,
            "channel": condition,
        }
        for split in SPLITS
        for voice, condition in zip(speakers[split], conditions[split], strict=True)
    }
    recordings: dict[str, list[Recording]] = {}
    tokens: dict[str, list[_Token]] = {}
    features: dict[str, dict[str, np.ndarray]] = {}
    dropped_length: dict[str, int] = {}
    index = 0
    for split in SPLITS:
        split_targets = seen if split == "train" else sorted(seen + unseen)
        recordings[split], tokens[split], features[split] = [], [], {}
        dropped_length[split] = 0
        for voice, condition in zip(speakers[split], conditions[split], strict=True):
            rec, side_tokens, feats, dropped = _write_side(
                root,
                voice,
                split,
                index,
                condition,
                set(split_targets),
                (split_targets, fillers),
                cfg,
                seed,
            )
            index += 1
            recordings[split].append(rec)
            tokens[split] += side_tokens
            dropped_length[split] += dropped
            for t in side_tokens:
                features[split][t.key] = feats[t.start : t.end]

    # Switchboard's train rule: a word type needs at least min_train_tokens tokens.
    counts = Counter(t.word for t in tokens["train"])
    rare = {w for w, n in counts.items() if n < cfg.min_train_tokens}
    dropped_rare = sum(counts[w] for w in rare)
    tokens["train"] = [t for t in tokens["train"] if t.word not in rare]
    features["train"] = {t.key: features["train"][t.key] for t in tokens["train"]}

    all_words = sorted({t.word for split in SPLITS for t in tokens[split]})
    vocab = {
        "words_to_ids": {w: i + 1 for i, w in enumerate(all_words)},
        "phones_to_ids": {p: i + 1 for i, p in enumerate(SWITCHBOARD_SYMBOLS)},
        "word_to_phones": {w: word_pronunciations(w) for w in all_words},
    }
    write_json(root / VOCAB_FILE, vocab)

    train_types = {t.word for t in tokens["train"]}
    split_counts: dict[str, Any] = {}
    for split in SPLITS:
        ordered = sorted(tokens[split], key=lambda t: t.key)
        (root / f"{split}.list").write_text(
            "".join(t.key + "\n" for t in ordered), encoding="utf-8"
        )
        write_npz(root / f"swbd.{split}.npz", features[split])
        supervisions = [
            Supervision(
                id=t.key,
                recording_id=t.side,
                start=t.start_s,
                duration=t.end_s - t.start_s,
                channel=0,
                text=t.word,
                language="en",
                speaker=t.side.rsplit("-", 1)[0],
                custom={
                    **side_voice[t.side],
                    "pronunciation": list(pronunciation(t.word)),
                    "start_frame": t.start,
                    "end_frame": t.end,
                },
                alignment={
                    "word": [AlignmentItem(t.word, t.start_s, t.end_s - t.start_s)],
                    "phone": [AlignmentItem(p, s, e - s) for p, s, e in t.phones],
                },
            )
            for t in ordered
        ]
        recs = sorted(recordings[split], key=lambda r: r.id)
        write_manifest(root / MANIFEST_DIR / f"{split}_recordings.jsonl.gz", recs)
        write_manifest(root / MANIFEST_DIR / f"{split}_supervisions.jsonl.gz", supervisions)
        types = {t.word for t in ordered}
        frames = [t.end - t.start for t in ordered]
        split_counts[split] = {
            "sides": len(recs),
            "tokens": len(ordered),
            "types": len(types),
            "seen_types": len(types & train_types),
            "unseen_types": len(types - train_types),
            "seconds": round(sum(r.duration for r in recs), 3),
            "dropped_for_length": dropped_length[split],
            "min_frames": min(frames, default=0),
            "max_frames": max(frames, default=0),
            "channel_conditions": dict(sorted(Counter(conditions[split]).items())),
        }
    split_counts["train"]["dropped_rare_tokens"] = dropped_rare
    _write_word_sources(root, split_counts)
    return split_counts


def _write_word_sources(root: Path, split_counts: Mapping[str, Mapping[str, Any]]) -> None:
    write_sources_yaml(
        root / SOURCES_FILE,
        {
            "name": "swbd_words_embedded",
            "description": (
                "Switchboard-like word segments synthesised offline with eSpeak NG by "
                "audiorepro.data.embedded.word_corpus; Kamper/He list, npz and vocab layout."
            ),
            "homepage": "https://catalog.ldc.upenn.edu/LDC97S62",
            "licence": "Generated locally by audiorepro (MIT); contains no third-party recordings.",
            "citation": _CITATION,
            "sampling_rate": SAMPLE_RATE,
            "files": [],
            "expected_counts": {
                split: {"recordings": c["sides"], "supervisions": c["tokens"]}
                for split, c in split_counts.items()
            },
        },
    )


_CITATION = """@inproceedings{kamper2016deep,
  title = {Deep convolutional acoustic word embeddings using word-pair side information},
  author = {Kamper, Herman and Wang, Weiran and Livescu, Karen},
  booktitle = {Proc. ICASSP},
  pages = {4950--4954},
  year = {2016}
}
"""


def generate_word_corpus(
    out_dir: str | os.PathLike[str],
    preset: str = "embedded",
    seed: int = 0,
    *,
    config: WordCorpusConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Generate the embedded Switchboard-like word corpus into ``out_dir``, or reuse it.

    See the module docstring for the layout and the selection rules. A complete corpus already
    in ``out_dir`` with the same preset, seed, configuration, format and library version is
    reused; otherwise it is written into a temporary sibling folder renamed into place at the
    end, with the marker written last.

    Args:
        out_dir: the corpus folder.
        preset: ``smoke`` or ``embedded`` (the sizes: :func:`word_corpus_config`).
        seed: the corpus seed; equal seeds give byte-identical files.
        config: replaces the preset's configuration (recorded in the marker).
        progress: called with the counts when done (for notebooks).

    Returns:
        ``{split: {"sides", "tokens", "types", "seen_types", "unseen_types", "seconds", ...}}``
        plus ``"reused": bool``.

    Raises:
        ConfigError: an unknown preset or an impossible configuration.
        LexiconError: a target word missing from the CMU dictionary.
        FileExistsError: ``out_dir`` is a non-empty folder without a marker.
    """
    if config is None:
        config = word_corpus_config(preset)
    else:
        word_corpus_config(preset)
    seed = check_seed(seed)
    settings = corpus_settings("swbd_words", preset, seed, config)
    counts, reused = generate_atomically(out_dir, settings, lambda tmp: _build(tmp, config, seed))
    if progress is not None:
        progress(f"word corpus: {counts}")
    return {**counts, "reused": reused}


__all__ = [
    "ACCENTS",
    "WordCorpusConfig",
    "accent_list",
    "generate_word_corpus",
    "split_conditions",
    "split_speakers",
    "target_words",
    "word_corpus_config",
    "word_pronunciations",
    "write_npz",
]
