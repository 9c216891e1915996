"""Chapter 04 runs: train and evaluate multi-view transformer AWEs (Rhodes & Bains, §3).

One configuration dataclass (:class:`AWEExperimentConfig`, one YAML preset per scale in
``book/04_awe/presets``) and the calls the pages make:

- :func:`load_awe_data`: the train/dev/test word segments after the paper's selection;
- :func:`train_awe`: Adam (lr 5e-4, betas 0.9/0.999, eps 1e-8), batches of 256 segments, the
  eq. (4) loss, dev cross-view AP after every epoch, and the plateau schedule (4 flat epochs:
  reload the best model and optimizer state, lr / 10; stop below 1e-7), on
  :class:`audiorepro.training.Trainer`;
- :func:`evaluate_awe`: acoustic (same-different) AP and cross-view AP of a split;
- :func:`dtw_baseline`: the MFCC + DTW same-different baseline (Table 3, first row) with chapter
  03's DTW (:func:`audiorepro.metrics.dtw.pairwise_dtw`);
- :func:`project_2d` and :func:`nearest_words`, for the figures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiorepro.config import ConfigError, field
from audiorepro.data.awe import (
    MultiViewDataset,
    WordSegments,
    collate_multiview,
    pad_sequences,
    prepare_split,
)
from audiorepro.losses.multiview import DISTANCES, MultiViewContrastiveLoss
from audiorepro.metrics.average_precision import (
    cross_view_ap,
    pairs_average_precision,
    same_different_ap,
)
from audiorepro.metrics.dtw import pairwise_dtw
from audiorepro.models.awe import POOLINGS, AWEModelConfig, MultiViewAWE
from audiorepro.paths import data_dir
from audiorepro.reporting import PaperRow
from audiorepro.repro import seed_everything
from audiorepro.training.loop import TrainConfig, Trainer, TrainResult
from audiorepro.training.plateau import ReduceLROnPlateauWithReset

CORPORA = ("smoke", "embedded", "paper")


@dataclasses.dataclass(frozen=True)
class AWEExperimentConfig:
    """Everything a chapter-04 page needs; paper values in ``presets/paper.yaml``."""

    corpus: str = field(help="smoke | embedded (generated corpora) | paper (data_root)")
    data_root: str | None = field(
        None, help="real Switchboard word folder (paper preset); relative: under $AUDIOREPRO_DATA"
    )
    data_format: str = field("npz", help="npz (lists + npz) | hdf5 (agwe utterance features)")
    corpus_seed: int = field(0, help="seed of the generated corpus")
    seed: int = field(0, help="seed of the main run (initialisation, data order, dropout)")
    feature_dim: int = field(39, help="MFCC + Δ + ΔΔ dimension (39; the paper says 36)")
    min_frames: int = field(2, help="segments shorter than this are dropped (paper: 2)")
    max_train_tokens: int | None = field(None, help="cap on train tokens (None: all)")
    d_model: int = field(256, help="d_model of both encoders (paper: 256)")
    acoustic_layers: int = field(6, help="acoustic encoder layers (paper: 6)")
    acoustic_heads: int = field(4, help="acoustic encoder heads (paper: 4)")
    acoustic_ff: int = field(1024, help="acoustic d_ff (paper: 1024)")
    phone_layers: int = field(4, help="phoneme encoder layers of the chosen model (paper: 4)")
    phone_heads: int = field(16, help="phoneme encoder heads of the chosen model (paper: 16)")
    phone_ff: int = field(1024, help="phoneme d_ff (paper: 1024)")
    phone_pooling: str = field("avg", help="avg | rep for the chosen model (paper: avg)")
    dropout: float = field(0.1, help="dropout (paper: 0.1)")
    frame_stack: int = field(1, help="acoustic frames per input step (paper: 1; CPU presets: 4)")
    margin: float = field(0.5, help="margin m of eq. (4) (agwe-recipe: 0.5)")
    loss_k: int = field(8, help="most offending negatives averaged per term (agwe-recipe: 8)")
    distance: str = field("cos2", help="cos2 (paper: 1 - cos^2) | cos (code base: 1 - cos)")
    batch_size: int = field(256, help="segments per batch (paper: 256)")
    lr: float = field(5e-4, help="Adam learning rate (paper: 5e-4)")
    num_epochs: int = field(100, help="cap on epochs of the main run (it stops at min_lr)")
    patience: int = field(4, help="flat dev evaluations before lr / 10 and reset (paper: 4)")
    lr_factor: float = field(0.1, help="learning-rate decay factor (paper: 0.1)")
    min_lr: float = field(1e-7, help="stop when the learning rate falls below (paper: 1e-7)")
    max_grad_norm: float | None = field(None, help="gradient clipping (None: off; agwe: 10)")
    device: str = field("auto", help="auto | cpu | cuda")
    torch_threads: int | None = field(
        None,
        help="torch CPU threads during training and embedding (None: leave torch's setting); "
        "1 for these small models on a shared CPU, where more threads only wait on each other",
    )
    sweep_epochs: int = field(15, help="epochs of each sweep run (paper: 15)")
    sweep_layers: tuple[int, ...] = field((1, 4, 8), help="Table 1: phoneme encoder layers")
    sweep_heads: tuple[int, ...] = field(
        (1, 4, 8, 16, 32), help="Table 2: heads at N = phone_layers"
    )
    table1_heads: int = field(4, help="Table 1: heads of every phoneme encoder (paper: 4)")
    seeds: tuple[int, ...] = field((0, 1, 2), help="seeds of the chosen model (mean ± std)")
    dtw_tokens: int = field(200, help="test tokens of the MFCC + DTW baseline (all pairs)")
    eval_batch_size: int = field(512, help="segments per forward pass when embedding")

    def __post_init__(self) -> None:
        if self.corpus not in CORPORA:
            raise ConfigError(f"corpus: expected one of {CORPORA}, got {self.corpus!r}")
        if self.corpus == "paper" and not self.data_root:
            raise ConfigError("corpus 'paper' needs data_root: the Switchboard word folder")
        if self.distance not in DISTANCES:
            raise ConfigError(f"distance: expected one of {DISTANCES}, got {self.distance!r}")
        if self.phone_pooling not in POOLINGS:
            raise ConfigError(f"phone_pooling: expected one of {POOLINGS}")
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")

    def model_config(self, num_phones: int, **overrides: Any) -> AWEModelConfig:
        """The encoders' sizes; ``overrides`` (``phone_layers``, ...) for the sweeps."""
        values = dict(
            feature_dim=self.feature_dim,
            num_phones=num_phones,
            d_model=self.d_model,
            acoustic_layers=self.acoustic_layers,
            acoustic_heads=self.acoustic_heads,
            acoustic_ff=self.acoustic_ff,
            phone_layers=self.phone_layers,
            phone_heads=self.phone_heads,
            phone_ff=self.phone_ff,
            phone_pooling=self.phone_pooling,
            dropout=self.dropout,
            frame_stack=self.frame_stack,
        )
        values.update(overrides)
        return AWEModelConfig(**values)


