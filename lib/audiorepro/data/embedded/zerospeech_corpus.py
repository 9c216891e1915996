"""The embedded ZeroSpeech 2019 corpus: synthetic multi-speaker speech in the challenge's layout.

The ZeroSpeech chapter's default preset cannot download the challenge data, so this module
synthesises an English and an Indonesian ("surprise") corpus with eSpeak NG
(:mod:`~audiorepro.data.embedded.espeak`) and writes them exactly as the real 2019 release is
laid out (``shared/reference/zerospeech.md`` §5), so that the real loading code
(:mod:`audiorepro.data.recipes.zerospeech`) runs on it unchanged::

    <out_dir>/
      .complete                          JSON marker: preset, seed, config, counts, version
      english/                           (surprise/ has the same tree, Indonesian, voice V001)
        train/unit/S001_0001.wav         unit-discovery speakers S001..S024 (embedded preset)
        train/voice/V001_0001.wav        target voices V001 (male) and V002 (female)
        test/S025_0137.wav               held-out speakers S025..S032: triphone excerpts and
                                         a few full sentences, ids shuffled per speaker
        abx/byCtxt_acSpkr.item           ABX items: one whole excerpt file per item
        abx/byCtxt_acSpkr_sentences.item ABX items: phones inside the full-sentence test files
        bitrate_filelist.txt             S025_0012.txt 4.883875 (subset of full sentences)
        embedding_filelist.txt           every test file, same format
        synthesis.txt                    test/S025_0012 V002 (files to resynthesise)
        manifests/{train-unit,train-voice,test}_{recordings,supervisions}.jsonl.gz
        sources.yaml                     expected counts for ``python -m audiorepro.data check``

Files are 16 kHz mono 16-bit; the speaker is the file-name prefix before ``_``. File names use
four-digit utterance numbers (``S001_0001``) where the real release uses ten (English) or six
(surprise) digits; every reader here splits on the first ``_`` and does not care. The item
files live in ``abx/`` next to ``test/`` rather than inside it, so that ``test/`` holds only
wavs, as in the real release (whose item and task files ship separately); the file lists sit
where ``zerospeech2020/share/2019/<language>/`` keeps them, at the language level.

Manifests: one whole-file supervision per wav with the speaker, the language code (``en``,
``id``) and ``custom["kind"]`` (``sentence`` or ``excerpt``). Sentences carry their text and
lhotse ``word`` and ``phone`` alignments (ARPAbet for English, eSpeak mnemonics for
Indonesian); an excerpt carries no text (it holds parts of words), only its three phones and,
in ``custom["source_text"]``, the sentence it was cut from.

**Speakers** (:func:`speaker_voices`). English: ``disjoint_voices([unit, test], seed)`` gives
``S001...``; the first ``unit_speakers`` read the unit-discovery sentences, the rest are held
out for the test set; ``target_voices()`` gives ``V001`` (and ``V002``). Indonesian: the same
from ``S101`` and ``V001``. Train and test speakers are disjoint, and so are their eSpeak voice
variants (a configuration that cannot be split so is a ``ConfigError``); the target voices'
variants are used by no other speaker. Each supervision records ``custom["espeak_variant"]``.

**Channels** (``channels``, :func:`speaker_conditions`): every unit and test speaker is heard
through one condition of :mod:`~audiorepro.data.embedded.channels` (clean, telephone band,
noise at ``snr_db``, reverberation with ``rt60_s``), applied to each whole sentence before
excerpts are cut (lengths and alignments unchanged), seeded per utterance; recorded in
``custom["channel"]`` and in the counts. The target voices stay clean.

**Test set.** As in the real English test set (13,078 of 13,529 files shorter than 0.5 s, median
0.235 s), most test files are **triphone excerpts**: a previous phone, a phone and a next phone
cut at eSpeak's exact phone boundaries from a sentence of a held-out speaker, so each excerpt
file is one whole-file ABX item (onset 0, offset = file duration). Only phones whose neighbours
touch them are used (no pause inside a triphone), and at most ``max_excerpts_per_cell`` tokens
of one (phone, context) per speaker are kept. The test speakers read overlapping random subsets
of one shared pool of sentences, so the same triphones recur across speakers. A few full
sentences per test speaker, read from a second shared pool, are test files too: the bitrate
subset, the resynthesis sources and the files of the second item file.

**ABX items.** The header is the official ``#file onset offset #phone prev-phone next-phone
speaker`` (ABXpy ``database.load``), times in seconds with 7 decimals (exact for any multiple
of 1/16000 s). Only items that take part in at least one **across-speaker** triplet are kept
(A and X: same phone and context; B: another phone in that context; A and B: same speaker; X:
another speaker; :func:`triplet_mask`); excerpts that would not are not written at all, so
every excerpt file of ``test/`` is an item. Filtering once is exact: every member of a triplet
takes part in a triplet, so removing the items that take part in none leaves every triplet of
the kept items intact.

**The 2019 time-axis convention.** The official 2019 evaluation (``zerospeech2020``
``_load_features_2019``, and the 2019 docker before it) ignores any timing of the submitted
frames: frame ``i`` of an ``N``-line embedding file is placed at the *relative* time ``i / N``
in [0, 1). Item onsets/offsets in seconds therefore do not select the right frames, and the only
items that work in that mode are **whole files** (an evaluator must take all frames of the file;
an offset in seconds below 1 would select only a prefix). ``byCtxt_acSpkr.item`` holds only such
items. With a known frame shift (the libri-light rule: frames ``[ceil(onset/shift - 0.5),
floor(offset/shift - 0.5))``) the seconds are used directly; ``byCtxt_acSpkr_sentences.item``,
which places the central phone inside a full sentence, works only in that mode. The real 2019
``.item`` content was never public, so the whole-file reading is inferred from the loaders.

**Determinism and reuse.** Every utterance's sentence comes from its own stream
``numpy.random.default_rng([seed, language, role, speaker, utterance])``, so nothing depends on
the order of processing, and eSpeak synthesis is itself deterministic; equal seeds give
byte-identical files (gzip manifests carry no timestamp). The corpus is written into a temporary
sibling folder that is renamed into place once complete, with the :data:`MARKER` written last;
a folder without the marker is never taken for a finished corpus.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.config import ConfigError, field, to_dict
from audiorepro.data.embedded.atomic import (
    MARKER,
    generate_atomically,
    read_marker,
    write_json,
)
from audiorepro.data.embedded.channels import (
    CHANNEL_MODES,
    NOISE_COLORS,
    apply_condition,
    assign_conditions,
)
from audiorepro.data.embedded.corpus_presets import CORPUS_PRESETS, corpus_preset
from audiorepro.data.embedded.espeak import (
    SAMPLE_RATE,
    Synthesis,
    Voice,
    disjoint_voices,
    synthesize,
    target_voices,
)
from audiorepro.data.embedded.lexicon import (
    english_vocabulary,
    indonesian_vocabulary,
    make_sentences,
    sentence_text,
)
from audiorepro.data.manifests import (
    AlignmentItem,
    AudioSource,
    Recording,
    Supervision,
    write_manifest,
)
from audiorepro.data.recipes.zerospeech import (
    LANGUAGE_CODES,
    SPLITS,
    AbxItem,
    write_filelist,
    write_item_file,
)
from audiorepro.data.sources import write_sources_yaml
from audiorepro.features import save_audio

FORMAT_VERSION = 2  # 2: train and test voice variants disjoint; channel conditions
"""Bumped whenever the generator's output changes for the same settings."""

