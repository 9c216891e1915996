"""Embedded corpora generated offline: eSpeak NG speech synthesis and the built-in lexicon."""

from audiorepro.data.embedded.espeak import (
    SAMPLE_RATE,
    Synthesis,
    SynthesisError,
    Voice,
    english_voices,
    indonesian_voices,
    synthesize,
    target_voices,
)
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
    "english_voices",
    "indonesian_vocabulary",
    "indonesian_voices",
    "make_sentences",
    "pronunciation",
    "sentence_text",
    "synthesize",
    "target_voices",
]
