"""Chapter 01's numbers beside the paper's: the stage and ablation tables, the training table
that shows every compared run learned, the snippet curve, measured mechanism checks, the chance
floor, and the paper-vs-ours findings with a verdict per claim."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from audiorepro import reporting
from audiorepro.config import replace
from audiorepro.experiments.retrieval.config import CHAPTER, METRICS, STAGES, Config
from audiorepro.experiments.retrieval.data import RetrievalData
from audiorepro.experiments.retrieval.runs import build_model
from audiorepro.experiments.retrieval.stages import (
    ablation_budget,
    ablation_config,
    ablation_settings,
)
from audiorepro.experiments.retrieval.train import steps_per_epoch
from audiorepro.models.audio_encoders import FRAMES_PER_SECOND
from audiorepro.reporting import PaperRow


def stage_table(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """The main system stage by stage (Table 3 analogue), mean ± std over ``config``'s seeds in
    %, from the records of ``config`` only."""
    records = reporting.current_records(records, config)
    rows = [
        ("PaSST, pretrained on all corpora", {"stage": "pretrain"}),
        ("+ fine-tuned on ClothoV2", {"stage": "finetune"}),
        ("+ fine-tuned with caption augmentation", {"stage": "finetune-aug"}),
    ]
    return reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=METRICS, scale=100
    )


def ablation_table(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str, kind: str
) -> pd.DataFrame:
    """One ablation's settings, mean ± std over seeds in %, from the records of ``config``."""
    records = reporting.current_records(records, config)
    settings = ablation_settings(config)[kind]
    label = (lambda v: f"{v} s") if kind == "snippet_s" else str
    rows = [(label(v), {"ablation": kind, "setting": v}) for v in settings]
    return reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=METRICS, scale=100
    )


TRAINING_METRICS = ("train_steps", "late_loss", "steps_per_s", "clips_per_s")
"""What every training run records besides its scores: steps, last loss, throughput."""


def training_table(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> pd.DataFrame:
    """How did every compared run train, on one budget? Per stage and ablation setting:
    optimizer steps, the NT-Xent loss of its last tenth of steps (``late_loss``; ln(batch size)
    is the loss of a model that tells nothing apart, :func:`loss_ceiling` a run that has hardly
    trained: a diagnostic, the verdicts go by mAP@10), steps/s and clips/s, mean ± std over
    seeds (records of ``config`` only)."""
    records = reporting.current_records(records, config)
    rows = [(stage, {"stage": stage}) for stage in STAGES]
    for kind, settings in ablation_settings(config).items():
        rows += [(f"{kind} = {v}", {"ablation": kind, "setting": v}) for v in settings]
    table = reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=TRAINING_METRICS, digits=2
    )
    return table.rename(columns={"late_loss": f"late loss (ln {config.train.batch_size} = "
                                 f"{math.log(config.train.batch_size):.2f}, hardly trained "
                                 f"above ln({config.train.batch_size}/2) = "
                                 f"{loss_ceiling(config):.2f})"})  # fmt: skip


def loss_ceiling(config: Config) -> float:
    """ln(batch) - ln 2, the diagnostic line of :func:`training_table`: NT-Xent over a batch of
    B pairs is ln B for a model that tells nothing apart; below ln(B/2) the paired entry is on
    average at least twice as likely as a uniform guess. A run above it has hardly trained on
    its own objective, yet may rank the evaluation split's recordings far above chance (a
    frozen pretrained encoder does much of the work): what decides a verdict is the measured
    mAP@10 (:func:`audiorepro.reporting.finding`), not this loss."""
    return math.log(config.train.batch_size) - math.log(2.0)