"""Completion marker (JSON) written last into a finished corpus folder."""

LANGUAGES: tuple[str, ...] = ("english", "surprise")
"""The two ZeroSpeech 2019 languages: English (development) and the surprise one (Indonesian)."""

ITEM_FILE = "abx/byCtxt_acSpkr.item"
"""Whole-excerpt-file ABX items, relative to a language folder (works in the 2019 mode)."""

SENTENCE_ITEM_FILE = "abx/byCtxt_acSpkr_sentences.item"
"""Phone items inside the full-sentence test files (needs a frame shift: libri-light mode)."""

BITRATE_FILELIST = "bitrate_filelist.txt"
EMBEDDING_FILELIST = "embedding_filelist.txt"
SYNTHESIS_LIST = "synthesis.txt"
SOURCES_FILE = "sources.yaml"
MANIFEST_DIR = "manifests"

# Stream ids for np.random.default_rng([seed, language, role, ...]).
_ROLE_UNIT, _ROLE_VOICE, _ROLE_POOL, _ROLE_READ, _ROLE_IDS, _ROLE_CHANNEL = range(6)
_MAX_UTTERANCES = 9999  # four-digit utterance numbers


CHANNEL_FIELDS = ("channels", "snr_db", "noise_color", "rt60_s")


def check_channel_fields(config: Any) -> None:
    """Validate the channel fields a corpus configuration shares (``channels``, ``snr_db``,
    ``noise_color``, ``rt60_s``); ``ConfigError`` naming the field and the valid values."""
    if config.channels not in CHANNEL_MODES:
        raise ConfigError(
            f"channels must be one of {', '.join(CHANNEL_MODES)}, got {config.channels!r}"
        )
    if config.noise_color not in NOISE_COLORS:
        raise ConfigError(
            f"noise_color must be one of {', '.join(NOISE_COLORS)}, got {config.noise_color!r}"
        )
    for name, low, high in (("snr_db", -20.0, 60.0), ("rt60_s", 0.05, 3.0)):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        if not low <= value <= high:
            raise ConfigError(f"{name} must be in [{low}, {high}], got {value}")


