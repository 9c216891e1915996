"""Embedded corpora generated offline, in the real corpora's formats.

``ensure_corpora(preset, seed)`` generates (or reuses) all three; the generators can also be
called one by one: ZeroSpeech 2019 layout speech, the Switchboard-like word corpus and the
ClothoV2 / AudioCaps / WavCaps look-alikes. Speech comes from eSpeak NG with exact alignments
(:mod:`~audiorepro.data.embedded.espeak`) over the built-in lexicon.
"""

from audiorepro.data.embedded.audio_caption import generate_audio_caption_corpora
from audiorepro.data.embedded.espeak import (
    SAMPLE_RATE,
    Synthesis,
    SynthesisError,
    Voice,
    disjoint_voices,
    english_voices,
    indonesian_voices,
    synthesize,
    target_voices,
)
from audiorepro.data.embedded.generate import CORPORA, corpora_root, ensure_corpora
from audiorepro.data.embedded.lexicon import (
    ARPABET_PHONES,
    NOISE_SYMBOLS,
    SWITCHBOARD_SYMBOLS,
    LexiconError,
    english_vocabulary,
    indonesian_vocabulary,
    make_sentences,
    pronunciation,
    sentence_text,
)
from audiorepro.data.embedded.word_corpus import generate_word_corpus
from audiorepro.data.embedded.zerospeech_corpus import generate_zerospeech_corpus

__all__ = [
    "ARPABET_PHONES",
    "NOISE_SYMBOLS",
    "SAMPLE_RATE",
    "SWITCHBOARD_SYMBOLS",
    "LexiconError",
    "Synthesis",
    "SynthesisError",
    "Voice",
    "english_vocabulary",
    "disjoint_voices",
    "english_voices",
    "indonesian_vocabulary",
    "indonesian_voices",
    "make_sentences",
    "pronunciation",
    "sentence_text",
    "synthesize",
    "target_voices",
    "generate_audio_caption_corpora",
    "generate_word_corpus",
    "generate_zerospeech_corpus",
    "corpora_root",
    "ensure_corpora",
    "CORPORA",
]
