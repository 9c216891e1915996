# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Word segments and their two views
#
# *The data of multi-view acoustic word embeddings: isolated spoken words as MFCC frames, and
# the same words written as phone sequences.*
#
# In this notebook we will
#
# - load the train, dev and test word segments in the Switchboard layout (Kamper et al. 2016;
#   the paper's §3.1) and apply the paper's selection rules, counting what they drop;
# - look at the two views of one word: its MFCC + Δ + ΔΔ frames and its ARPAbet phones;
# - see how many word types the dev and test sets share with training, which is what makes
#   cross-view discrimination of unseen words possible at all;
# - read the same words as a segments table of wavs, as the `audiorepro awe` commands do.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
corpus_root: Optional[str] = None  # the word-corpus folder; None: preset's

# %%
import numpy as np
import pandas as pd

from audiorepro import plotting, reporting
from audiorepro.config import to_dict
from audiorepro.experiments import awe

cfg = awe.load_config(preset, **{"corpus.root": corpus_root})
reporting.config_table(cfg)

# %% [markdown]
# ## Loading and selecting the segments
#
# Each split is a list of keys such as `absolutely_sw02001-A_000123-000245` (word, conversation
# side, start and end frame), an `npz` file mapping each key to its frames, and a `vocab.json`
# with the pronunciations. On the embedded preset these files are generated offline with eSpeak
# NG in exactly that layout (chapter 00); the `paper` preset reads the real ones. As in the
# paper, segments shorter than 2 frames and words outside the training vocabulary are dropped,
# and the loader counts both.

# %%
data = awe.load_data(cfg)
train_types = set(data["train"].words)
summary = pd.DataFrame(
    [
        {
            "split": name,
            "tokens": len(seg),
            "word types": len(seg.types),
            "types seen in train": len(set(seg.types) & train_types),
            "mean frames": round(
                float(np.mean([f.shape[0] for f in seg.feats])), 1
            ),
            "dropped: < 2 frames": seg.dropped["short"],
            "dropped: out of vocabulary": seg.dropped["out_of_vocabulary"],
        }
        for name, seg in data.items()
    ]
)
summary

# %% [markdown]
# Nothing is dropped on the embedded corpus: its generator already keeps only tokens of 50 to
# 200 frames and train words with at least two tokens (the Switchboard list rules), and its
# vocabulary covers every split. On the real lists the same counters report what the rules
# remove. The dev and test sets contain word types never seen in training: their cross-view
# AP depends on the phoneme encoder generalising from phones, not on memorised words.

# %% [markdown]
# ## The two views of a word
#
# The acoustic view is a (frames × 39) matrix: 13 MFCCs with per-speaker mean and variance
# normalisation, then their Δ and ΔΔ. The phoneme view is the word's first dictionary
# pronunciation, as ids into the 45-symbol phone set (39 ARPAbet phones, padding id 0).

# %%
train = data["train"]
example = int(np.argmax([len(p) for p in train.phones]))
print(f"key: {train.keys[example]}")
print(
    f"phones: {train.phones[example].tolist()} "
    f"({train.feats[example].shape[0]} frames)"
)
fig = plotting.spectrogram(
    train.feats[example],
    hop_s=0.01,
    ylabel="MFCC + Δ + ΔΔ",
    title=train.words[example],
)

# %% [markdown]
# Token lengths per split: the acoustic encoder attends over up to a couple of hundred frames,
# the phoneme encoder over a handful of phones.

# %%
fig = plotting.histogram(
    {name: [f.shape[0] for f in seg.feats] for name, seg in data.items()},
    xlabel="frames (10 ms)",
    title="token lengths",
)

# %% [markdown]
# ## The same words as anyone's recordings
#
# The `audiorepro awe` commands (Reference, "Your own recordings") take a segments table instead
# of the Switchboard layout: one row per word token, `path word speaker start end`, times in
# seconds, audio at any sample rate. The generated corpus can be written as one, because each
# conversation side is a wav in its `audio/` folder and each key names the token's frames.
# Read back through the commands' own functions (`awe.read_segments`, then
# `awe.segments_data`, which computes the MFCCs from the wav), the test split should give the
# tokens loaded above: same words, speakers and phones, same frames. The real Switchboard word
# lists come as features only, so under `paper` there is nothing to compare.

# %%
import tempfile
from pathlib import Path

root = awe.corpus_root(cfg)
if (root / "audio").is_dir():
    table = awe.corpus_segments_table(
        cfg, data["test"], Path(tempfile.mkdtemp()) / "test_segments.tsv"
    )
    print("\n".join(table.read_text().splitlines()[:3]))
    rows = awe.read_segments(table)
    vocab = awe.corpus_vocab(cfg)
    from_table = awe.segments_data(
        rows,
        {r.word: vocab.pronunciation(r.word) for r in rows},
        vocab.phones_to_ids,
        split="test",
        feature_dim=cfg.model.feature_dim,
        min_frames=cfg.min_frames,
    )
    agreement = pd.Series(
        awe.compare_segments(data["test"], from_table), name="test split"
    )
else:
    agreement = pd.Series(
        {"tokens": "no audio in this corpus"}, name="test split"
    )
agreement

# %% [markdown]
# When every check is true and the largest feature difference is 0, a model trained with
# `audiorepro awe train` on a table of one's own recordings sees its words through exactly the
# features this chapter's models see (`tests/test_awe_data_training.py` holds the two paths to
# that on the smoke corpus).

# %%
reporting.record_result(
    awe.CHAPTER,
    "01_data",
    {
        f"{name}_{what}": value
        for name, seg in data.items()
        for what, value in (
            ("tokens", len(seg)),
            ("types", len(seg.types)),
            ("dropped_short", seg.dropped["short"]),
            ("dropped_oov", seg.dropped["out_of_vocabulary"]),
        )
    },
    preset=preset,
    seed=cfg.corpus.seed,
    config={
        "corpus": to_dict(cfg.corpus),
        "feature_dim": cfg.model.feature_dim,
        "min_frames": cfg.min_frames,
    },
)

# %% [markdown]
# In this notebook we have
#
# - loaded the three splits in the Switchboard layout and applied the paper's selection,
#   with its counts of dropped segments;
# - looked at one word as MFCC frames and as a phone sequence, the two views the model embeds;
# - seen that dev and test include word types absent from training;
# - read the test split again as a segments table of wavs, the input of the `audiorepro awe`
#   commands, and compared its tokens with the Switchboard-layout ones.