@dataclasses.dataclass(frozen=True)
class LanguageCorpusConfig:
    """Sizes of one language of the embedded ZeroSpeech 2019 corpus."""

    unit_speakers: int = field(help="speakers of train/unit (unit discovery)")
    test_speakers: int = field(help="held-out speakers of test/ (>= 2 for across-speaker ABX)")
    target_voices: int = field(help="target voices in train/voice: 1 (V001) or 2 (V001, V002)")
    unit_utterances: int = field(help="sentences per unit-discovery speaker")
    voice_utterances: int = field(help="sentences per target voice")
    excerpt_pool: int = field(help="sentences in the pool the test speakers cut excerpts from")
    excerpt_sentences: int = field(help="excerpt-pool sentences each test speaker reads")
    sentence_pool: int = field(help="sentences in the pool of full-sentence test files")
    full_sentences: int = field(help="sentence-pool sentences each test speaker reads whole")
    bitrate_sentences: int = field(help="full sentences per test speaker in the bitrate list")
    synthesis_sentences: int = field(help="full sentences per test speaker in synthesis.txt")
    max_excerpts_per_cell: int = field(
        2, help="most excerpts of one (phone, prev, next) per test speaker"
    )
    test_vocabulary: int = field(
        0,
        help="words the test sentence pools draw from (a seeded subset of the vocabulary; "
        "0: all). A small vocabulary makes triphones recur across few test sentences",
    )
    min_words: int = field(5, help="fewest words in a sentence")
    max_words: int = field(10, help="most words in a sentence")
    channels: str = field(
        "none",
        help="channel conditions of the unit and test speakers (target voices stay clean): "
        "none, telephone, noise, reverb (every speaker), or mixed (each speaker one of clean, "
        "telephone, noise, reverb, balanced per split; audiorepro.data.embedded.channels)",
    )
    snr_db: float = field(20.0, help="signal-to-noise ratio of the noise condition (dB)")
    noise_color: str = field("pink", help="noise of the noise condition: white or pink")
    rt60_s: float = field(0.4, help="reverberation time of the reverb condition (s)")

    def __post_init__(self) -> None:
        check_channel_fields(self)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in CHANNEL_FIELDS:
                continue
            low = 0 if f.name == "test_vocabulary" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{f.name} must be an integer >= {low}, got {value!r}")
        if self.test_speakers < 2:
            raise ConfigError(
                f"test_speakers must be >= 2 for across-speaker ABX, got {self.test_speakers}"
            )
        if self.target_voices > 2:
            raise ConfigError(f"target_voices must be 1 or 2, got {self.target_voices}")
        if self.min_words > self.max_words:
            raise ConfigError(f"min_words {self.min_words} > max_words {self.max_words}")
        for read, pool in (
            ("excerpt_sentences", "excerpt_pool"),
            ("full_sentences", "sentence_pool"),
        ):
            if getattr(self, read) > getattr(self, pool):
                raise ConfigError(
                    f"{read} = {getattr(self, read)} exceeds {pool} = {getattr(self, pool)}"
                )
        for name in ("bitrate_sentences", "synthesis_sentences"):
            if getattr(self, name) > self.full_sentences:
                raise ConfigError(
                    f"{name} = {getattr(self, name)} exceeds full_sentences = "
                    f"{self.full_sentences}"
                )
        if max(self.unit_utterances, self.voice_utterances) > _MAX_UTTERANCES:
            raise ConfigError(f"at most {_MAX_UTTERANCES} utterances per speaker")


@dataclasses.dataclass(frozen=True)
class ZeroSpeechCorpusConfig:
    """Sizes of the embedded ZeroSpeech 2019 corpus: one :class:`LanguageCorpusConfig` each."""

    english: LanguageCorpusConfig = field(help="the English (development) language")
    surprise: LanguageCorpusConfig = field(help="the surprise language (Indonesian)")

    def language(self, name: str) -> LanguageCorpusConfig:
        """The configuration of ``english`` or ``surprise``."""
        if name not in LANGUAGES:
            raise ConfigError(f"unknown language {name!r}; valid: {', '.join(LANGUAGES)}")
        return getattr(self, name)