def snippet_curve(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> tuple[list[float], list[float], list[float]]:
    """The Figure 1 analogue: snippet lengths (s), mAP@10 means and stds over seeds (%), from
    the records of ``config``."""
    records = reporting.current_records(records, config)
    settings = ablation_settings(config)["snippet_s"]
    stats = [
        reporting.mean_std(
            reporting.values(
                records, chapter=CHAPTER, preset=preset, metric="mAP@10", scale=100,
                tags={"ablation": "snippet_s", "setting": v},
            )
        )
        for v in settings
    ]  # fmt: skip
    return [float(v) for v in settings], [m for m, _ in stats], [s for _, s in stats]


CHECK_PAIRS = 512
"""Caption-paraphrase pairs of the augmentation check: enough for a mean cosine to two decimals."""


def mechanism_checks(config: Config, data: RetrievalData) -> pd.DataFrame:
    """Measured causes behind the ablations, for findings that do not show: what caption
    augmentation changes in the (frozen) text space, how much of each pretraining corpus the
    ablation budget sees and how many clips it adds, and how many snippets the evaluation clips
    hold at each snippet length."""
    rows = []
    text = build_model(config, config.seeds[0], data).text_encoder
    pairs = [(i.caption, i.paraphrases[0]) for i in data.finetune if i.paraphrases]
    pairs = pairs[:CHECK_PAIRS]
    if pairs and config.model.trainable_layers == 0:
        with torch.no_grad():
            a = torch.nn.functional.normalize(text([c for c, _ in pairs]).float(), dim=-1)
            b = torch.nn.functional.normalize(text([p for _, p in pairs]).float(), dim=-1)
        shuffled = torch.roll(b, 1, dims=0)
        rows.append({
            "finding": "caption augmentation helps",
            "check": "cosine of a caption and its paraphrase in the frozen text space "
                     f"(vs another clip's paraphrase; {len(pairs)} captions)",
            "measured": f"{(a * b).sum(-1).mean():.3f} (vs {(a * shuffled).sum(-1).mean():.3f})",
        })  # fmt: skip
    rows += _text_encoder_spread(config, data)
    for name in ("passt", "cnn14"):
        cfg = ablation_config(config, "audio_encoder", name)
        audio = build_model(replace(cfg, **{"model.audio_pretrained": None}), 0).audio_encoder
        rows.append({
            "finding": "PaSST beats CNN14",
            "check": f"trainable parameters of the {name} audio encoder at this scale",
            "measured": f"{sum(p.numel() for p in audio.parameters() if p.requires_grad):,}",
        })  # fmt: skip
    for combo in config.corpus_combinations:
        items = data.training_items(combo.split("+"), config.ablation_max_train_items)
        clips = len({i.key for i in items})
        epochs, steps = ablation_budget(config, "corpora", len(items), data)
        if steps is None:  # whole epochs
            steps = epochs * steps_per_epoch(config.train.trainer_config(
                len(items), seed=0, num_epochs=epochs, lr=config.train.lr), len(items))  # fmt: skip
        seen = (
            f", the ablation budget sees {steps * config.train.batch_size / len(items):.2f} epochs"
        )
        rows.append({
            "finding": "adding corpora to ClothoV2 helps",
            "check": f"training data of {combo}",
            "measured": f"{len(items)} captions of {clips} clips{seen}",
        })  # fmt: skip
    lengths = [data.features[k].shape[0] / FRAMES_PER_SECOND for k in data.eval_set.keys]
    for snippet in config.snippet_lengths_s:
        per_clip = [math.ceil(min(t, config.max_audio_s) / snippet) for t in lengths]
        rows.append({
            "finding": "longer snippets beat shorter ones",
            "check": f"snippets per evaluation clip at {snippet} s",
            "measured": f"{sum(per_clip) / len(per_clip):.2f} on average "
                        f"(clips {min(lengths):.1f}-{max(lengths):.1f} s)",
        })  # fmt: skip
    return pd.DataFrame(rows)


def _text_encoder_spread(config: Config, data: RetrievalData, n: int = 256) -> list[dict]:
    """How far apart the first ``n`` distinct training captions lie in the pretrained and the
    random text encoder of the ablation: the mean cosine between two different captions. An
    encoder that puts every caption in nearly one direction gives the projection nothing to
    separate, whatever the audio side learns."""
    captions = list(dict.fromkeys(i.caption for i in data.finetune))[:n]
    rows = []
    for setting in ("pretrained", "random"):
        cfg = ablation_config(config, "text_encoder", setting)
        cfg = replace(cfg, **{"model.audio_pretrained": None})
        text = build_model(cfg, config.seeds[0]).text_encoder.eval()
        with torch.no_grad():
            features = text(captions).float()  # (n, text_dim)
        measured = _mean_cosine(features)
        if config.model.text_norm == "batch":  # what the projection sees: standardised
            standard = (features - features.mean(0)) / features.std(0).clamp_min(1e-6)
            measured += f"; {_mean_cosine(standard)} after standardisation"
        rows.append({
            "finding": "a pretrained text encoder beats a random one",
            "check": f"cosine of two different training captions, {setting} text encoder",
            "measured": f"{measured} ({len(captions)} captions)",
        })  # fmt: skip
    return rows


def _mean_cosine(features: torch.Tensor) -> str:
    """The mean and the least cosine between two different rows of (n, D) ``features``."""
    emb = torch.nn.functional.normalize(features, dim=-1)
    off = (emb @ emb.T)[~torch.eye(len(emb), dtype=torch.bool)]
    return f"{off.mean():.3f} on average (min {off.min():.3f})"


PAPER: dict[str, dict[str, float | None]] = {
    # Table 3: PaSST-N + roberta-large, pretrained, fine-tuned, fine-tuned with augmentation;
    # and the audio encoders with bert-base.
    "Table 3": {
        "pretrain mAP@10": 36.65,
        "finetune mAP@10": 38.00,
        "finetune-aug mAP@10": 38.56,
        "finetune-aug R@1": 26.07,
        "finetune-aug R@10": 69.30,
        "passt mAP@10": 35.22,
        "cnn14 mAP@10": 28.06,
    },
    # Table 4: mAP@10 by pretraining corpora (PaSST-N + bert-base).
    "Table 4": {
        "audiocaps": 21.01,
        "wavcaps": 27.62,
        "clotho": 27.28,
        "audiocaps+wavcaps": 27.13,
        "wavcaps+clotho": 34.42,
        "audiocaps+clotho": 30.64,
        "audiocaps+wavcaps+clotho": 35.22,
    },
    # Figure 1: mAP@10 against the snippet length (PaSST-S20), read off a plot: no value.
    "Figure 1": {},
}
"""The paper's numbers (paper (a), in %), by the table or figure that reports them."""


def chance_floor(data: RetrievalData) -> tuple[float, float]:
    """Chance mAP@10 of the evaluation split (%, a ranking that ignores the query) and the
    floor every compared run must beat to count as having learned: three times chance."""
    from audiorepro.metrics.retrieval import chance_metrics

    chance = 100 * chance_metrics(len(data.eval_set.keys))["mAP@10"]
    return chance, reporting.chance_floor(chance)


def findings(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    must_beat: float | None = None,
) -> pd.DataFrame:
    """The paper-vs-ours table: every value of :data:`PAPER` the preset ran, beside the ledger's
    mean ± std over seeds, with the verdict on each of the paper's claims. ``must_beat`` (in %,
    e.g. :func:`chance_floor`'s three times chance) is the mAP@10 both compared runs must
    reach, else the claim is inconclusive: a run at chance tests nothing. Only the records
    of ``config`` and its seeds count
    (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    t3, t4 = PAPER["Table 3"], PAPER["Table 4"]
    ab, tx, co, sn = (
        {"ablation": k} for k in ("audio_encoder", "text_encoder", "corpora", "snippet_s")
    )
    row = functools.partial(
        PaperRow, chapter=CHAPTER, scale=100, digits=2, must_beat=must_beat
    )  # fmt: skip
    rows = [
        row("mAP@10, pretrained (PaSST-N + roberta-large)", "mAP@10", t3["pretrain mAP@10"],
            tags={"stage": "pretrain"}, source="Table 3"),
        row("mAP@10, + fine-tuned", "mAP@10", t3["finetune mAP@10"], tags={"stage": "finetune"},
            claim="fine-tuning on ClothoV2 helps", versus={"stage": "pretrain"},
            source="Table 3"),
        row("mAP@10, + fine-tuned with augmentation", "mAP@10", t3["finetune-aug mAP@10"],
            tags={"stage": "finetune-aug"}, claim="caption augmentation helps fine-tuning",
            versus={"stage": "finetune"}, source="Table 3"),
        row("R@1, + fine-tuned with augmentation", "R@1", t3["finetune-aug R@1"],
            tags={"stage": "finetune-aug"}, source="Table 3"),
        row("R@10, + fine-tuned with augmentation", "R@10", t3["finetune-aug R@10"],
            tags={"stage": "finetune-aug"}, source="Table 3"),
        row("mAP@10, PaSST-N (bert-base)", "mAP@10", t3["passt mAP@10"],
            tags=ab | {"setting": "passt"}, claim="PaSST beats CNN14",
            versus=ab | {"setting": "cnn14"}, source="Table 3"),
        row("mAP@10, CNN14 (bert-base)", "mAP@10", t3["cnn14 mAP@10"],
            tags=ab | {"setting": "cnn14"}, source="Table 3"),
        row("mAP@10, randomly initialised text encoder", "mAP@10", None,
            tags=tx | {"setting": "random"}),
        row("mAP@10, pretrained text encoder", "mAP@10", None,
            tags=tx | {"setting": "pretrained"},
            claim="a pretrained text encoder beats a random one",
            versus=tx | {"setting": "random"}),
    ]  # fmt: skip
    combos = list(config.corpus_combinations)
    for combo in combos:
        claim = versus = None
        if combo == combos[-1] and "clotho" in combos and len(combos) > 1:
            claim, versus = "adding corpora to ClothoV2 helps", co | {"setting": "clotho"}
        rows.append(
            row(f"mAP@10, pretrained on {combo}", "mAP@10", t4.get(combo),
                tags=co | {"setting": combo}, claim=claim, versus=versus, source="Table 4")
        )  # fmt: skip
    lengths = ablation_settings(config)["snippet_s"]
    rows.append(
        row(f"mAP@10, {lengths[-1]} s snippets (Figure 1)", "mAP@10", None,
            tags=sn | {"setting": lengths[-1]}, claim="longer snippets beat shorter ones",
            versus=sn | {"setting": lengths[0]}, source="Figure 1")
    )  # fmt: skip
    return reporting.paper_vs_ours(rows, preset=preset, records=records)
