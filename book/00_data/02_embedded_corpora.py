# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The embedded corpora
#
# *Speech, spoken words and captioned sound scenes that the library synthesises offline, in the
# file formats of ZeroSpeech 2019, Switchboard word segments, ClothoV2, AudioCaps and WavCaps.*
#
# The machines that build this book cannot download anything, and Switchboard cannot be
# downloaded at all, so the default book trains and evaluates on corpora generated here,
# deterministically, from a seed. They are written in the real corpora's layouts, so the code
# that reads them is the code that reads the real ones at paper scale.
#
# In this notebook we will
#
# - generate (or reuse) the three embedded corpora and check their manifests like a download;
# - listen to and look at synthesised speech with its exact word and phone alignments, and see
#   what the ABX item file of the ZeroSpeech-style test set contains;
# - see the Switchboard-style word tokens that chapter 04 embeds;
# - look at a sound scene with its five captions, their paraphrases and keywords, and the
#   caption statistics that chapters 01 and 02 train on;
# - say plainly what these corpora are, and what they are not, next to the real ones.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
corpus_preset: Optional[str] = None  # smoke | embedded; None: preset
seed: Optional[int] = None  # corpus seed; None keeps the preset's
example: Optional[int] = None  # example utterance and scene; None: preset's
word: Optional[str] = None  # word whose tokens are played; None: preset's

# %%
import time

import numpy as np
from IPython.display import Audio, display

from audiorepro import features, plotting, reporting
from audiorepro.config import load_preset, to_dict
from audiorepro.data import check_manifest_dir
from audiorepro.data.embedded import overview
from audiorepro.data.embedded.generate import ensure_corpora
from audiorepro.paths import repo_root

cfg = load_preset(
    overview.CorporaPageConfig,
    repo_root() / "book/00_data/presets/corpora",
    preset,
    corpus_preset=corpus_preset,
    seed=seed,
    example=example,
    word=word,
)
reporting.config_table(cfg)

# %% [markdown]
# ## Generate, or reuse
#
# `ensure_corpora` writes each corpus into a temporary folder and renames it into place with a
# completion marker, so a run that was interrupted never leaves a half corpus that looks whole.
# A second call with the same preset and seed finds the marker and returns at once. The same
# thing from a shell: `python -m audiorepro.data.embedded generate --preset embedded --seed 0`.

# %%
start = time.perf_counter()
corpora = ensure_corpora(cfg.corpus_preset, cfg.seed)
print(
    f"ready in {time.perf_counter() - start:.1f} s; per corpus (s): "
    f"{corpora['timings']}"
)
english = corpora["zerospeech"] / "english"
surprise = corpora["zerospeech"] / "surprise"
words_dir = corpora["words"]
clotho = corpora["audio_caption"] / "clotho"

# %% [markdown]
# Every corpus comes with lhotse-style manifests and a `sources.yaml` that states how many
# recordings and supervisions each split must have, exactly as for a downloaded corpus. The
# manifest check reads every line, opens every audio header and compares the counts; an empty
# list of problems is what a complete, consistent corpus gives.

# %%
corpus_dirs = {
    "ZeroSpeech english": english,
    "ZeroSpeech surprise": surprise,
    "words": words_dir,
    "ClothoV2": clotho,
    "AudioCaps": corpora["audio_caption"] / "audiocaps",
    "WavCaps": corpora["audio_caption"] / "wavcaps",
}
problems = {
    name: check_manifest_dir(d / "manifests", d, sources=d / "sources.yaml")
    for name, d in corpus_dirs.items()
}
print({name: len(p) for name, p in problems.items()})
assert not any(problems.values()), problems

# %% [markdown]
# ## Speech in the ZeroSpeech 2019 layout
#
# eSpeak NG speaks sentences of frequent English words (every one in the CMU pronouncing
# dictionary) in many voices: each speaker is a voice variant with its own pitch, pitch range
# and rate. As in ZeroSpeech 2019, `train/unit` holds many speakers for unit discovery,
# `train/voice` the two target voices for synthesis, and `test` held-out speakers; Indonesian
# plays the "surprise" language, as it did in the challenge. Held-out speakers use voice
# variants no training speaker uses. The corpus option `channels: mixed` puts each speaker
# behind one channel (clean, a telephone band, pink noise at 20 dB SNR or a reverberant
# room); the book's corpora are clean, because mixed channels erase the MFCC vs log-Mel gap
# that chapter 03 tests.