def corpus_root(cfg: AWEExperimentConfig) -> Path:
    """The word-corpus folder: generated (and reused) for smoke/embedded, ``data_root`` else."""
    if cfg.corpus == "paper":
        root = Path(str(cfg.data_root)).expanduser()
        return root if root.is_absolute() else data_dir() / root
    from audiorepro.data.embedded.generate import ensure_corpora

    return Path(ensure_corpora(cfg.corpus, cfg.corpus_seed, only=("words",))["words"])


def load_awe_data(cfg: AWEExperimentConfig) -> dict[str, WordSegments]:
    """``{"train", "dev", "test"}`` segments after the selection of §3.1."""
    root = corpus_root(cfg)
    out = {}
    for split in ("train", "dev", "test"):
        out[split] = prepare_split(
            root,
            split,
            feature_dim=cfg.feature_dim,
            min_frames=cfg.min_frames,
            max_tokens=cfg.max_train_tokens if split == "train" else None,
            source=cfg.data_format,
        )
    return out


def num_phone_ids(data: dict[str, WordSegments]) -> int:
    """The phone vocabulary size the model needs for every split."""
    return max(s.num_phones for s in data.values())


# ------------------------------------------------------------------------------- embedding


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def embed_segments(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> np.ndarray:
    """f(x) of every token, (N, D) float32, in token order (eval mode, length-sorted batches)."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    order = np.argsort([f.shape[0] for f in segments.feats], kind="stable")
    out = np.zeros((len(segments), model.config.d_model), dtype=np.float32)
    try:
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            feats, lengths = pad_sequences([torch.from_numpy(segments.feats[i]) for i in idx])
            emb = model.acoustic(feats.to(device), lengths.to(device))  # (B, D)
            out[idx] = emb.float().cpu().numpy()
    finally:
        model.train(was_training)
    return out


@torch.no_grad()
def embed_words(
    model: MultiViewAWE, word_phones: dict[str, np.ndarray], batch_size: int = 512
) -> tuple[list[str], np.ndarray]:
    """g(c) of each word: ``(sorted words, (W, D) float32)``."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    words = sorted(word_phones)
    out = np.zeros((len(words), model.config.d_model), dtype=np.float32)
    try:
        for start in range(0, len(words), batch_size):
            chunk = words[start : start + batch_size]
            phones, lengths = pad_sequences([torch.from_numpy(word_phones[w]) for w in chunk])
            emb = model.phones(phones.to(device), lengths.to(device))  # (W, D)
            out[start : start + len(chunk)] = emb.float().cpu().numpy()
    finally:
        model.train(was_training)
    return words, out


def evaluate_awe(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> dict[str, float]:
    """``acoustic_ap`` (same-different over all token pairs) and ``crossview_ap`` (tokens x the
    split's unique words), as agwe-recipe's ``MultiViewAP``."""
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    return {
        "acoustic_ap": float(same_different_ap(emb_x, segments.words)),
        "crossview_ap": float(cross_view_ap(emb_x, segments.words, emb_c, words)),
    }


# ------------------------------------------------------------------------------- training


@dataclasses.dataclass
class AWERun:
    """A trained model (best dev state loaded), its history and schedule events."""

    model: MultiViewAWE
    result: TrainResult
    schedule: ReduceLROnPlateauWithReset
    seed: int
    model_config: AWEModelConfig

    @property
    def best_dev(self) -> float:
        """Best dev cross-view AP."""
        return float(self.schedule.best) if self.schedule.best is not None else float("nan")


def adam_factory(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam with the paper's betas (0.9, 0.999) and eps 1e-8, no weight decay (§3.2)."""
    return torch.optim.Adam(model.parameters(), lr=config.lr, betas=(0.9, 0.999), eps=1e-8)


def train_awe(
    cfg: AWEExperimentConfig,
    data: dict[str, WordSegments],
    *,
    seed: int | None = None,
    num_epochs: int | None = None,
    out_dir: str | Path | None = None,
    progress: str = "none",
    **model_overrides: Any,
) -> AWERun:
    """Train one multi-view model and return it with the best dev state loaded.

    Args:
        cfg: the experiment configuration.
        data: :func:`load_awe_data` output.
        seed: the run's seed (default ``cfg.seed``).
        num_epochs: cap on epochs (default ``cfg.num_epochs``; the sweeps use
            ``cfg.sweep_epochs``). Training stops earlier once the lr falls below ``min_lr``.
        out_dir: checkpoints (and the kept best state) go here; ``None`` keeps them in memory.
        progress: the Trainer's progress mode.
        model_overrides: :class:`AWEModelConfig` fields (``phone_layers``, ``phone_heads``,
            ``phone_pooling``) for the sweeps.
    """
    seed = cfg.seed if seed is None else seed
    if cfg.torch_threads is not None:
        torch.set_num_threads(cfg.torch_threads)
    seed_everything(seed)
    model_config = cfg.model_config(num_phone_ids(data), **model_overrides)
    model = MultiViewAWE(model_config)
    loss = MultiViewContrastiveLoss(cfg.margin, cfg.loss_k, cfg.distance)

    def loss_fn(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        emb_x, emb_c = model(
            batch["feats"], batch["lengths"], batch["phones"], batch["phone_lengths"]
        )
        terms = loss.terms(emb_x, emb_c, batch["inverse"])
        out: dict[str, Any] = {"loss": (terms["obj0"] + terms["obj1"] + terms["obj2"]).mean()}
        out.update({k: v.detach().mean() for k, v in terms.items()})
        return out

    dev = data["dev"]

    def eval_fn(model: torch.nn.Module) -> dict[str, float]:
        return evaluate_awe(model, dev, cfg.eval_batch_size)  # type: ignore[arg-type]

    schedule = ReduceLROnPlateauWithReset(
        "crossview_ap",
        mode="max",
        patience=cfg.patience,
        factor=cfg.lr_factor,
        min_lr=cfg.min_lr,
        directory=Path(out_dir) / "best" if out_dir is not None else None,
    )
    config = TrainConfig(
        num_epochs=num_epochs or cfg.num_epochs,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        weight_decay=0.0,
        max_grad_norm=cfg.max_grad_norm,
        device=cfg.device,
        seed=seed,
        eval_every=0,
        log_every=10_000,
        schedule="constant",
        keep_checkpoints=1,
    )
    trainer = Trainer(
        model,
        loss_fn,
        MultiViewDataset(data["train"]),
        config,
        collate_fn=collate_multiview,
        eval_fn=eval_fn,
        optimizer_factory=adam_factory,
        out_dir=out_dir,
        callbacks=[schedule],
        progress=progress,
    )
    result = trainer.fit()
    best = trainer.unwrapped_model
    schedule.restore_best(best)
    best.eval()
    return AWERun(best, result, schedule, seed, model_config)  # type: ignore[arg-type]


def sweep(
    cfg: AWEExperimentConfig,
    data: dict[str, WordSegments],
    settings: Sequence[dict[str, Any]],
    *,
    num_epochs: int,
    seed: int | None = None,
    split: str = "test",
    cache: dict[tuple, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Train one model per setting (model overrides such as ``{"phone_layers": 4}``) and score it.

    Returns one row per setting: the setting, ``acoustic_ap`` and ``crossview_ap`` on ``split``,
    ``dev_crossview_ap`` (best), ``epochs`` and ``seconds``. ``cache`` (keyed by the sorted
    setting) lets Table 2 reuse Table 1's run of the same configuration.
    """
    rows = []
    for setting in settings:
        key = tuple(sorted(setting.items()))
        if cache is not None and key in cache:
            rows.append(cache[key])
            continue
        run = train_awe(cfg, data, seed=seed, num_epochs=num_epochs, **setting)
        row = dict(setting)
        row.update(evaluate_awe(run.model, data[split], cfg.eval_batch_size))
        row.update(
            dev_crossview_ap=run.best_dev,
            epochs=run.result.final_epoch,
            seconds=round(run.result.wall_time_s, 1),
        )
        rows.append(row)
        if cache is not None:
            cache[key] = row
    return rows


# ------------------------------------------------------------------------------- baselines


def dtw_baseline(
    segments: WordSegments, tokens: int, seed: int = 0, distance: str = "cosine"
) -> dict[str, Any]:
    """MFCC + DTW same-different AP over all pairs of a seeded subset of ``tokens`` tokens.

    Kamper et al.'s baseline (the paper's Table 3, first row): DTW over the MFCC + Δ + ΔΔ frames
    with a frame-level cosine (here angular, chapter 03's ``"cosine"``) distance, normalised by
    the path length. Returns ``{"ap", "indices", "num_pairs"}``; ``indices`` lets a model be
    scored on the same subset.
    """
    rng = np.random.default_rng(seed)
    n = min(tokens, len(segments))
    indices = np.sort(rng.choice(len(segments), size=n, replace=False))
    feats = [segments.feats[i] for i in indices]
    offsets = np.concatenate([[0], np.cumsum([f.shape[0] for f in feats])])
    i, j = np.triu_indices(n, k=1)
    dist = pairwise_dtw(np.concatenate(feats), offsets, np.stack([i, j], 1), distance=distance)
    labels = np.asarray([segments.words[k] for k in indices])
    ap = pairs_average_precision(dist, labels[i] == labels[j])
    return {"ap": float(ap), "indices": indices, "num_pairs": int(i.size)}


# ------------------------------------------------------------------------------- the paper

PAPER_TABLE1_CROSSVIEW: dict[tuple[int, str], float] = {
    (1, "avg"): 0.272,
    (1, "rep"): 0.030,
    (4, "avg"): 0.298,
    (4, "rep"): 0.247,
    (8, "avg"): 0.000,
    (8, "rep"): 0.000,
}
"""Paper Table 1: dev cross-view AP after 15 epochs, by phoneme-encoder depth and pooling."""

PAPER_TABLE2_ACOUSTIC: dict[int, float] = {1: 0.373, 4: 0.425, 8: 0.429, 16: 0.447, 32: 0.413}
"""Paper Table 2: dev acoustic AP after 15 epochs, N = 4, Avg, by number of heads."""


def _says(ok: bool) -> str:
    return "reproduces" if ok else "does not reproduce"


def paper_rows(
    cfg: AWEExperimentConfig,
    table1: Sequence[dict[str, Any]],
    table2: Sequence[dict[str, Any]],
    chosen_mean: Any,
    dtw_ap: float,
    model_ap_on_dtw_pairs: Sequence[float],
) -> list[PaperRow]:
    """The paper-vs-ours rows of chapter 04, each finding checked on our numbers.

    Findings: Avg beats Rep at every depth; the middle depth is best; the deepest encoder fails
    with both poolings (cross-view AP < 0.05); h = 16 gives the best acoustic AP; every seed of the transformer
    beats MFCC + DTW on the same pairs; cross-view AP is below acoustic AP (Tables 3-4).
    """
    depths = list(cfg.sweep_layers)
    xv = {(r["phone_layers"], r["phone_pooling"]): r["crossview_ap"] for r in table1}
    t2 = {r["phone_heads"]: r["acoustic_ap"] for r in table2}
    avg_beats_rep = all(xv[(n, "avg")] > xv[(n, "rep")] for n in depths)
    middle = depths[len(depths) // 2]
    middle_best = len(depths) >= 3 and xv[(middle, "avg")] == max(xv[(n, "avg")] for n in depths)
    deep_fails = max(xv[(depths[-1], "avg")], xv[(depths[-1], "rep")]) < 0.05
    best_h = max(t2, key=t2.__getitem__)
    findings = {
        (depths[-1], "rep"): f"the deepest encoder fails, Avg and Rep (AP < 0.05): "
        f"{_says(deep_fails)}",
        (middle, "avg"): f"the middle depth is best (Avg): {_says(middle_best)}",
        (depths[0], "avg"): f"Avg beats Rep at every depth: {_says(avg_beats_rep)}",
    }
    rows = [
        PaperRow(
            f"Table 1 cross-view AP, N = {n} {p.capitalize()}.",
            "crossview_ap",
            PAPER_TABLE1_CROSSVIEW.get((n, p)),
            "04_awe",
            {"table": "1", "N": n, "pooling": p},
            digits=3,
            finding=findings.get((n, p), ""),
        )
        for n in depths
        for p in ("avg", "rep")
    ]
    for h in cfg.sweep_heads:
        finding = ""
        if h == cfg.sweep_heads[-1]:
            finding = f"h = 16 gives the best acoustic AP: {_says(best_h == 16)} (ours: {best_h})"
        rows.append(
            PaperRow(
                f"Table 2 acoustic AP, h = {h}",
                "acoustic_ap",
                PAPER_TABLE2_ACOUSTIC.get(h),
                "04_awe",
                {"table": "2", "h": h},
                digits=3,
                finding=finding,
            )
        )
    beats_dtw = min(model_ap_on_dtw_pairs) > dtw_ap
    below = float(chosen_mean["crossview_ap"]) < float(chosen_mean["acoustic_ap"])
    rows += [
        PaperRow(
            "Table 3 MFCC + DTW acoustic AP",
            "acoustic_ap",
            0.214,
            "04_awe",
            {"model": "mfcc-dtw"},
            digits=3,
            finding=f"the transformer beats MFCC + DTW on the same pairs: {_says(beats_dtw)}",
        ),
        PaperRow(
            "Table 3 transformer acoustic AP",
            "acoustic_ap",
            0.708,
            "04_awe",
            {"model": "chosen"},
            digits=3,
            finding="mean ± std over seeds",
        ),
        PaperRow(
            "Table 4 transformer cross-view AP",
            "crossview_ap",
            0.551,
            "04_awe",
            {"model": "chosen"},
            digits=3,
            finding=f"cross-view AP is below acoustic AP: {_says(below)}",
        ),
    ]
    return rows


# ------------------------------------------------------------------------------- figures


def project_2d(*arrays: np.ndarray) -> list[np.ndarray]:
    """PCA of the L2-normalised rows of all arrays together -> each as (n_i, 2)."""
    normed = [a / np.linalg.norm(a, axis=1, keepdims=True) for a in arrays]
    stacked = np.concatenate(normed)
    centred = stacked - stacked.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    flat = centred @ vt[:2].T  # (sum n_i, 2)
    out, start = [], 0
    for a in normed:
        out.append(flat[start : start + a.shape[0]])
        start += a.shape[0]
    return out


def nearest_words(
    emb_x: np.ndarray,
    token_words: Sequence[str],
    words: Sequence[str],
    emb_c: np.ndarray,
    queries: Sequence[int],
    k: int = 3,
) -> list[dict[str, Any]]:
    """For each query token: its word, the k nearest written words (cosine), and whether the
    nearest is right."""
    a = emb_x / np.linalg.norm(emb_x, axis=1, keepdims=True)
    c = emb_c / np.linalg.norm(emb_c, axis=1, keepdims=True)
    rows = []
    for q in queries:
        sims = c @ a[q]
        top = np.argsort(-sims, kind="stable")[:k]
        rows.append(
            {
                "token word": token_words[q],
                "nearest written words": ", ".join(f"{words[t]} ({sims[t]:.2f})" for t in top),
                "correct": words[top[0]] == token_words[q],
            }
        )
    return rows


__all__ = [
    "AWEExperimentConfig",
    "AWERun",
    "adam_factory",
    "corpus_root",
    "dtw_baseline",
    "embed_segments",
    "embed_words",
    "evaluate_awe",
    "load_awe_data",
    "nearest_words",
    "num_phone_ids",
    "paper_rows",
    "project_2d",
    "sweep",
    "train_awe",
]
