# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Stage 2: fine-tuning on the ensemble's beliefs
#
# *Each stage-1 model is fine-tuned on the Clotho-layout corpus alone, learning from the
# ensemble's soft correspondences as well as from the binary pairs.*
#
# In this notebook we will
#
# - write down the stage-2 objective L = L_sup + λ·L_dist and how each batch gets its targets;
# - fine-tune every stage-1 model of every seed with λ = 1 (the paper's setting);
# - follow L_sup and L_dist during training;
# - score each distilled model and the ensemble of the three distilled models.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
from audiorepro import plotting, reporting
from audiorepro.config import load_preset, to_dict
from audiorepro.metrics.retrieval import retrieval_metrics
from audiorepro.paths import repo_root
from audiorepro.training.distillation import (
    DistillationConfig,
    distill,
    ensemble_similarity,
    teacher_config,
)
from audiorepro.training.retrieval import (
    RetrievalConfig,
    evaluate_retrieval,
    load_retrieval_data,
    seed_table,
)

CHAPTER = "02_distillation"
dcfg = load_preset(DistillationConfig, repo_root() / "book/02_distillation/presets", preset)
rcfg = load_preset(
    RetrievalConfig, repo_root() / "book/01_retrieval/presets", dcfg.retrieval_preset
)
data = load_retrieval_data(preset, rcfg)
dcfg

# %% [markdown]
# ## The objective
#
# For a batch of B pairs the student's logits are S = C/τ (rows audios, columns captions),
# q_a and q_c their softmax over audios and over captions. The targets come from the ensemble:
# Ĉ for the batch's audio ids and caption texts, p̂_a and p̂_c its softmax over audios and over
# captions at τ = 0.05. Then L_dist = H(p̂_a, q_a) + H(p̂_c, q_c) and L = L_sup + λ·L_dist.
# L_sup is chapter 01's NT-Xent, which averages its two directions as salsa does, so L_dist is
# averaged too and λ keeps the paper's balance:
#
# ```{literalinclude} ../../lib/audiorepro/losses/distillation.py
# :pyobject: distillation_objective
# ```
#
# Under `accelerate launch` with several processes the student's loss covers the all-gathered
# global batch, so each process looks up the targets of the global batch too (a two-process
# test shows the run equals one process with the global batch). The targets are keyed by
# caption text, so stage 2 swaps no captions for paraphrases.
#
# ```{literalinclude} ../../lib/audiorepro/training/distillation.py
# :pyobject: DistillationStudent.forward
# ```

# %% [markdown]
# ## Fine-tuning every teacher
#
# `finetune_epochs` epochs on the Clotho-layout development captions with peak learning rate
# `finetune_lr`, crops of `finetune_max_audio_s` seconds, λ = `lam`. Each seed's students learn
# from the ensemble of that seed's stage-1 models (trained first if page 01 has not run).

# %%
students = {}
for seed in dcfg.seeds:
    for name in dcfg.teachers:
        tcfg = teacher_config(dcfg, rcfg, name)
        model = distill(preset, dcfg, rcfg, name, seed, data)
        metrics = evaluate_retrieval(model, data.eval_set, data.features_for(tcfg), tcfg)
        _ = reporting.record_result(
            CHAPTER, "03_distill", metrics, preset=preset, seed=seed,
            config={"distillation": to_dict(dcfg), "retrieval": to_dict(tcfg)},
            tags={"model": name, "stage": "distilled", "lam": dcfg.lam},
        )  # fmt: skip
        students[name, seed] = model

# %% [markdown]
# ## L_sup and L_dist during fine-tuning
#
# Per optimizer step, first seed. L_dist cannot reach 0: the targets are soft, and its floor
# is the entropy of p̂.

# %%
seed0 = dcfg.seeds[0]
fig, axes = plotting.plt.subplots(1, len(dcfg.teachers), figsize=(4 * len(dcfg.teachers), 3))
for ax, name in zip(list(getattr(axes, "flat", [axes])), dcfg.teachers, strict=True):
    history = students[name, seed0].train_history
    for part in ("loss_sup", "loss_dist"):
        values = history.get("step_metrics", {}).get(part, [])
        ax.plot(range(1, len(values) + 1), values, label=part)
    ax.set_title(name)
    ax.set_xlabel("optimizer step")
    ax.legend()
fig.tight_layout()

# %% [markdown]
# ## The ensemble of the distilled models
#
# Paper (b)'s best system (SID 1) averages the three distilled models' similarity matrices.
# Each model scores the evaluation split on its own front end; the mean of the three
# caption × clip matrices is ranked as one model's would be.

# %%
for seed in dcfg.seeds:
    models = [students[name, seed] for name in dcfg.teachers]
    cfgs = [teacher_config(dcfg, rcfg, name) for name in dcfg.teachers]
    scores = ensemble_similarity(models, cfgs, data)
    metrics = retrieval_metrics(scores, data.eval_set.targets)
    _ = reporting.record_result(
        CHAPTER, "03_distill", metrics, preset=preset, seed=seed, config=to_dict(dcfg),
        tags={"model": "ensemble", "stage": "distilled", "lam": dcfg.lam},
    )  # fmt: skip

records = reporting.read_ledger()
seed_table(
    records,
    [(name, {"model": name, "stage": "distilled", "lam": dcfg.lam}) for name in dcfg.teachers]
    + [("ensemble of the three", {"model": "ensemble", "stage": "distilled", "lam": dcfg.lam})],
    chapter=CHAPTER,
    preset=preset,
)

# %% [markdown]
# In this notebook we have
#
# - written down L = L_sup + λ·L_dist and where each batch's targets come from;
# - fine-tuned every stage-1 model of every seed on the Clotho-layout corpus with λ = 1;
# - followed L_sup and L_dist during training;
# - scored each distilled model and the ensemble of the three. Page 04 sets them beside the
#   stage-1 models, the paper and λ.