# %%
speech_table = overview.manifest_summary(english)
speech_table

# %%
overview.manifest_summary(surprise)

# %% [markdown]
# The synthesiser reports every word and phone with its exact sample position, so the
# alignments below are not estimated: they are where eSpeak put each sound. (Real corpora have
# forced alignments, which are accurate to about 10-20 ms.)

# %%
wav, sr, tiers, text = overview.aligned_utterance(
    english, "train-unit", cfg.example
)
print(text)
fig = plotting.spectrogram(
    features.log_mel(wav, sr=sr, n_mels=80),
    hop_s=0.01,
    tiers=tiers,
    title="log-Mel-80",
)
display(Audio(wav, rate=sr))

# %% [markdown]
# The same for the surprise language, whose phones are eSpeak's Indonesian phonemes:

# %%
wav, sr, tiers, text = overview.aligned_utterance(
    surprise, "train-unit", cfg.example
)
print(text)
fig = plotting.spectrogram(
    features.log_mel(wav, sr=sr, n_mels=80),
    hop_s=0.01,
    tiers=tiers,
    title="log-Mel-80",
)
display(Audio(wav, rate=sr))

# %% [markdown]
# ### The ABX item file
#
# Chapter 03 scores representations by ABX discrimination: is a token X closer to a token A of
# the same phone than to a token B of another phone, all three in the same phonetic context,
# with X from another speaker than A and B? The item file lists each test phone with its file,
# onset, offset, context and speaker, in the official format
# (`#file onset offset #phone prev-phone next-phone speaker`). Only phones in a context that
# another speaker also produced can take part in a triplet, so the generator keeps only those.

# %%
abx_counts, phone_counts = overview.abx_summary(
    english / "abx" / "byCtxt_acSpkr.item"
)
print(abx_counts)
print((english / "abx" / "byCtxt_acSpkr.item").read_text().splitlines()[:4])
phone_counts.head(12).to_frame("items").T

# %% [markdown]
# ## Spoken words in the Switchboard layout
#
# Chapter 04 embeds isolated spoken words. On Switchboard these are tokens of words of at least
# six letters, 0.5-2 s long, cut from conversations; the lists name each token by word, side
# and frame span (`word_sw02001-A_000123-000245`). Here each speaker has one "side" of slowly
# spoken sentences, tokens are cut from it with the exact word alignments (so they keep their
# coarticulation with the neighbouring words), and the splits are by speaker. Some word types of
# dev and test never occur in train, so the chapter can report seen and unseen words.

# %%
word_table = overview.word_summary(words_dir)
word_table

# %%
fig = plotting.histogram(
    {
        s: overview.word_lengths(words_dir, s)
        for s in ("train", "dev", "test")
    },
    xlabel="token length (10 ms frames)",
    bins=20,
    title="word token lengths",
)

# %% [markdown]
# Three tokens of one word by three different speakers: the same phones, different voices.

# %%
shown_word, tokens = overview.word_tokens(words_dir, cfg.word)
print(shown_word, [key for key, _, _ in tokens])
display(*(Audio(token, rate=token_sr) for _, token, token_sr in tokens))

# %% [markdown]
# ## Captioned sound scenes in the ClothoV2 layout
#
# Chapters 01 and 02 retrieve audio from text. Each clip is a scene of one to four sound events
# drawn from procedurally synthesised classes (beeps, bells, sirens, knocks, footsteps, rain,
# wind, engines, bird-like chirps, speech, ...) with a pitch, a loudness, a tempo and a place in
# time, over an optional background. Five captions are written from the scene description with
# varied templates and synonyms, naming the order of events (then, while, after); each caption
# has paraphrases (standing in for ClothoV2's GPT-augmented captions) and the clip has keywords
# (ClothoV2's metadata).

# %%
scene = overview.scene_example(clotho, "development", cfg.example)
scene_wav, scene_sr = features.load_audio(scene["path"], None)
print(
    scene["file_name"],
    f"({scene_wav.size / scene_sr:.1f} s), keywords:",
    scene["keywords"],
)
for k, caption in enumerate(scene["captions"], 1):
    print(f"{k}. {caption}")
    for paraphrase in scene["paraphrases"][caption]:
        print(f"     ~ {paraphrase}")