def zerospeech_config(preset: str) -> ZeroSpeechCorpusConfig:
    """The corpus configuration of a preset (``smoke`` or ``embedded``).

    Raises:
        ConfigError: an unknown preset (``paper`` included: it uses the real corpus).
    """
    if preset not in CORPUS_PRESETS:
        raise ConfigError(
            f"unknown preset {preset!r} for the embedded ZeroSpeech 2019 corpus; valid: "
            f"{', '.join(CORPUS_PRESETS)} (the paper preset reads the real corpus with "
            "audiorepro.data.recipes.zerospeech)"
        )
    return corpus_preset(ZeroSpeechCorpusConfig, preset, "zerospeech")


# --- ABX triplets ------------------------------------------------------------------------------


def triplet_mask(items: Sequence[AbxItem]) -> list[bool]:
    """Whether each item takes part in at least one across-speaker ABX triplet.

    A triplet (A, B, X) of the ZeroSpeech 2019 task (ABXpy ``on=phone, across=speaker,
    by=(prev-phone, next-phone)``; ``shared/reference/zerospeech.md`` §1.3): A, B and X share
    the context; A and X share the phone, B has another phone; A and B share the speaker, X has
    another speaker. Only which (phone, speaker) pairs occur in a context matters, so for each
    item the three roles are checked on those sets (O(items x phones per context)).
    """
    # context -> phone -> speakers, and context -> speaker -> phones
    speakers_of: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    phones_of: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for item in items:
        speakers_of[item.context][item.phone].add(item.speaker)
        phones_of[item.context][item.speaker].add(item.phone)
    mask = []
    for item in items:
        a, s = item.phone, item.speaker
        by_phone, by_speaker = speakers_of[item.context], phones_of[item.context]
        other_speakers = by_phone[a] - {s}
        other_phones = by_speaker[s] - {a}
        as_a = bool(other_phones) and bool(other_speakers)
        # As B: an A of another phone a2 by the same speaker, and an X of a2 by someone else.
        as_b = any(by_phone[a2] - {s} for a2 in other_phones)
        # As X: an A of this phone by another speaker s2, and a B of another phone by s2.
        as_x = any(by_speaker[s2] - {a} for s2 in other_speakers)
        mask.append(as_a or as_b or as_x)
    return mask


def triplet_capable(items: Sequence[AbxItem]) -> list[AbxItem]:
    """The items that take part in at least one across-speaker triplet (:func:`triplet_mask`)."""
    return [item for item, keep in zip(items, triplet_mask(items), strict=True) if keep]


def corpus_settings(kind: str, preset: str, seed: int, config: Any) -> dict[str, Any]:
    """What a corpus marker records and reuse compares: generator, preset, seed, config,
    format and library version."""
    from audiorepro import __version__

    return {
        "generator": kind,
        "preset": preset,
        "seed": seed,
        "config": to_dict(config) if dataclasses.is_dataclass(config) else config,
        "format": FORMAT_VERSION,
        "version": __version__,
    }


def check_seed(seed: Any) -> int:
    """``seed`` as an int >= 0 (``ValueError`` otherwise)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


# --- one language ------------------------------------------------------------------------------


def speaker_voices(
    language: str, cfg: LanguageCorpusConfig, seed: int
) -> tuple[list[Voice], list[Voice], list[Voice]]:
    """``(unit voices, test voices, target voices)`` of a language.

    Unit and test speakers come from :func:`~audiorepro.data.embedded.espeak.disjoint_voices`
    (English ``S001...``, Indonesian ``S101...``): no eSpeak voice variant is used by both a
    unit speaker and a test speaker, and the target voices' variants (m3, f2) by neither.

    Raises:
        ConfigError: the speakers cannot be split disjointly (too few variants).
    """
    espeak_language = "en-us" if language == "english" else "id"
    first_id = 1 if language == "english" else 101
    unit, test = disjoint_voices(
        [cfg.unit_speakers, cfg.test_speakers], seed, espeak_language, first_id
    )
    targets = list(target_voices(espeak_language)[: cfg.target_voices])
    return unit, test, targets


def speaker_conditions(
    language: str, cfg: LanguageCorpusConfig, seed: int
) -> tuple[list[str], list[str]]:
    """``(unit conditions, test conditions)``: the channel condition of each unit and test
    speaker (:func:`~audiorepro.data.embedded.channels.assign_conditions`, seeded by the
    corpus seed and the language)."""
    unit, test = assign_conditions(
        [cfg.unit_speakers, cfg.test_speakers],
        cfg.channels,
        [seed, LANGUAGES.index(language), _ROLE_CHANNEL],
    )
    return unit, test


def _degrade(
    syn: Synthesis, condition: str, cfg: LanguageCorpusConfig, stream: Sequence[int]
) -> Synthesis:
    """The synthesis through its speaker's channel condition (unchanged when clean)."""
    if condition == "clean":
        return syn
    wav = apply_condition(
        syn.wav,
        SAMPLE_RATE,
        condition,
        np.random.default_rng(list(stream)),
        snr=cfg.snr_db,
        noise_color=cfg.noise_color,
        rt60_s=cfg.rt60_s,
    )
    return dataclasses.replace(syn, wav=wav)


