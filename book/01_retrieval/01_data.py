# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Audio-caption corpora for retrieval
#
# *ClothoV2, AudioCaps and WavCaps as the retrieval models see them: clips, captions,
# paraphrases, and the log-mel every model trains on.*
#
# In this notebook we will
#
# - prepare manifests of the three corpora with the recipes that read the real downloads;
# - count clips and captions per corpus and split, and see how long captions and clips are;
# - check that WavCaps loses the clips that overlap the ClothoV2 evaluation split;
# - listen to one clip with its five captions and the paraphrases used for caption augmentation;
# - compute (and cache) the PaSST log-mel of every clip for the next pages.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
from IPython.display import Audio, display

from audiorepro import plotting, reporting
from audiorepro.experiments import retrieval

config = retrieval.load_config(preset)
reporting.config_table(config)

# %% [markdown]
# ## From downloads to manifests
#
# The embedded corpora are written in the real layouts: ClothoV2's captions CSV
# (`file_name,caption_1..caption_5`) with its ISO-8859-1 metadata CSV, AudioCaps'
# `audiocap_id,youtube_id,start_time,caption` CSVs with AudioSet file names, and WavCaps' JSON
# per source with FLAC audio. The same recipes that read a real download turn them into
# manifests, and the log-mel of every clip is computed once and cached.
#
# The chapter's code is one package, `audiorepro.experiments.retrieval`: its `Config` nests
# the corpus, the dual encoder (`audiorepro.models.dual_encoder.DualEncoderConfig`) and the
# training schedule, and `load_data` is the call below.

# %%
data = retrieval.load_data(config)
print(f"corpora under {data.root}")

# %% [markdown]
# ## How much data
#
# The paper pretrains on ClothoV2's development split, all of AudioCaps and WavCaps (§2.4) and
# reports results on ClothoV2's evaluation split (its "test" split): every one of its captions
# is a query with exactly one relevant clip.

# %%
stats = retrieval.caption_statistics(
    {
        **{
            f"{name} (pretraining)": items
            for name, items in data.pretrain.items()
        },
        "clotho evaluation": data.evaluation,
    }
)
stats

# %% [markdown]
# WavCaps shares clips with ClothoV2, because both took audio from FreeSound; training on a
# clip whose captions are evaluation queries would inflate the scores. The DCASE organisers list
# those FreeSound ids, and the WavCaps recipe drops them (the embedded WavCaps contains such
# copies on purpose).

# %%
counts = retrieval.manifest_counts(data.root)
print(
    "WavCaps clips dropped as overlapping the Clotho evaluation split:",
    counts["wavcaps"]["train"]["excluded"],
)

# %% [markdown]
# Captions differ in length between the corpora as they do in the real ones (ClothoV2 8-20
# words, AudioCaps about 10, WavCaps about 8), and clips differ in duration: the models see
# random crops of at most `max_audio_s` and batches padded to their longest clip (§2.5).

# %%
fig = plotting.histogram(
    {
        name: [len(i.caption.split()) for i in items]
        for name, items in data.pretrain.items()
    },
    xlabel="words per caption",
    bins=range(0, 30),
)
fig = plotting.histogram(
    {
        name: sorted({i.key: i.duration for i in items}.values())
        for name, items in data.pretrain.items()
    },
    xlabel="clip duration (s)",
)

# %% [markdown]
# ## One clip, five captions and their paraphrases
#
# ClothoV2 gives five human captions per clip. The paper's fine-tuning swaps a caption, with
# probability 0.3, for one of five GPT-3.5 rephrasings that also use the clip's keywords
# ("ClothoV2_GPT", §2.4.4); those rephrasings were never published, so the embedded Clotho ships
# its own paraphrases in a side file (`clotho_paraphrases_{split}.json`), and a real download
# can use any file of that shape.

# %%
first = data.finetune[0]
for item in data.finetune[:5]:
    print("caption:   ", item.caption)
    for p in item.paraphrases:
        print("  paraphrase:", p)
wav, sr = retrieval.load_audio(first.audio, sr=32000)
display(Audio(wav, rate=sr))
mel = data.features[first.key].float().numpy()  # (T, 128)
fig = plotting.spectrogram(
    mel, hop_s=0.01, title=f"PaSST log-mel of {first.recording_id}"
)

# %% [markdown]
# The counts go into the results ledger, so that the later pages' numbers can be traced to the
# data they came from.

# %%
_ = reporting.record_result(
    "01_retrieval",
    "01_data",
    {
        f"{row['corpus']}: captions": row["captions"]
        for _, row in stats.iterrows()
    }
    | {"wavcaps excluded clips": counts["wavcaps"]["train"]["excluded"]},
    preset=preset,
    seed=0,
    config={"root": str(data.root)},
)

# %% [markdown]
# In this notebook we have
#
# - written manifests of ClothoV2, AudioCaps and WavCaps with the recipes for the real formats;
# - counted clips and captions and looked at caption lengths and clip durations per corpus;
# - seen WavCaps lose the clips it shares with the ClothoV2 evaluation split;
# - listened to a clip with its five captions and their paraphrases;
# - cached the PaSST log-mel of every clip for pretraining, fine-tuning and evaluation.