fig = plotting.spectrogram(
    features.log_mel(scene_wav, sr=scene_sr, n_mels=64),
    hop_s=0.01,
    title="log-Mel-64, 32 kHz",
)
display(Audio(scene_wav, rate=scene_sr))

# %% [markdown]
# What the generator put in that clip (this description is kept for the analysis pages only;
# no model reads it):

# %%
print("background:", scene["background"])
scene["events"]

# %% [markdown]
# Caption statistics per split. ClothoV2's captions are 8-20 words and its clips 15-30 s; ours
# have the same caption lengths, and clip durations that vary up to three times the audio
# encoder's snippet length, so that the long-audio snippet averaging of chapter 01 is used.
# Some captions are generic ("a loud low-pitched hum is heard") and fit several clips word for
# word: that share is the last column. It is the situation the distillation paper of chapter 02
# addresses, where a caption's "wrong" clips are partly right.

# %%
caption_table, caption_lengths = overview.caption_summary(clotho)
caption_table

# %%
fig = plotting.histogram(
    caption_lengths,
    xlabel="words per caption",
    bins=np.arange(3, 23),
    title="caption lengths",
)

# %% [markdown]
# The AudioCaps look-alike has one short caption per training clip and five per validation and
# test clip, and the WavCaps look-alike terse one-sentence captions, as in the real corpora; chapter 01 combines them for pretraining. The
# WavCaps manifest leaves out the clips that overlap the ClothoV2 evaluation split, as the DCASE
# rules require.

# %%
{
    name: overview.manifest_summary(corpus_dirs[name])[
        ["recordings", "supervisions", "hours"]
    ]
    for name in ("AudioCaps", "WavCaps")
}

# %% [markdown]
# The counts go into the results ledger with the seed, so every later page can say exactly which
# corpus its numbers came from.

# %%
counts = {
    "speech_test_files": int(speech_table.loc["test", "recordings"]),
    "abx_items": abx_counts["items"],
    "word_train_types": int(word_table.loc["train", "types"]),
    "word_test_tokens": int(word_table.loc["test", "tokens"]),
    "clotho_eval_clips": int(caption_table.loc["evaluation", "clips"]),
    "clotho_shared_caption_pct": float(
        caption_table.loc["development", "shared captions %"]
    ),
}
reporting.record_result(
    "00_data",
    "02_embedded_corpora",
    counts,
    preset=preset,
    seed=cfg.seed,
    config=to_dict(cfg),
)
counts

# %% [markdown]
# ## What these corpora are, and what they are not
#
# **They are** deterministic, offline stand-ins with the real corpora's formats, splits and
# bookkeeping: the same seed gives byte-identical files, alignments are exact, every corpus
# passes the same manifest check as a download, and the structure each paper relies on is
# there: many speakers and a held-out test set (ZeroSpeech), word tokens in context with seen
# and unseen types (Switchboard), several captions per clip with paraphrases and partial matches
# across clips (Clotho).
#
# **They are not** natural speech or natural sound. eSpeak is a formant synthesiser: its
# voices differ in pitch, range and rate far less than people do, with no accents and no
# disfluencies, and the channels (telephone band, stationary noise, a synthetic room) are
# simple stand-ins for real ones, so speaker variation, the main difficulty of ABX across
# speakers and of same-different word discrimination, is still smaller than in the real
# corpora. The sound events are procedural (a siren is a swept tone), there are a few
# dozen event classes instead of the hundreds behind ClothoV2, and the captions come from
# templates, so their vocabulary is small and a text encoder can learn it from few examples.
# The corpora are also much smaller than the real ones (see the tables above).
#
# So numbers on these corpora are not comparable with the papers' numbers. What can carry over
# are *relations*: whether one method beats another, whether an ablation helps. Each chapter's
# last page says which of the papers' findings the embedded run reproduces and which it does not.

# %% [markdown]
# In this notebook we have
#
# - generated (or reused) the embedded corpora and checked every manifest against its expected
#   counts;
# - listened to synthesised English and Indonesian speech with exact word and phone tiers, and
#   seen what the ABX item file holds;
# - seen the Switchboard-style word corpus: its splits, token lengths and a word in three voices;
# - looked at a captioned sound scene with its paraphrases and keywords, and at caption
#   statistics including the share of captions that fit more than one clip;
# - recorded the corpus counts in the ledger, and said what these corpora can and cannot show.