def _vocabulary(language: str) -> tuple[str, ...]:
    return english_vocabulary() if language == "english" else indonesian_vocabulary()


def _sample_index(seconds: float) -> int:
    """The 22050 Hz sample of an eSpeak time (times are exact multiples of 1/22050 s)."""
    return int(round(seconds * 22050))


def _alignment(
    syn: Synthesis, shift: float = 0.0, phones: Sequence[int] | None = None, words: bool = True
) -> dict[str, list[AlignmentItem]]:
    """lhotse alignment of a synthesis, times shifted by ``-shift`` (clipped at 0)."""

    def item(label: str, start: float, end: float) -> AlignmentItem:
        start = max(0.0, start - shift)
        return AlignmentItem(label, start, max(0.0, end - shift - start))

    indices = range(len(syn.phones)) if phones is None else phones
    out = {"phone": [item(*syn.phones[i]) for i in indices]}
    if words:
        out["word"] = [item(*w) for w in syn.words]
    return out


@dataclasses.dataclass
class _LanguageWriter:
    """Writes one split's wavs and collects its manifest entries."""

    root: Path
    language_code: str
    recordings: dict[str, list[Recording]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )
    supervisions: dict[str, list[Supervision]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )

    def add(
        self,
        split: str,
        name: str,
        wav: np.ndarray,
        speaker: str,
        text: str | None,
        alignment: dict[str, list[AlignmentItem]],
        custom: dict[str, Any],
    ) -> Recording:
        relative = f"{SPLITS[split]}/{name}.wav"
        save_audio(self.root / relative, wav, SAMPLE_RATE)
        n = int(wav.shape[0])
        rec = Recording(
            id=name,
            sources=(AudioSource("file", (0,), relative),),
            sampling_rate=SAMPLE_RATE,
            num_samples=n,
            duration=n / SAMPLE_RATE,
            channel_ids=(0,),
        )
        self.recordings[split].append(rec)
        self.supervisions[split].append(
            Supervision(
                id=name,
                recording_id=name,
                start=0.0,
                duration=rec.duration,
                channel=0,
                text=text,
                language=self.language_code,
                speaker=speaker,
                custom=custom,
                alignment=alignment,
            )
        )
        return rec


def _voice_custom(voice: Voice, kind: str, channel: str = "clean") -> dict[str, Any]:
    return {
        "kind": kind,
        "channel": channel,
        "espeak_variant": voice.variant,
        "espeak_voice": voice.spec,
        "rate": voice.rate,
        "pitch": voice.pitch,
        "pitch_range": voice.pitch_range,
    }


@dataclasses.dataclass(frozen=True, eq=False)
class _Excerpt:
    speaker_index: int
    voice: Voice
    synthesis: Synthesis
    phone_index: int  # the central phone in synthesis.phones

    def item(self) -> AbxItem:
        """The excerpt's labels; file and times are placeholders until the file is named."""
        phones = self.synthesis.phones
        i = self.phone_index
        return AbxItem(
            "", 0.0, 1.0, phones[i][0], phones[i - 1][0], phones[i + 1][0], self.voice.name
        )


def _triphone_centres(syn: Synthesis) -> list[int]:
    """Indices of phones whose previous and next phones touch them (no pause in between)."""
    starts = [_sample_index(start) for _, start, _ in syn.phones]
    ends = [_sample_index(end) for _, _, end in syn.phones]
    return [
        i
        for i in range(1, len(syn.phones) - 1)
        if ends[i - 1] == starts[i] and ends[i] == starts[i + 1]
    ]


