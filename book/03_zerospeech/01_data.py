# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The ZeroSpeech 2019 data and the ABX task
#
# *What the unit-discovery models of this chapter learn from and how they are judged: speech
# without any text, and an ABX test built from triphones.*
#
# In this notebook we will
#
# - open the embedded ZeroSpeech 2019 corpus (English, and Indonesian as the surprise language),
#   laid out like the real release;
# - read the ABX item file and count its phones, contexts, speakers and triplets;
# - listen to a triphone test file and a full test sentence;
# - compute the two front ends the paper compares, MFCC-39 and log-Mel-80, for every file (the
#   later pages reuse them) and measure the ABX error of the MFCC frames themselves.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
seed: Optional[int] = None  # None keeps the preset's

# %%
import numpy as np
import pandas as pd
from IPython.display import Audio, display

from audiorepro import plotting, reporting
from audiorepro.config import to_dict
from audiorepro.experiments import zerospeech as zs

cfg = zs.load_config(preset, {"seed": seed})
languages = ["english", "surprise"] if cfg.surprise else ["english"]
reporting.config_table(cfg)

# %% [markdown]
# ## The corpus
#
# ZeroSpeech 2019 ("TTS without T") gives, per language, untranscribed *unit-discovery* speech
# from many speakers, a *voice* set of one or two target speakers, and a *test* set. The test
# set is mostly short excerpts cut around one phone, so that each file is one ABX item. The
# embedded corpus is synthesised offline with eSpeak NG and written in the same layout
# (`audiorepro.data.embedded.zerospeech_corpus`).

# %%
dirs = {lang: zs.language_dir(cfg, lang) for lang in languages}
rows = []
for lang, path in dirs.items():
    for split in ("train/unit", "train/voice", "test"):
        wavs = sorted((path / split).glob("*.wav"))
        speakers = {w.name.split("_")[0] for w in wavs}
        rows.append(
            {
                "language": lang,
                "split": split,
                "files": len(wavs),
                "speakers": len(speakers),
            }
        )
pd.DataFrame(rows)

# %% [markdown]
# ## The ABX item file
#
# Each line is one item: a test file (here, always the whole file), its central phone, the
# phones before and after it (the *context*) and the speaker. An ABX triplet takes A and X with
# the same phone, B with another phone, all three in the same context; *across* speakers, A and
# B come from one speaker and X from another. The model is right when X is closer to A than to B.

# %%
items = zs.read_item_file(dirs["english"] / "abx/byCtxt_acSpkr.item")
table = pd.DataFrame([vars(it) for it in items])
print(
    f"{len(table)} items, {table.phone.nunique()} phones, "
    f"{table[['prev_phone', 'next_phone']].drop_duplicates().shape[0]} "
    "contexts, "
    f"{table.speaker.nunique()} speakers"
)
table.head()

# %%
counts = table.phone.value_counts()
fig = plotting.bars(
    list(counts.index),
    list(counts.values),
    ylabel="items",
    title="items per phone",
)

# %% [markdown]
# A triphone test file and a full test sentence of the same speaker, as the models will hear
# them (16 kHz):

# %%
first = items[0]
excerpt, sr = zs.load_audio(
    dirs["english"] / "test" / f"{first.file}.wav", sr=16000
)
sentence_name = zs.read_bitrate_filelist(
    dirs["english"] / "bitrate_filelist.txt"
)[0][0]
sentence, _ = zs.load_audio(
    dirs["english"] / "test" / sentence_name.replace(".txt", ".wav"),
    sr=16000,
)
print(
    f"{first.file}: /{first.prev_phone} {first.phone} {first.next_phone}/, "
    f"{len(excerpt) / sr:.3f} s"
)
display(Audio(excerpt, rate=sr), Audio(sentence, rate=sr))

# %% [markdown]
# ## Front ends
#
# The paper compares 80 log-Mel bands with 13 MFCCs plus their Δ and ΔΔ (39 dimensions), both
# from 25 ms windows every 10 ms. We compute them for every file of every split once (log-Mel
# for English only: only the English tables compare the two); the library keeps them in the
# chapter's run store, keyed by the content of the wav files, for the next pages
# (`audiorepro.data.speech_segments`).

# %%
feats = {}
for lang, path in dirs.items():
    for split in ("train/unit", "train/voice", "test"):
        for feature in (
            ("mfcc", "logmel") if lang == "english" else ("mfcc",)
        ):
            feats[lang, split, feature] = zs.load_features(
                path, split, feature
            )
test_mfcc = feats["english", "test", "mfcc"]
frames = np.array([len(x) for x in test_mfcc.values()])
print(
    f"English test: {len(frames)} files, median {np.median(frames):.0f} "
    "frames "
    "of 10 ms"
)
fig = plotting.spectrogram(
    feats["english", "test", "logmel"][first.file],
    hop_s=0.01,
    title=f"{first.file}, log-Mel-80",
)

# %% [markdown]
# ## ABX on the input features
#
# Before learning anything, how well do the MFCC frames themselves separate the phones? This
# is the ABX error of the 2019 definition (angular distance, path-normalised DTW, scores
# averaged over contexts, then speaker pairs, then phone pairs), with the frames of each item
# chosen by libri-light's rule at a 10 ms frame shift. Discrete units will be judged the same
# way, at their own frame shift.

# %%
scores = {}
for lang in languages:
    for mode in ("across", "within"):
        scores[f"{lang}_{mode}"] = zs.abx(
            feats[lang, "test", "mfcc"],
            dirs[lang] / "abx/byCtxt_acSpkr.item",
            mode=mode,
            frame_shift=0.01,
        )
pd.DataFrame(
    [
        {"task": k, "ABX error %": r.error, "triplets": r.n_triplets}
        for k, r in scores.items()
    ]
)

# %%
for lang in languages:
    reporting.record_result(
        "03_zerospeech",
        "01_data",
        {
            "abx_across": scores[f"{lang}_across"].error,
            "abx_within": scores[f"{lang}_within"].error,
        },
        preset=preset,
        seed=cfg.seed,
        config=to_dict(cfg),
        tags={"row": "mfcc_frames", "language": lang},
    )

# %% [markdown]
# Per ordered phone pair the across-speaker score shows which phones the features confuse; the
# hardest pairs come first:

# %%
scores["english_across"].by_phone_pair.sort_values("score").head(8)

# %% [markdown]
# In this notebook we have
#
# - opened the embedded ZeroSpeech 2019 corpus and counted its splits, speakers and test files;
# - read the ABX item file and seen how its triphone items form across-speaker triplets;
# - listened to a triphone excerpt and a full test sentence;
# - computed MFCC-39 and log-Mel-80 for every file, and measured the ABX error of the raw MFCC
#   frames, the reference point for the learned units of the next pages.