def _generate_language(
    root: Path, language: str, cfg: LanguageCorpusConfig, seed: int
) -> dict[str, Any]:
    """Write one language folder; returns its counts."""
    lang_index = LANGUAGES.index(language)
    code = LANGUAGE_CODES[language]
    vocab = _vocabulary(language)
    unit_voices, test_voices, targets = speaker_voices(language, cfg, seed)
    unit_conditions, test_conditions = speaker_conditions(language, cfg, seed)
    writer = _LanguageWriter(root, code)

    def sentence(role: int, speaker: int, utterance: int) -> str:
        rng = np.random.default_rng([seed, lang_index, role, speaker, utterance])
        return sentence_text(make_sentences(vocab, 1, rng, cfg.min_words, cfg.max_words)[0])

    for split, role, voices, conditions, count in (
        ("train-unit", _ROLE_UNIT, unit_voices, unit_conditions, cfg.unit_utterances),
        ("train-voice", _ROLE_VOICE, targets, ["clean"] * len(targets), cfg.voice_utterances),
    ):
        for k, (voice, condition) in enumerate(zip(voices, conditions, strict=True)):
            for j in range(count):
                syn = synthesize(sentence(role, k, j), voice)
                syn = _degrade(syn, condition, cfg, [seed, lang_index, _ROLE_CHANNEL, role, k, j])
                writer.add(
                    split,
                    f"{voice.name}_{j + 1:04d}",
                    syn.wav,
                    voice.name,
                    syn.text,
                    _alignment(syn),
                    _voice_custom(voice, "sentence", condition),
                )

    # Test: every test speaker reads its own random subsets of two shared sentence pools, one
    # cut into excerpts and one kept whole, so that the same triphones recur across speakers.
    pool_rng = np.random.default_rng([seed, lang_index, _ROLE_POOL])
    pool_vocab = vocab
    if 0 < cfg.test_vocabulary < len(vocab):
        pool_vocab = [
            vocab[int(i)] for i in pool_rng.permutation(len(vocab))[: cfg.test_vocabulary]
        ]
    excerpt_pool, sentence_pool = (
        [
            sentence_text(words)
            for words in make_sentences(pool_vocab, n, pool_rng, cfg.min_words, cfg.max_words)
        ]
        for n in (cfg.excerpt_pool, cfg.sentence_pool)
    )
    candidates: list[_Excerpt] = []
    full: list[list[Synthesis]] = []
    for k, (voice, condition) in enumerate(zip(test_voices, test_conditions, strict=True)):
        read_rng = np.random.default_rng([seed, lang_index, _ROLE_READ, k])
        excerpt_reading = read_rng.permutation(cfg.excerpt_pool)[: cfg.excerpt_sentences]
        full_reading = read_rng.permutation(cfg.sentence_pool)[: cfg.full_sentences]
        taken: Counter[tuple[str, str, str]] = Counter()
        # The channel is applied to a whole sentence before excerpts are cut from it.
        stream = [seed, lang_index, _ROLE_CHANNEL, _ROLE_READ, k]
        for i in excerpt_reading:
            syn = synthesize(excerpt_pool[int(i)], voice)
            syn = _degrade(syn, condition, cfg, [*stream, 0, int(i)])
            for c in _triphone_centres(syn):
                cell = (syn.phones[c][0], syn.phones[c - 1][0], syn.phones[c + 1][0])
                if taken[cell] < cfg.max_excerpts_per_cell:
                    taken[cell] += 1
                    candidates.append(_Excerpt(k, voice, syn, c))
        full.append(
            [
                _degrade(synthesize(sentence_pool[int(i)], voice), condition, cfg, [*stream, 1, i])
                for i in map(int, full_reading)
            ]
        )

    kept = [
        e
        for e, keep in zip(candidates, triplet_mask([e.item() for e in candidates]), strict=True)
        if keep
    ]
    excerpt_items: list[AbxItem] = []
    sentence_candidates: list[AbxItem] = []
    bitrate: list[tuple[str, float]] = []
    synthesis_lines: list[str] = []
    test_seconds = {"excerpts": 0.0, "sentences": 0.0}
    for k, voice in enumerate(test_voices):
        mine = [e for e in kept if e.speaker_index == k]
        n_files = len(mine) + len(full[k])
        if n_files > _MAX_UTTERANCES:
            raise ConfigError(f"{voice.name}: {n_files} test files exceed {_MAX_UTTERANCES}")
        # Shuffled ids, as in the real release, so names do not reveal the source sentence.
        ids = np.random.default_rng([seed, lang_index, _ROLE_IDS, k]).permutation(n_files) + 1
        for e, number in zip(mine, ids[: len(mine)], strict=True):
            name = f"{voice.name}_{int(number):04d}"
            syn, c = e.synthesis, e.phone_index
            # Exact integer sample arithmetic: 16 kHz sample = 22050 Hz sample * 320 / 441.
            first = _sample_index(syn.phones[c - 1][1]) * 320 // 441
            last = -(-_sample_index(syn.phones[c + 1][2]) * 320 // 441)
            last = min(last, syn.wav.shape[0])
            rec = writer.add(
                "test",
                name,
                syn.wav[first:last],
                voice.name,
                None,
                _alignment(syn, first / SAMPLE_RATE, (c - 1, c, c + 1), words=False),
                {**_voice_custom(voice, "excerpt", test_conditions[k]), "source_text": syn.text},
            )
            test_seconds["excerpts"] += rec.duration
            base = e.item()
            excerpt_items.append(dataclasses.replace(base, file=name, offset=rec.duration))
        for syn, number in zip(full[k], ids[len(mine) :], strict=True):
            name = f"{voice.name}_{int(number):04d}"
            rec = writer.add(
                "test",
                name,
                syn.wav,
                voice.name,
                syn.text,
                _alignment(syn),
                _voice_custom(voice, "sentence", test_conditions[k]),
            )
            test_seconds["sentences"] += rec.duration
            for c in _triphone_centres(syn):
                phone, start, end = syn.phones[c]
                sentence_candidates.append(
                    AbxItem(
                        name,
                        start,
                        end,
                        phone,
                        syn.phones[c - 1][0],
                        syn.phones[c + 1][0],
                        voice.name,
                    )
                )
        names = [f"{voice.name}_{int(n):04d}" for n in ids[len(mine) :]]
        durations = [s.wav.shape[0] / SAMPLE_RATE for s in full[k]]
        bitrate += [
            (f"{n}.txt", d)
            for n, d in zip(names[: cfg.bitrate_sentences], durations, strict=False)
        ]
        for i, n in enumerate(names[len(names) - cfg.synthesis_sentences :]):
            synthesis_lines.append(f"test/{n} {targets[(k + i) % len(targets)].name}")

    sentence_items = triplet_capable(sentence_candidates)
    excerpt_items.sort(key=lambda it: it.file)
    sentence_items.sort(key=lambda it: (it.file, it.onset))
    write_item_file(root / ITEM_FILE, excerpt_items)
    write_item_file(root / SENTENCE_ITEM_FILE, sentence_items)
    write_filelist(root / BITRATE_FILELIST, sorted(bitrate))
    test_recordings = sorted(writer.recordings["test"], key=lambda r: r.id)
    write_filelist(
        root / EMBEDDING_FILELIST, [(f"{r.id}.txt", r.duration) for r in test_recordings]
    )
    (root / SYNTHESIS_LIST).write_text(
        "".join(line + "\n" for line in sorted(synthesis_lines)), encoding="utf-8"
    )

    split_counts = {}
    for split in SPLITS:
        recs = sorted(writer.recordings[split], key=lambda r: r.id)
        sups = sorted(writer.supervisions[split], key=lambda s: s.id)
        write_manifest(root / MANIFEST_DIR / f"{split}_recordings.jsonl.gz", recs)
        write_manifest(root / MANIFEST_DIR / f"{split}_supervisions.jsonl.gz", sups)
        split_counts[split] = {
            "recordings": len(recs),
            "supervisions": len(sups),
            "speakers": len({s.speaker for s in sups}),
            "seconds": round(sum(r.duration for r in recs), 3),
        }
    _write_sources(root, language, split_counts)
    cells = Counter((it.phone, it.context) for it in excerpt_items)
    speakers_per_cell = defaultdict(set)
    for it in excerpt_items:
        speakers_per_cell[(it.phone, it.context)].add(it.speaker)
    return {
        "splits": split_counts,
        "test_excerpts": len(excerpt_items),
        "test_sentences": sum(len(f) for f in full),
        "test_excerpt_seconds": round(test_seconds["excerpts"], 3),
        "test_sentence_seconds": round(test_seconds["sentences"], 3),
        "excerpt_candidates": len(candidates),
        "items": len(excerpt_items),
        "sentence_items": len(sentence_items),
        "sentence_item_candidates": len(sentence_candidates),
        "item_cells": len(cells),
        "item_cells_multi_speaker": sum(len(v) >= 2 for v in speakers_per_cell.values()),
        "bitrate_files": len(bitrate),
        "bitrate_seconds": round(sum(d for _, d in bitrate), 6),
        "synthesis": len(synthesis_lines),
        "channel_conditions": {
            "train-unit": dict(sorted(Counter(unit_conditions).items())),
            "test": dict(sorted(Counter(test_conditions).items())),
        },
    }


_CITATION = """@inproceedings{dunbar2019zerospeech,
  title = {The Zero Resource Speech Challenge 2019: {TTS} without {T}},
  author = {Dunbar, Ewan and Algayres, Robin and Karadayi, Julien and Bernard, Mathieu and
            Benjumea, Juan and Cao, Xuan-Nga and Miskic, Lucie and Dugrain, Charlotte and
            Ondel, Lucas and Black, Alan W. and Besacier, Laurent and Sakti, Sakriani and
            Dupoux, Emmanuel},
  booktitle = {Proc. Interspeech},
  pages = {1088--1092},
  year = {2019}
}
"""


def _write_sources(root: Path, language: str, split_counts: Mapping[str, Mapping[str, int]]):
    """A ``sources.yaml`` with the expected counts, for ``python -m audiorepro.data check``."""
    data = {
        "name": f"zerospeech2019_embedded_{language}",
        "description": (
            f"ZeroSpeech 2019 look-alike ({language}) synthesised offline with eSpeak NG by "
            "audiorepro.data.embedded.zerospeech_corpus; same layout as the real release."
        ),
        "homepage": "https://zerospeech.com/2019/",
        "licence": "Generated locally by audiorepro (MIT); contains no third-party recordings.",
        "citation": _CITATION,
        "sampling_rate": SAMPLE_RATE,
        "files": [],
        "expected_counts": {
            split: {"recordings": c["recordings"], "supervisions": c["supervisions"]}
            for split, c in split_counts.items()
        },
    }
    write_sources_yaml(root / SOURCES_FILE, data)


def generate_zerospeech_corpus(
    out_dir: str | os.PathLike[str],
    preset: str = "embedded",
    seed: int = 0,
    *,
    config: ZeroSpeechCorpusConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Generate the embedded ZeroSpeech 2019 corpus (English and surprise) or reuse it.

    See the module docstring for the layout. A complete corpus already in ``out_dir`` with the
    same preset, seed, configuration, format and library version is reused as is; otherwise
    everything is written into a temporary sibling folder renamed into place at the end
    (:func:`generate_atomically`).

    Args:
        out_dir: the corpus folder (``english/`` and ``surprise/`` are created inside).
        preset: ``smoke`` or ``embedded`` (the sizes: :func:`zerospeech_config`).
        seed: the corpus seed; equal seeds give byte-identical files.
        config: replaces the preset's sizes (recorded in the marker).
        progress: called with a short message after each language (for notebooks).

    Returns:
        The counts per language (``{"english": {...}, "surprise": {...}}``, with per-split
        recordings, speakers and seconds, and the numbers of excerpts, ABX items, bitrate and
        synthesis files), plus ``"reused": bool``.

    Raises:
        ConfigError: an unknown preset.
        FileExistsError: ``out_dir`` is a non-empty folder without a marker.
    """
    if config is None:
        config = zerospeech_config(preset)
    else:
        zerospeech_config(preset)  # an unknown preset is an error even with a config
    seed = check_seed(seed)
    settings = corpus_settings("zerospeech2019", preset, seed, config)

    def build(tmp: Path) -> dict[str, Any]:
        counts = {}
        for language in LANGUAGES:
            counts[language] = _generate_language(
                tmp / language, language, config.language(language), seed
            )
            if progress is not None:
                progress(f"{language}: {counts[language]['splits']}")
        return counts

    counts, reused = generate_atomically(out_dir, settings, build)
    return {**counts, "reused": reused}


def language_dir(corpus_dir: str | os.PathLike[str], language: str) -> Path:
    """``<corpus_dir>/<language>`` for ``english`` or ``surprise`` (``ConfigError`` otherwise)."""
    if language not in LANGUAGES:
        raise ConfigError(f"unknown language {language!r}; valid: {', '.join(LANGUAGES)}")
    return Path(corpus_dir) / language


__all__ = [
    "BITRATE_FILELIST",
    "CHANNEL_FIELDS",
    "EMBEDDING_FILELIST",
    "ITEM_FILE",
    "LANGUAGES",
    "MANIFEST_DIR",
    "MARKER",
    "SENTENCE_ITEM_FILE",
    "SOURCES_FILE",
    "SYNTHESIS_LIST",
    "LanguageCorpusConfig",
    "ZeroSpeechCorpusConfig",
    "check_channel_fields",
    "check_seed",
    "corpus_settings",
    "generate_atomically",
    "generate_zerospeech_corpus",
    "language_dir",
    "read_marker",
    "speaker_conditions",
    "speaker_voices",
    "triplet_capable",
    "triplet_mask",
    "write_json",
    "write_sources_yaml",
    "zerospeech_config",
]
