"""Chapter 04: multi-view transformer acoustic word embeddings (Rhodes & Bains, §3).

One configuration (:class:`Config`, one YAML preset per scale in ``book/04_awe/presets``),
composed of the corpus (:class:`~audiorepro.config.CorpusSpec`), the encoders
(:class:`~audiorepro.models.awe.AWEModelConfig`) and the training section
(:class:`~audiorepro.training.plateau.PlateauTrainConfig`), and the calls the pages make:

- :func:`load_config` and :func:`load_data`: the preset, and the train/dev/test word segments
  after the paper's selection;
- :func:`train`: Adam (lr 5e-4, betas 0.9/0.999, eps 1e-8), batches of 256 segments, the eq. (4)
  loss, dev cross-view AP after every epoch and the plateau schedule (4 flat epochs: reload the
  best model and optimizer state, lr / 10; stop below 1e-7), on
  :class:`audiorepro.training.Trainer`. Every trained model is kept in the chapter's
  :class:`~audiorepro.storage.RunStore`, keyed by what defines it, so a page that asks for a
  model another page already trained loads it instead of training it again;
- :func:`table1_configs`, :func:`table2_configs` and :func:`sweep`: the paper's sweeps over the
  phoneme encoder, as variants of one config, every setting once per seed; :func:`sweeps` runs
  both tables and the chosen model's seeds side by side in worker processes, and
  :func:`sweep_table`, :func:`sweep_curves` and :func:`curve_ends` summarise them;
- :func:`evaluate`: acoustic (same-different) AP and cross-view AP of a split;
  :func:`chance_levels`, the AP of a ranking that knows nothing; :func:`sign_stats`, the
  cross-view AP ranked by |cos| and the share of a word's tokens opposite it;
- :func:`dtw_baseline`: the MFCC + DTW same-different baseline (Table 3, first row) with chapter
  03's DTW (:func:`audiorepro.metrics.dtw.pairwise_dtw`);
- :func:`projection` and :func:`nearest_word_table`, for the figures;
- :data:`PAPER` and :func:`findings`: the paper's numbers and the paper-vs-ours table.
- any recordings (``audiorepro awe ...``): :func:`segment_features` and :func:`segments_data`
  turn the rows of a segments table into :class:`~audiorepro.data.awe.WordSegments`,
  :func:`lexicon_ids` gives their pronunciations, :func:`train_on_segments` trains through the
  chapter's own training step into a run folder, :func:`embed_table` and :func:`embeddings_ap`
  embed a table and score the embeddings; :func:`corpus_segments_table` writes a split of the
  chapter's own corpus as such a table and :func:`compare_segments` checks that both paths
  give the same tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from audiorepro import reporting
from audiorepro.config import (
    ConfigError,
    CorpusSpec,
    field,
    from_dict,
    load_preset,
    max_steps_alone,
    refuse_unused,
    replace,
    to_dict,
)
from audiorepro.data.awe import (
    MultiViewDataset,
    WordSegments,
    collate_multiview,
    pad_sequences,
    prepare_split,
)
from audiorepro.data.embedded.lexicon import SWITCHBOARD_SYMBOLS
from audiorepro.data.recipes.switchboard import WordVocab, load_vocab
from audiorepro.data.recordings import (
    SEGMENT_COLUMNS,
    RecordingsError,
    Segment,
    cmudict_lexicon,
    read_lexicon,
    read_segments,
)
from audiorepro.features import load_audio, mfcc_features
from audiorepro.losses.multiview import DISTANCES, MultiViewContrastiveLoss
from audiorepro.metrics.abx import edit_distance
from audiorepro.metrics.average_precision import (
    cross_view_ap,
    cross_view_chance,
    cross_view_positive_cosines,
    pairs_average_precision,
    same_different_ap,
    same_different_chance,
)
from audiorepro.metrics.dtw import pairwise_dtw
from audiorepro.models.awe import AWEModelConfig, MultiViewAWE, num_parameters
from audiorepro.parallel import default_workers, map_processes
from audiorepro.paths import repo_root
from audiorepro.reporting import PaperRow
from audiorepro.repro import seed_everything
from audiorepro.storage import (
    Run,
    RunStore,
    config_hash,
    load_model_weights,
    read_json,
    read_run_info,
    save_model_weights,
    write_json,
)
from audiorepro.training.loop import Trainer, TrainResult, resolve_device
from audiorepro.training.optimizers import adam_factory
from audiorepro.training.plateau import PlateauTrainConfig
from audiorepro.training.selection import check_select

SAMPLE_RATE = 16_000
CHAPTER = "04_awe"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
DATA_FORMATS = ("npz", "hdf5")
SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a chapter-04 page needs; paper values in ``presets/paper.yaml``."""

    corpus: CorpusSpec = field(
        default_factory=CorpusSpec,
        help="the word corpus: smoke | embedded (generated, under root if given) | paper (root: "
        "the Switchboard word folder; relative: under $AUDIOREPRO_DATA)",
    )
    model: AWEModelConfig = field(
        default_factory=AWEModelConfig,
        help="the two encoders (num_phones is taken from the data)",
    )
    train: PlateauTrainConfig = field(
        default_factory=PlateauTrainConfig, help="batches, Adam's lr and the plateau schedule"
    )
    data_format: str = field("npz", help="npz (lists + npz) | hdf5 (agwe utterance features)")
    min_frames: int = field(2, help="segments shorter than this are dropped (paper: 2)")
    max_train_tokens: int | None = field(None, help="cap on train tokens (None: all)")
    margin: float = field(0.5, help="margin m of eq. (4) (agwe-recipe: 0.5)")
    loss_k: int = field(8, help="most offending negatives averaged per term (agwe-recipe: 8)")
    distance: str = field("cos2", help="cos2 (paper: 1 - cos^2) | cos (code base: 1 - cos)")
    seed: int = field(0, help="seed of a run (initialisation, data order, dropout)")
    seeds: tuple[int, ...] = field((0, 1, 2), help="seeds of the chosen model (mean ± std)")
    sweep_epochs: int = field(15, help="epochs of each sweep run (paper: 15)")
    sweep_layers: tuple[int, ...] = field((1, 4, 8), help="Table 1: phoneme encoder layers")
    sweep_heads: tuple[int, ...] = field(
        (1, 4, 8, 16, 32), help="Table 2: heads at N = model.phone_layers"
    )
    table1_heads: int = field(4, help="Table 1: heads of every phoneme encoder (paper: 4)")
    dtw_tokens: int = field(200, help="test tokens of the MFCC + DTW baseline (all pairs)")
    eval_batch_size: int = field(512, help="segments per forward pass when embedding")
    select: str = field(
        "best",
        help="the weights a run evaluates: best (the epoch of the best dev cross-view AP, the "
        "paper's and agwe-recipe's selection; every preset) | final (the last epoch's). A run "
        "saves both (model.safetensors, final.safetensors); select does not change the run",
    )

    def __post_init__(self) -> None:
        if self.data_format not in DATA_FORMATS:
            raise ConfigError(
                f"data_format: expected one of {DATA_FORMATS}, got {self.data_format!r}"
            )
        if self.distance not in DISTANCES:
            raise ConfigError(f"distance: expected one of {DISTANCES}, got {self.distance!r}")
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")
        check_select(self.select, "Config.select")


def load_config(preset: str, overrides: Mapping[str, Any] | None = None, **more: Any) -> Config:
    """The chapter's :class:`Config` of ``preset`` (``PRESETS/<preset>.yaml``) with single-field
    overrides, given as a mapping or as keywords; dotted names set nested fields
    (``{"train.max_steps": 10}``), and ``None`` values are ignored. ``train.max_steps`` set
    without ``train.num_epochs`` is the run's length (:func:`audiorepro.config.max_steps_alone`)."""
    return load_preset(
        Config, PRESETS, preset, **max_steps_alone({**dict(overrides or {}), **more})
    )


# ------------------------------------------------------------------------------- data


def corpus_root(config: Config) -> Path:
    """The word-corpus folder: ``corpus.root`` when given (a generated corpus is generated there,
    or reused), else the generated corpus's default place."""
    spec = config.corpus
    if spec.kind == "paper":
        return spec.resolve(Path())
    if spec.root is None:
        from audiorepro.data.embedded.generate import ensure_corpora

        return Path(ensure_corpora(spec.kind, spec.seed, only=("words",))["words"])
    from audiorepro.data.embedded.word_corpus import generate_word_corpus

    root = spec.resolve(Path())
    generate_word_corpus(root, spec.kind, spec.seed)
    return root


def load_data(config: Config) -> dict[str, WordSegments]:
    """``{"train", "dev", "test"}`` segments after the selection of §3.1."""
    root = corpus_root(config)
    return {
        split: prepare_split(
            root,
            split,
            feature_dim=config.model.feature_dim,
            min_frames=config.min_frames,
            max_tokens=config.max_train_tokens if split == "train" else None,
            source=config.data_format,
        )
        for split in SPLITS
    }


def num_phone_ids(data: Mapping[str, WordSegments]) -> int:
    """The phone vocabulary size the model needs for every split."""
    return max(s.num_phones for s in data.values())


def data_digest(data: Mapping[str, WordSegments]) -> str:
    """Hex digest of the segments' keys, frames and phones: the data identity of a run."""
    digest = hashlib.sha256()
    for split in sorted(data):
        seg = data[split]
        digest.update(f"{split}:{len(seg)}:".encode())
        for key, feats, phones in zip(seg.keys, seg.feats, seg.phones, strict=True):
            digest.update(key.encode())
            digest.update(str(feats.shape).encode())
            digest.update(np.ascontiguousarray(feats).tobytes())
            digest.update(np.ascontiguousarray(phones).tobytes())
    return digest.hexdigest()[:16]


def model_config(config: Config, data: Mapping[str, WordSegments]) -> AWEModelConfig:
    """``config.model`` with the phone vocabulary of ``data``."""
    return dataclasses.replace(config.model, num_phones=num_phone_ids(data))


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


def evaluate(
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


def sign_stats(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> dict[str, float]:
    """What the sign of the cosine does to a split's cross-view pairs: ``crossview_ap``
    (pairs ranked by cos, as :func:`evaluate`), ``abs_crossview_ap`` (ranked by |cos|: a
    written word and its antipode alike, as the squared distance 1 - cos² sees them) and
    ``negative_share``, the share of positive pairs (a token and its own written word) whose
    cosine is below 0."""
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    cosines = cross_view_positive_cosines(emb_x, segments.words, emb_c, words)
    return {
        "crossview_ap": float(cross_view_ap(emb_x, segments.words, emb_c, words)),
        "abs_crossview_ap": float(
            cross_view_ap(emb_x, segments.words, emb_c, words, absolute=True)
        ),
        "negative_share": float(np.mean(cosines < 0)),
    }


def written_word_geometry(
    model: MultiViewAWE, word_phones: Mapping[str, np.ndarray]
) -> dict[str, float]:
    """How the written-word embeddings g(c) of ``word_phones`` lie:

    - ``first_phone_share``: the share of words whose nearest other word (cosine) begins with
      the same phone; ``chance``: that share for a neighbour drawn at random (the mean, over
      words, of the share of the other words with the same first phone). A "Rep" encoder that
      reads little beyond the first phone's own position sits far above chance;
    - ``mean_cosine``: the mean cosine between two different words; near 1 when the encoder
      has collapsed, every word onto one direction (the paper's failing deep encoders)."""
    words, emb = embed_words(model, dict(word_phones))
    if len(words) < 2:
        raise ValueError("written_word_geometry needs at least two written words")
    unit = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    sim = unit @ unit.T
    off = ~np.eye(len(words), dtype=bool)
    mean_cosine = float(sim[off].mean())
    np.fill_diagonal(sim, -np.inf)
    first = np.array([int(word_phones[w][0]) for w in words])
    same = (first[:, None] == first[None, :]) & off
    return {
        "first_phone_share": float(np.mean(first[np.argmax(sim, axis=1)] == first)),
        "chance": float(np.mean(same.sum(axis=1) / (len(words) - 1))),
        "mean_cosine": mean_cosine,
    }


def anchor_check(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> dict[str, float]:
    """Is cross-view AP high because a written word is one clean anchor per word? The
    speakers of ``segments`` split in two halves (sorted, alternately); on the second half's
    tokens of the words both halves say:

    - ``acoustic_ap``: token against token (same-different AP);
    - ``crossview_ap``: token against the written words (g(c) of those words);
    - ``centroid_ap``: token against acoustic anchors, the mean f(x) of each word's tokens in
      the *first* half (other speakers), ranked as cross-view AP;
    - ``tokens``, ``words``: how many.

    A centroid AP near the cross-view AP and above the acoustic AP says that ranking tokens
    against one anchor per word, rather than against each other, is what lifts cross-view AP
    above acoustic AP, whichever view the anchor comes from."""
    speakers = sorted(set(segments.speakers))
    first_half = set(speakers[0::2])
    in_first = np.array([s in first_half for s in segments.speakers])
    words = np.asarray(segments.words)
    shared = sorted(set(words[in_first]) & set(words[~in_first]))
    if len(shared) < 2:
        raise ValueError("anchor_check: fewer than two words have tokens in both speaker halves")
    keep = set(shared)
    emb = embed_segments(model, segments, batch_size)
    test = np.array([(not a) and w in keep for a, w in zip(in_first, words, strict=True)])
    anchors = np.stack([emb[in_first & (words == w)].mean(axis=0) for w in shared])
    written, written_emb = embed_words(
        model, {w: segments.word_phones[w] for w in shared}, batch_size
    )
    labels = words[test].tolist()
    return {
        "acoustic_ap": float(same_different_ap(emb[test], labels)),
        "crossview_ap": float(cross_view_ap(emb[test], labels, written_emb, written)),
        "centroid_ap": float(cross_view_ap(emb[test], labels, anchors, shared)),
        "tokens": int(test.sum()),
        "words": len(shared),
    }


def pronunciation_variation(
    realised: Sequence[Sequence[str]],
    words: Sequence[str],
    dictionary: Mapping[str, Sequence[str]],
) -> dict[str, float]:
    """How the spoken tokens of a word differ in pronunciation: from each token's realised
    phones (``realised[i]``, its phone alignment), its word and the dictionary pronunciation
    the phoneme encoder reads (``dictionary[word]``):

    - ``dictionary_match``: share of tokens realised exactly as their dictionary
      pronunciation; ``phone_error_rate``: mean edit distance to it over its length;
    - ``usual_realisation``: over the words with two or more tokens, the share of their tokens
      realised as their word's most frequent realisation (1: every token of a word the same
      phones, whoever speaks it); ``words_with_variants``: the share of those words with more
      than one realisation;
    - ``tokens``, ``words``: how many (``words``: with two or more tokens).

    Raises:
        ValueError: lengths differ, a word is missing from ``dictionary``, or no word has two
            tokens.
    """
    if len(realised) != len(words):
        raise ValueError(
            f"pronunciation_variation: {len(realised)} realisations for {len(words)} words"
        )
    missing = sorted(set(words) - set(dictionary))
    if missing:
        raise ValueError(f"pronunciation_variation: no dictionary entry for {missing[:5]}")
    forms: dict[str, Counter[tuple[str, ...]]] = {}
    matches, errors = 0, 0.0
    for phones, word in zip(realised, words, strict=True):
        phones = tuple(phones)
        reference = tuple(dictionary[word])
        matches += phones == reference
        errors += edit_distance(phones, reference) / max(len(reference), 1)
        forms.setdefault(word, Counter())[phones] += 1
    repeated = [c for c in forms.values() if sum(c.values()) > 1]
    if not repeated:
        raise ValueError("pronunciation_variation: no word has two or more tokens")
    usual = sum(c.most_common(1)[0][1] for c in repeated)
    return {
        "dictionary_match": matches / len(words),
        "phone_error_rate": errors / len(words),
        "usual_realisation": usual / sum(sum(c.values()) for c in repeated),
        "words_with_variants": sum(len(c) > 1 for c in repeated) / len(repeated),
        "tokens": len(words),
        "words": len(repeated),
    }


def corpus_pronunciation_variation(config: Config, split: str = "test") -> dict[str, float] | None:
    """:func:`pronunciation_variation` of a split of the chapter's corpus, read from its
    supervision manifest (each token's phone alignment and ``custom["pronunciation"]``, the
    dictionary pronunciation its word's phone ids come from). ``None`` for a corpus without
    that manifest (Switchboard in the Kamper/He layout has no phone alignments)."""
    from audiorepro.data.embedded.word_corpus import MANIFEST_DIR
    from audiorepro.data.manifests import read_supervisions

    path = corpus_root(config) / MANIFEST_DIR / f"{split}_supervisions.jsonl.gz"
    if not path.is_file():
        return None
    sups = read_supervisions(path)
    for s in sups:
        if not (s.alignment or {}).get("phone") or "pronunciation" not in (s.custom or {}):
            raise ValueError(
                f"{path}: supervision {s.id!r} lacks its phone alignment or its "
                'custom["pronunciation"] (the word corpus writes both for every token)'
            )
    realised = [[a.symbol for a in s.alignment["phone"]] for s in sups]
    words = [s.text for s in sups]
    dictionary = {s.text: s.custom["pronunciation"] for s in sups}
    return pronunciation_variation(realised, words, dictionary)


FLOOR_FACTOR = 3.0
"""A compared run must reach this many times the chance AP to count as having learned."""


def chance_levels(segments: WordSegments) -> dict[str, float]:
    """The AP of a ranking that knows nothing, per metric of :func:`evaluate` on
    ``segments``: the share of positive pairs (``acoustic_ap``: same-word token pairs;
    ``crossview_ap``: token x word-type pairs of the same word)."""
    return {
        "acoustic_ap": same_different_chance(segments.words),
        "crossview_ap": cross_view_chance(segments.words, sorted(segments.word_phones)),
    }


def acoustic_ap_on(
    model: MultiViewAWE, segments: WordSegments, indices: Sequence[int], batch_size: int = 512
) -> float:
    """Same-different AP of the model over all pairs of the tokens ``indices`` (e.g. the MFCC +
    DTW baseline's subset, to compare on the same pairs)."""
    emb = embed_segments(model, segments, batch_size)[np.asarray(indices)]
    return float(same_different_ap(emb, [segments.words[i] for i in indices]))


# ------------------------------------------------------------------------------- training


@dataclasses.dataclass
class AWERun:
    """A trained model (the ``select``-ed state loaded) and how it got there.

    Attributes:
        model: the model with the best dev cross-view AP (``select: best``) or the final one,
            in eval mode.
        history: the training history (losses per step, dev metrics per epoch).
        schedule_events: ``(step, event)`` of the plateau schedule ("best", "decay", "stop").
        best_dev: the best dev cross-view AP.
        seed: the run's seed.
        model_config: the encoders' configuration.
        path: the run's folder in the run store.
        selected: which weights ``model`` holds, ``"best"`` or ``"final"``.
        kept_epoch: the epoch (1-based) of those weights (:func:`kept_epoch`; runs of
            :func:`train_on_segments`).
    """

    model: MultiViewAWE
    history: TrainResult
    schedule_events: list[tuple[int, str]]
    best_dev: float
    seed: int
    model_config: AWEModelConfig
    path: Path
    selected: str = "best"
    kept_epoch: int | None = None


SELECTED_WEIGHTS = {"best": "model.safetensors", "final": "final.safetensors"}
"""The weights file of each ``select``: a run keeps both."""


def run_config(config: Config, data: Mapping[str, WordSegments]) -> dict[str, Any]:
    """What defines a trained model, the key of its run: the resolved encoders, the training
    section, the loss, the seed, the embedding batch (dev AP picks the best epoch) and the data
    identity. The chapter-level fields (sweeps, seeds list, baseline size) are left out, so that
    a sweep setting equal to the chosen model is the chosen model's run."""
    return {**_run_fields(config, data), "data": data_digest(data)}


def _run_fields(config: Config, data: Mapping[str, WordSegments]) -> dict[str, Any]:
    """:func:`run_config` without the data identity (for runs on one and the same data)."""
    return {
        "model": to_dict(model_config(config, data)),
        "train": to_dict(config.train),
        "loss": {"margin": config.margin, "k": config.loss_k, "distance": config.distance},
        "seed": config.seed,
        "eval_batch_size": config.eval_batch_size,
    }


def _set_threads(config: Config) -> None:
    if config.train.torch_threads is not None:
        torch.set_num_threads(config.train.torch_threads)


def _fit(
    config: Config,
    data: Mapping[str, WordSegments],
    progress: str,
    staging: Path | None = None,
    callbacks: Sequence[Any] = (),
) -> tuple[MultiViewAWE, TrainResult, Any, dict[str, torch.Tensor]]:
    """Train; return the model with its best dev state loaded, the history, the plateau
    schedule and the final weights (a CPU state dict). With ``staging``, checkpoint there
    after every epoch's evaluation (the best weights too) and continue from the newest
    checkpoint found there."""
    seed_everything(config.seed)
    model = MultiViewAWE(model_config(config, data))
    loss = MultiViewContrastiveLoss(config.margin, config.loss_k, config.distance)

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
        return evaluate(model, dev, config.eval_batch_size)  # type: ignore[arg-type]

    best_dir = staging / "best" if staging is not None else None
    schedule = config.train.callback("crossview_ap", mode="max", directory=best_dir)
    dataset = MultiViewDataset(data["train"])
    train_cfg = config.train.trainer_config(config.seed)
    if staging is not None:  # once per epoch, right after the evaluation the schedule acts on
        per_epoch = -(-len(dataset) // train_cfg.batch_size)
        train_cfg = dataclasses.replace(train_cfg, checkpoint_every=per_epoch)
    trainer = Trainer(
        model,
        loss_fn,
        dataset,
        train_cfg,
        collate_fn=collate_multiview,
        eval_fn=eval_fn,
        optimizer_factory=adam_factory,
        out_dir=staging,
        callbacks=[schedule, *callbacks],
        progress=progress,
    )
    result = trainer.fit(resume=staging is not None)
    model = trainer.unwrapped_model
    final = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    schedule.restore_best(model)
    return model, result, schedule, final  # type: ignore[return-value]


def train(
    config: Config,
    data: Mapping[str, WordSegments],
    *,
    store: RunStore | None = None,
    progress: str = "none",
    callbacks: Sequence[Any] = (),
) -> AWERun:
    """Train one multi-view model (seed ``config.seed``, at most ``config.train.num_epochs``
    epochs) and return it with the ``config.select``-ed state loaded (the best dev cross-view
    AP's, or the final one), or load it from the run store if it was trained before. The run
    keeps both states.

    Args:
        config: the experiment configuration; variants (sweeps, seeds) via
            :func:`audiorepro.config.replace`.
        data: :func:`load_data` output.
        store: where runs are kept (default ``RunStore("04_awe")``).
        progress: the Trainer's progress mode.
        callbacks: further Trainer callbacks (progress hooks, tests).

    A run killed before it finished continues from its last epoch's checkpoint, kept in the
    store's staging folder of this configuration (:meth:`RunStore.staging`), when ``train`` is
    called again with the same configuration; the result equals an uninterrupted run's.
    """
    store = store if store is not None else RunStore(CHAPTER)
    _set_threads(config)
    resolved = model_config(config, data)
    key = run_config(config, data)

    def build(folder: Path) -> dict[str, Any]:
        staging = store.staging(store.run("model", key))
        model, result, schedule, final = _fit(config, data, progress, staging, callbacks)
        best_dev = float(schedule.best) if schedule.best is not None else float("nan")
        save_model_weights(model, folder / SELECTED_WEIGHTS["best"])
        final_model = MultiViewAWE(resolved)
        final_model.load_state_dict(final)
        save_model_weights(final_model, folder / SELECTED_WEIGHTS["final"])
        write_json(
            folder / "history.json",
            {
                "history": result.to_dict(),
                "schedule": [list(h) for h in schedule.history],
                "best_dev": best_dev,
            },
        )
        return {"best_dev": best_dev, "epochs": result.final_epoch}

    def load(run: Run) -> AWERun:
        model = MultiViewAWE(resolved)
        name = SELECTED_WEIGHTS[config.select]
        load_model_weights(model, run.file(name))
        model.to(resolve_device(config.train.device)).eval()
        saved = read_json(run.file("history.json"))
        return AWERun(
            model=model,
            history=TrainResult.from_dict(saved["history"]),
            schedule_events=[(int(s), str(e)) for s, e in saved["schedule"]],
            best_dev=float(saved["best_dev"]),
            seed=config.seed,
            model_config=resolved,
            path=run.path,
            selected=config.select,
        )

    return store.cached("model", key, build, load)


def _per_seed(config: Config, settings: Sequence[Mapping[str, Any]]) -> list[Config]:
    """Each setting (dotted field changes) of a sweep applied to ``config`` with
    ``sweep_epochs`` epochs, once per seed of ``config.seeds``, setting by setting."""
    return [
        replace(config, **{**setting, "train.num_epochs": config.sweep_epochs, "seed": s})
        for setting in settings
        for s in config.seeds
    ]


def table1_configs(config: Config) -> list[Config]:
    """Table 1's runs: phoneme encoders of ``sweep_layers`` depths, Avg and Rep pooling,
    ``table1_heads`` heads, ``sweep_epochs`` epochs, each once per seed of ``seeds``."""
    return _per_seed(
        config,
        [
            {
                "model.phone_layers": n,
                "model.phone_pooling": p,
                "model.phone_heads": config.table1_heads,
            }
            for n in config.sweep_layers
            for p in ("avg", "rep")
        ],
    )


def table2_configs(config: Config) -> list[Config]:
    """Table 2's runs: ``sweep_heads`` heads at the chosen depth, Avg pooling, ``sweep_epochs``
    epochs, each once per seed of ``seeds``."""
    return _per_seed(
        config,
        [{"model.phone_pooling": "avg", "model.phone_heads": h} for h in config.sweep_heads],
    )


def seed_configs(config: Config) -> list[Config]:
    """The chosen model once per seed of ``config.seeds``."""
    return [replace(config, seed=s) for s in config.seeds]


def squared_config(config: Config) -> Config:
    """The training page's run with the paper's distance ``1 - cos²``, ``sweep_epochs`` epochs,
    against the preset's model (its ``distance`` is ``1 - cos`` in the CPU presets)."""
    return replace(config, distance="cos2", **{"train.num_epochs": config.sweep_epochs})


def chapter_configs(config: Config) -> list[Config]:
    """Every run the chapter's pages train: Tables 1 and 2 and the chosen model once per seed
    of ``seeds``, and :func:`squared_config` (duplicates included; :func:`train_ahead` trains
    each distinct run once)."""
    return [
        *table1_configs(config),
        *table2_configs(config),
        *seed_configs(config),
        squared_config(config),
    ]


def _train_only(data: Mapping[str, WordSegments], task: tuple[Any, ...]) -> float:
    """Train (or load) one run in a worker; its training seconds."""
    config, store = task
    return float(train(config, data, store=store).history.wall_time_s)


def _distinct(
    configs: Sequence[Config], data: Mapping[str, WordSegments]
) -> tuple[list[str], dict[str, Config]]:
    """Each config's run key (:func:`run_config` and ``select``) and one config per key."""
    keys = [config_hash({**_run_fields(c, data), "select": c.select}) for c in configs]
    unique: dict[str, Config] = {}
    for key, config in zip(keys, configs, strict=True):
        unique.setdefault(key, config)
    return keys, unique


def train_ahead(
    config: Config,
    data: Mapping[str, WordSegments],
    *,
    workers: int | None = None,
    store: RunStore | None = None,
) -> int:
    """Train every run of :func:`chapter_configs` the run store lacks, side by side (one
    process per core on the CPU, the longest first), so that the pages that follow only load
    them. Every run seeds itself, so each equals the run trained alone. Returns how many runs
    were trained."""
    store = store if store is not None else RunStore(CHAPTER)
    if workers is None:
        workers = default_workers(str(resolve_device(config.train.device)))
    _, unique = _distinct(chapter_configs(config), data)
    missing = [c for c in unique.values() if not store.run("model", run_config(c, data)).complete]
    missing.sort(key=lambda c: -_cost(c))
    map_processes(_train_only, [(c, store) for c in missing], shared=data, workers=workers)
    return len(missing)


def _sweep_row(data: Mapping[str, WordSegments], task: tuple[Any, ...]) -> dict[str, Any]:
    """Train (or load) one sweep run and score it: a row of :func:`sweep` (one process)."""
    config, split, store = task
    run = train(config, data, store=store)
    row: dict[str, Any] = {
        "phone_layers": config.model.phone_layers,
        "phone_pooling": config.model.phone_pooling,
        "phone_heads": config.model.phone_heads,
        "seed": config.seed,
    }
    row.update(evaluate(run.model, data[split], config.eval_batch_size))
    row.update(
        dev_crossview_ap=run.best_dev,
        dev_curve=run.history.eval_metric("crossview_ap"),
        epochs=run.history.final_epoch,
        seconds=round(run.history.wall_time_s, 1),
    )
    return row


def _cost(config: Config) -> int:
    """A rough relative cost of a run (epochs x layers), to start the longest first."""
    return config.train.num_epochs * (config.model.acoustic_layers + config.model.phone_layers)


def sweep(
    configs: Sequence[Config],
    data: Mapping[str, WordSegments],
    *,
    split: str = "test",
    store: RunStore | None = None,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """Train (or load) one model per config and score it on ``split``.

    Configs that define the same run (:func:`run_config`, and the same ``select``) are trained
    and scored once. With ``workers`` > 1, up to that many runs train at once, one process
    each (:func:`audiorepro.parallel.map_processes`), the longest first; every run seeds itself,
    so the rows are those of one run after the other.

    Returns one row per config: ``phone_layers``, ``phone_pooling``, ``phone_heads``, ``seed``,
    ``acoustic_ap`` and ``crossview_ap`` on ``split``, ``dev_crossview_ap`` (best),
    ``dev_curve`` (the dev cross-view AP after each epoch), ``epochs`` and ``seconds`` (of the
    training).
    """
    keys, unique = _distinct(configs, data)
    order = sorted(unique, key=lambda k: -_cost(unique[k]))
    tasks = [(unique[k], split, store) for k in order]
    scored = map_processes(_sweep_row, tasks, shared=data, workers=workers)
    rows = dict(zip(order, scored, strict=True))
    return [dict(rows[k]) for k in keys]


def sweeps(
    config: Config,
    data: Mapping[str, WordSegments],
    *,
    workers: int | None = None,
    split: str = "test",
    store: RunStore | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Tables 1 and 2 and the chosen model, every seed, in one :func:`sweep`:
    ``{"1": rows, "2": rows, "chosen": rows}``.

    One pool trains them all, so a run two of them share (Table 2's ``table1_heads`` heads is
    Table 1's middle row; Table 2's 16 heads is the chosen model when ``sweep_epochs`` equals
    ``train.num_epochs``) is trained once. ``workers`` None: one per usable core on the CPU,
    one on a GPU (:func:`audiorepro.parallel.default_workers`).
    """
    if workers is None:
        workers = default_workers(str(resolve_device(config.train.device)))
    groups = {
        "1": table1_configs(config),
        "2": table2_configs(config),
        "chosen": seed_configs(config),
    }
    flat = [c for configs in groups.values() for c in configs]
    rows = sweep(flat, data, split=split, store=store, workers=workers)
    out, start = {}, 0
    for name, configs in groups.items():
        out[name] = rows[start : start + len(configs)]
        start += len(configs)
    return out


def current(records: Sequence[Mapping[str, Any]], config: Config) -> list[Mapping[str, Any]]:
    """The ledger ``records`` of ``config`` (its ``config_hash``; every evaluation record
    carries the chapter's configuration) and of its seeds (``seeds`` and ``seed``) only: what
    the findings read (:func:`audiorepro.reporting.current_records`)."""
    return reporting.current_records(records, config, (*config.seeds, config.seed))


SWEEP_METRICS = ("acoustic_ap", "crossview_ap", "dev_crossview_ap")


def sweep_tags(row: Mapping[str, Any], table: str) -> dict[str, Any]:
    """The ledger tags of a sweep row: ``{"table": "1", "N", "pooling"}`` or
    ``{"table": "2", "h"}``."""
    if table == "1":
        return {"table": "1", "N": row["phone_layers"], "pooling": row["phone_pooling"]}
    return {"table": "2", "h": row["phone_heads"]}


def setting_label(row: Mapping[str, Any], table: str) -> str:
    """A sweep row's setting in words: ``"N = 4 Avg"`` (Table 1) or ``"h = 16"`` (Table 2)."""
    if table == "1":
        return f"N = {row['phone_layers']} {str(row['phone_pooling']).capitalize()}"
    return f"h = {row['phone_heads']}"


def _by_setting(
    rows: Sequence[Mapping[str, Any]], table: str
) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(setting_label(row, table), []).append(row)
    return groups


def record_sweep(
    rows: Sequence[Mapping[str, Any]], table: str, *, page: str, preset: str, config: Config
) -> None:
    """One ledger record per sweep row, with the row's seed and training time, tagged by
    :func:`sweep_tags`; ``config`` is the chapter's configuration."""
    for row in rows:
        reporting.record_result(
            CHAPTER,
            page,
            {k: row[k] for k in SWEEP_METRICS},
            preset=preset,
            seed=row["seed"],
            config=to_dict(config),
            wall_time_s=row["seconds"],
            tags=sweep_tags(row, table),
        )


def sweep_table(rows: Sequence[Mapping[str, Any]], table: str, digits: int = 3) -> pd.DataFrame:
    """One line per setting of a sweep (Table ``"1"`` or ``"2"``): its seeds, and the mean ±
    std over them of the scored split's acoustic and cross-view AP and of the best dev
    cross-view AP, and the epochs trained."""
    out = []
    for label, group in _by_setting(rows, table).items():
        line: dict[str, Any] = {
            "setting": label,
            "seeds": ", ".join(str(r["seed"]) for r in group),
        }
        for metric in SWEEP_METRICS:
            line[metric] = reporting.format_mean_std([r[metric] for r in group], digits)
        line["epochs"] = ", ".join(sorted({str(r["epochs"]) for r in group}))
        out.append(line)
    return pd.DataFrame(out).set_index("setting")


def sweep_curves(rows: Sequence[Mapping[str, Any]], table: str) -> dict[str, list[float]]:
    """The dev cross-view AP after each epoch, mean over the seeds of each setting (a run
    stopped early by the schedule counts until its last epoch)."""
    curves = {}
    for label, group in _by_setting(rows, table).items():
        length = max(len(r["dev_curve"]) for r in group)
        padded = np.full((len(group), length), np.nan)
        for i, r in enumerate(group):
            padded[i, : len(r["dev_curve"])] = r["dev_curve"]
        curves[label] = np.nanmean(padded, axis=0).tolist()
    return curves


def sweep_spreads(rows: Sequence[Mapping[str, Any]], table: str) -> dict[str, float]:
    """The seed spread of each setting's last dev cross-view AP: the standard deviation
    (ddof 1) over its runs of their curves' last value (NaN with one seed)."""
    return {
        label: float(np.std([r["dev_curve"][-1] for r in group], ddof=1))
        if len(group) > 1
        else float("nan")
        for label, group in _by_setting(rows, table).items()
    }


def curve_ends(
    curves: Mapping[str, Sequence[float]], spreads: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """How far each curve of :func:`sweep_curves` still rose at its end: the last value, the
    gain of the last epoch, and that gain as a share of the rise since the first epoch (near
    0: flat, a plateau; 1 / (epochs - 1) or above: still climbing as fast as on average).

    With ``spreads`` (:func:`sweep_spreads`), also the seed spread of the last value and
    whether the curve has levelled off: its last epoch added less than that spread, so another
    epoch at that pace would move the setting by less than its seeds already differ."""
    out = []
    for label, curve in curves.items():
        first, last = curve[0], curve[-1]
        gain = last - curve[-2] if len(curve) > 1 else float("nan")
        rise = last - first
        row: dict[str, Any] = {
            "setting": label,
            "epochs": len(curve),
            "last": last,
            "last-epoch gain": gain,
            "share of the rise": gain / rise if rise > 0 else float("nan"),
        }
        if spreads is not None:
            row["seed std at the end"] = spreads[label]
            row["levelled off"] = bool(gain < spreads[label])
        out.append(row)
    return pd.DataFrame(out).set_index("setting")


# ------------------------------------------------------------------------------- baselines


def dtw_baseline(
    segments: WordSegments, tokens: int, seed: int = 0, distance: str = "cosine"
) -> dict[str, Any]:
    """MFCC + DTW same-different AP over all pairs of a seeded subset of ``tokens`` tokens.

    Kamper et al.'s baseline (the paper's Table 3, first row): DTW over the MFCC + Δ + ΔΔ frames
    with a frame-level cosine (here angular, chapter 03's ``"cosine"``) distance, normalised by
    the path length. Returns ``{"ap", "indices", "num_pairs"}``; ``indices`` lets a model be
    scored on the same subset (:func:`acoustic_ap_on`).
    """
    rng = np.random.default_rng(seed)
    n = min(tokens, len(segments))
    indices = np.sort(rng.choice(len(segments), size=n, replace=False))
    feats = [segments.feats[i] for i in indices]
    labels = [segments.words[k] for k in indices]
    ap, num_pairs = _dtw_ap(feats, labels, distance)
    return {"ap": ap, "indices": indices, "num_pairs": num_pairs}


def _dtw_ap(
    feats: Sequence[np.ndarray], labels: Sequence[str], distance: str = "cosine"
) -> tuple[float, int]:
    """Same-different AP of path-normalised DTW over all pairs of ``feats``, and the pairs."""
    n = len(feats)
    offsets = np.concatenate([[0], np.cumsum([f.shape[0] for f in feats])])
    i, j = np.triu_indices(n, k=1)
    dist = pairwise_dtw(np.concatenate(feats), offsets, np.stack([i, j], 1), distance=distance)
    words = np.asarray(labels)
    return float(pairs_average_precision(dist, words[i] == words[j])), int(i.size)


def dtw_table_ap(
    segments: str | os.PathLike[str],
    tokens: int | None = None,
    seed: int = 0,
    feature_dim: int = 39,
) -> dict[str, Any]:
    """The MFCC + DTW baseline of :func:`dtw_baseline` on the rows of a segments table (no
    lexicon, no model): the features ``awe train`` and ``awe embed`` read
    (:func:`segment_features`), all pairs of every row, or of a seeded subset of ``tokens``
    rows. ``awe ap`` of the embeddings of the same table is the number to set beside it.
    Returns ``{"ap", "tokens", "num_pairs", "positives"}``."""
    rows = read_segments(segments)
    n = len(rows) if tokens is None else min(tokens, len(rows))
    if n < 2:
        raise ValueError(f"{segments}: the baseline needs at least 2 segments, got {n}")
    chosen = list(rows)
    if n < len(rows):
        picked = np.random.default_rng(seed).choice(len(rows), size=n, replace=False)
        chosen = [rows[k] for k in np.sort(picked)]
    labels = [r.word for r in chosen]
    positives = sum(c * (c - 1) // 2 for c in Counter(labels).values())
    if positives == 0:
        raise ValueError(
            f"{segments}: no word occurs twice among the {n} segments, so there is no "
            "same-word pair to rank"
        )
    ap, num_pairs = _dtw_ap(segment_features(chosen, feature_dim), labels)
    return {"ap": ap, "tokens": n, "num_pairs": num_pairs, "positives": positives}


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


def projection(
    model: MultiViewAWE, segments: WordSegments, num_words: int = 8, batch_size: int = 512
) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """Both views of the ``num_words`` most frequent words of ``segments`` in one 2-D PCA:
    ``(token xy, token words, written-word xy, written words)``, the arguments of
    :func:`audiorepro.plotting.two_view_projection`."""
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    counts = pd.Series(segments.words).value_counts()
    shown = sorted(counts.index[:num_words])
    tok = [i for i, w in enumerate(segments.words) if w in shown]
    xy_tok, xy_word = project_2d(emb_x[tok], emb_c[[words.index(w) for w in shown]])
    return xy_tok, [segments.words[i] for i in tok], xy_word, shown


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


def nearest_word_table(
    model: MultiViewAWE,
    data: Mapping[str, WordSegments],
    *,
    seed: int = 0,
    split: str = "test",
    per_group: int = 4,
    batch_size: int = 512,
) -> pd.DataFrame:
    """The three nearest written words of ``per_group`` random ``split`` tokens of words seen in
    training and of up to ``per_group`` tokens of unseen words, with a "seen in train" column."""
    segments = data[split]
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    train_types = set(data["train"].words)
    rng = np.random.default_rng(seed)
    seen = [i for i, w in enumerate(segments.words) if w in train_types]
    unseen = [i for i, w in enumerate(segments.words) if w not in train_types]
    picked = rng.choice(seen, per_group, replace=False).tolist()
    queries = sorted(picked + unseen[:: max(1, len(unseen) // per_group)][:per_group])
    table = pd.DataFrame(nearest_words(emb_x, segments.words, words, emb_c, queries))
    table["seen in train"] = [segments.words[q] in train_types for q in queries]
    return table


# ------------------------------------------------------------------------------- any speech

RUN_FILE = "run.json"


def lexicon_ids(
    rows: Sequence[Segment], lexicon: str = "cmudict"
) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """Pronunciations of the words of ``rows`` and the phone ids: ``({word: phones},
    {phone: id >= 1})``.

    ``lexicon``: ``"cmudict"`` (the bundled CMU dictionary, stress removed; ids of the chapter's
    45-symbol Switchboard-like set), ``"characters"`` (the written view is the word's spelling,
    lower-cased, one symbol per character, as in the first multi-view embeddings, which the
    paper cites: any word of any language, no dictionary) or the path of a
    ``WORD PH1 PH2 ...`` file (ids of its phones, sorted; a file named ``characters`` is given
    as ``./characters``). Words are matched case-insensitively; a word the lexicon lacks is an
    error naming the first table line that has it.
    """
    words = sorted({r.word.lower() for r in rows})
    if lexicon == "cmudict":
        found = cmudict_lexicon(words)
        phone_ids = {p: i + 1 for i, p in enumerate(SWITCHBOARD_SYMBOLS)}
    elif lexicon == "characters":
        found = {w: tuple(w) for w in words}
        phone_ids = {c: i + 1 for i, c in enumerate(sorted({c for w in words for c in w}))}
    else:
        entries = read_lexicon(lexicon)
        found = {w: entries[w] for w in words if w in entries}
        phone_ids = {p: i + 1 for i, p in enumerate(sorted({p for w in found for p in found[w]}))}
    for r in rows:
        if r.word.lower() not in found:
            raise RecordingsError(
                r.source,
                r.line,
                f"word: {r.word!r} is not in the lexicon {lexicon!r} (add it to a lexicon file, "
                "or spell every word: --lexicon characters)",
            )
    return found, phone_ids


def segment_features(rows: Sequence[Segment], feature_dim: int = 39) -> list[np.ndarray]:
    """MFCC + Δ + ΔΔ frames (T, feature_dim) float32 of each row: 13 MFCCs with CMVN over the
    row's whole audio file (16 kHz, 10 ms frames), cut to ``[start, end)`` (the chapter's word
    corpus does the same over a side)."""
    by_file: dict[Path, np.ndarray] = {}
    out = []
    for r in rows:
        if r.path not in by_file:
            wav, _ = load_audio(r.path, SAMPLE_RATE)
            by_file[r.path] = mfcc_features(wav, SAMPLE_RATE, feature_dim, cmvn=True)
        feats = by_file[r.path]
        if r.start is not None:
            feats = feats[int(round(r.start * 100)) : int(round(r.end * 100))]
        if feats.shape[0] == 0:
            raise RecordingsError(r.source, r.line, "start/end: the segment holds no frame")
        out.append(np.ascontiguousarray(feats, dtype=np.float32))
    return out


def segments_data(
    rows: Sequence[Segment],
    pronunciations: Mapping[str, Sequence[str]],
    phone_ids: Mapping[str, int],
    *,
    split: str,
    feature_dim: int = 39,
    min_frames: int = 2,
) -> WordSegments:
    """The rows of a segments table as the chapter's :class:`~audiorepro.data.awe.WordSegments`
    (features by :func:`segment_features`; rows shorter than ``min_frames`` are dropped and
    counted)."""
    feats = segment_features(rows, feature_dim)
    keep = [i for i, f in enumerate(feats) if f.shape[0] >= min_frames]
    if not keep:
        raise ValueError(f"{split}: every segment is shorter than {min_frames} frames")
    words = [rows[i].word for i in keep]
    word_phones = {
        w: np.asarray([phone_ids[p] for p in pronunciations[w.lower()]], dtype=np.int64)
        for w in sorted(set(words))
    }
    return WordSegments(
        split=split,
        keys=[f"{rows[i].where}" for i in keep],
        words=words,
        speakers=[rows[i].speaker for i in keep],
        feats=[feats[i] for i in keep],
        phones=[word_phones[w] for w in words],
        word_phones=word_phones,
        num_phones=max(phone_ids.values()),
        dropped={"short": len(rows) - len(keep), "out_of_vocabulary": 0},
    )


def corpus_segments_table(
    config: Config, segments: WordSegments, path: str | os.PathLike[str]
) -> Path:
    """Write a split of the chapter's generated word corpus as a segments table, the input of
    the ``audiorepro awe`` commands: one row per token, ``path`` the absolute path of its
    conversation side's wav (``<corpus>/audio/<side>.wav``), ``start``/``end`` its frames in
    seconds. Read back with :func:`~audiorepro.data.recordings.read_segments` and
    :func:`segments_data`, the tokens have the frames of ``segments`` (the side's features are
    computed the same way, CMVN over the whole side).

    Raises:
        FileNotFoundError: the corpus has no ``audio/`` folder (the real Switchboard word
            lists come as features only).
    """
    from audiorepro.data.embedded.word_corpus import AUDIO_DIR
    from audiorepro.data.recipes.switchboard import parse_key

    audio = corpus_root(config).resolve() / AUDIO_DIR
    if not audio.is_dir():
        raise FileNotFoundError(f"{audio}: the corpus has no audio to cut segments from")
    lines = ["\t".join(SEGMENT_COLUMNS)]
    for key, speaker in zip(segments.keys, segments.speakers, strict=True):
        k = parse_key(key)
        times = [f"{frame / 100:.2f}" for frame in (k.start, k.end)]  # 10 ms frames
        lines.append("\t".join([str(audio / f"{k.side}.wav"), k.word, speaker, *times]))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def corpus_vocab(config: Config) -> WordVocab:
    """The ``vocab.json`` of the chapter's corpus: word and phone ids, pronunciations."""
    return load_vocab(corpus_root(config) / "vocab.json")


def compare_segments(a: WordSegments, b: WordSegments) -> dict[str, Any]:
    """How far two loadings of the same tokens agree: token count, whether words, speakers,
    phone sequences and frame counts are equal token by token, and the largest absolute
    difference of their features (``nan`` when the frame counts differ)."""
    same_frames = len(a) == len(b) and all(
        x.shape == y.shape for x, y in zip(a.feats, b.feats, strict=True)
    )
    return {
        "tokens": (len(a), len(b)),
        "same_words": a.words == b.words,
        "same_speakers": a.speakers == b.speakers,
        "same_phones": len(a) == len(b)
        and all(np.array_equal(x, y) for x, y in zip(a.phones, b.phones, strict=True)),
        "same_frame_counts": same_frames,
        "max_abs_feature_diff": max(
            (float(np.abs(x - y).max()) for x, y in zip(a.feats, b.feats, strict=True)),
            default=0.0,
        )
        if same_frames
        else float("nan"),
    }


def hold_out(
    rows: Sequence[Segment], fraction: float, seed: int
) -> tuple[list[Segment], list[Segment]]:
    """``(train, dev)``: about ``fraction`` of the rows (at least 2) held out in pairs of one
    word, from words with at least 4 rows (so that both sides keep pairs), seeded."""
    order = np.random.default_rng(seed).permutation(len(rows)).tolist()
    by_word: dict[str, list[int]] = {}
    for i in order:
        by_word.setdefault(rows[i].word, []).append(i)
    want = max(2, int(round(fraction * len(rows))))
    held: list[int] = []
    words = [w for w in sorted(by_word, key=lambda w: -len(by_word[w])) if len(by_word[w]) >= 4]
    while len(held) < want and words:
        for w in list(words):
            held += by_word[w][:2]
            by_word[w] = by_word[w][2:]
            if len(by_word[w]) < 4:
                words.remove(w)
            if len(held) >= want:
                break
    if not held:
        where = rows[0].source if rows else "segments"
        raise RecordingsError(
            where, None, "no word has 4 segments to hold 2 out for development: give --dev"
        )
    chosen = set(held)
    return (
        [r for i, r in enumerate(rows) if i not in chosen],
        [r for i, r in enumerate(rows) if i in chosen],
    )


def train_on_segments(
    segments: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    lexicon: str = "cmudict",
    dev: str | os.PathLike[str] | None = None,
    dev_fraction: float = 0.1,
    preset: str = "embedded",
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
) -> AWERun:
    """Train the chapter's multi-view model on the words of a segments table, into ``out``.

    The development rows (the plateau schedule's cross-view AP) are the table ``dev``, or else
    about ``dev_fraction`` of the rows held out of training (:func:`hold_out`). ``preset`` and
    ``overrides`` as :func:`load_config`; an override of a field outside
    :data:`SEGMENTS_FIELDS` is a ``ConfigError``. Writes ``out/model.safetensors`` (the best dev
    epoch's weights), ``out/final.safetensors`` (the last epoch's) and ``out/run.json``; ``select``
    picks the weights :func:`load_run` (``awe embed``) uses.
    """
    config = load_config(preset, overrides)  # unknown keys first: "did you mean ..."
    refuse_unused(overrides, SEGMENTS_FIELDS, "awe train", "--segments")
    rows = read_segments(segments)
    if dev is not None:
        train_rows, dev_rows = rows, read_segments(dev)
    else:
        train_rows, dev_rows = hold_out(rows, dev_fraction, config.seed)
    if len({r.word for r in dev_rows}) == len(dev_rows):
        raise RecordingsError(
            dev if dev is not None else segments,
            None,
            "the development rows need a word spoken at least twice (same-different AP)",
        )
    pronunciations, phone_ids = lexicon_ids(train_rows + dev_rows, lexicon)
    data = {
        split: segments_data(
            split_rows,
            pronunciations,
            phone_ids,
            split=split,
            feature_dim=config.model.feature_dim,
            min_frames=config.min_frames,
        )
        for split, split_rows in (("train", train_rows), ("dev", dev_rows))
    }
    _set_threads(config)
    model, result, schedule, final = _fit(config, data, progress)
    best_dev = float(schedule.best) if schedule.best is not None else float("nan")
    resolved = model_config(config, data)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_model_weights(model, out / SELECTED_WEIGHTS["best"])
    final_model = MultiViewAWE(resolved)
    final_model.load_state_dict(final)
    save_model_weights(final_model, out / SELECTED_WEIGHTS["final"])
    kept = kept_epoch(result, schedule.history, config.select)
    write_json(
        out / RUN_FILE,
        {
            "kind": "awe",
            "preset": preset,
            "config": to_dict(config),
            "model": to_dict(resolved),
            "lexicon": str(lexicon),
            "phones_to_ids": phone_ids,
            "pronunciations": {w: list(p) for w, p in pronunciations.items()},
            "best_dev": best_dev,
            "kept_epoch": kept,
            "history": result.to_dict(),
            "schedule": [list(h) for h in schedule.history],
        },
    )
    if config.select == "final":
        model.load_state_dict(final)
    return AWERun(
        model=model.eval(),
        history=result,
        schedule_events=list(schedule.history),
        best_dev=best_dev,
        seed=config.seed,
        model_config=resolved,
        path=out,
        selected=config.select,
        kept_epoch=kept,
    )


SEGMENTS_FIELDS = (
    "model", "train", "seed", "select", "margin", "loss_k", "distance", "min_frames",
    "eval_batch_size",
)  # fmt: skip
"""The configuration fields that shape a :func:`train_on_segments` run; ``--set`` of any other
(the chapter's sweeps, seed lists and baseline size, the corpus) is refused, never ignored."""


def kept_epoch(result: TrainResult, events: Sequence[tuple[int, str]], select: str) -> int:
    """The epoch (1-based) whose weights a run keeps: the last one the plateau schedule called
    ``best`` (``select: best``), or the last one trained (``final``)."""
    best = [step for step, event in events if event == "best"]
    if select == "final" or not best:
        return int(result.final_epoch)
    return int(result.epochs[result.steps.index(best[-1])]) + 1


def load_run(run: str | os.PathLike[str]) -> tuple[MultiViewAWE, Config]:
    """The model (eval mode, CPU) and configuration that :func:`train_on_segments` wrote."""
    run = Path(run)
    info_path = run / RUN_FILE
    info = read_run_info(run, RUN_FILE, "awe", "an AWE run", "awe train")
    config = from_dict(Config, info["config"], source=str(info_path))
    model = MultiViewAWE(from_dict(AWEModelConfig, info["model"], source=str(info_path)))
    load_model_weights(model, run / SELECTED_WEIGHTS[config.select])
    return model.eval(), config


def embed_table(
    run: str | os.PathLike[str], segments: str | os.PathLike[str]
) -> dict[str, np.ndarray]:
    """Acoustic embeddings of every row of a segments table (no lexicon needed):
    ``{"embeddings": (N, D) float32, "labels": (N,) words, "speakers": (N,)}``."""
    model, config = load_run(run)
    rows = read_segments(segments)
    feats = segment_features(rows, config.model.feature_dim)
    view = WordSegments(
        split="embed",
        keys=[r.where for r in rows],
        words=[r.word for r in rows],
        speakers=[r.speaker for r in rows],
        feats=feats,
        phones=[],
        word_phones={},
        num_phones=0,
        dropped={},
    )
    _set_threads(config)
    emb = embed_segments(model, view, config.eval_batch_size)
    return {
        "embeddings": emb,
        "labels": np.asarray([r.word for r in rows]),
        "speakers": np.asarray([r.speaker for r in rows]),
    }


def embeddings_ap(path: str | os.PathLike[str]) -> float:
    """Same-different AP (cosine) of an ``.npz`` with ``embeddings`` (N, D) and ``labels`` (N,)
    arrays, as :func:`embed_table` writes; a missing file or array is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such embeddings file")
    with np.load(path, allow_pickle=False) as archive:
        for name in ("embeddings", "labels"):
            if name not in archive.files:
                raise KeyError(f"{path}: no array {name!r} (has {', '.join(archive.files)})")
        emb, labels = archive["embeddings"], archive["labels"]
    return float(same_different_ap(emb, labels))


# ------------------------------------------------------------------------------- the paper

PAPER: dict[str, dict[Any, float]] = {
    # Table 1: dev cross-view AP after 15 epochs, by phoneme-encoder depth N and pooling.
    "Table 1": {
        (1, "avg"): 0.272,
        (1, "rep"): 0.030,
        (4, "avg"): 0.298,
        (4, "rep"): 0.247,
        (8, "avg"): 0.000,
        (8, "rep"): 0.000,
    },
    # Table 2: dev acoustic AP after 15 epochs, N = 4, Avg, by number of heads h.
    "Table 2": {1: 0.373, 4: 0.425, 8: 0.429, 16: 0.447, 32: 0.413},
    # Table 3: test acoustic (same-different) AP.
    "Table 3": {"mfcc-dtw": 0.214, "chosen": 0.708},
    # Table 4: test cross-view AP.
    "Table 4": {"chosen": 0.551},
}
"""The paper's numbers (Rhodes & Bains), by table: Table 1 cross-view AP by ``(N, pooling)``,
Table 2 acoustic AP by heads, Table 3 acoustic AP and Table 4 cross-view AP by model."""

PAPER_BEST_HEADS = 16
"""Table 2's best number of heads (and the chosen model's)."""


def _t1(n: int, pooling: str) -> dict[str, Any]:
    return {"table": "1", "N": n, "pooling": pooling}


_Ours = Callable[[str, Mapping[str, Any]], list[float]]
"""Our per-seed values of a metric for a setting's ledger tags."""
_Says = Callable[..., str]
"""The verdict sentence on a claim, from :func:`audiorepro.reporting.finding`."""


def _table1_rows(
    config: Config, ours: _Ours, says: _Says, floors: Mapping[str, float]
) -> list[PaperRow]:
    """Table 1's paper-vs-ours rows: on each Rep row, Avg beats Rep at that depth; on each
    Avg row but the middle one, the middle depth beats it; on the deepest rows, that depth
    fails (at or below the floor). A failing run is part of these claims, so only a
    comparison of two failing runs is inconclusive for want of learning."""
    metric, floor = "crossview_ap", floors.get("crossview_ap")
    depths = list(config.sweep_layers)
    middle, deepest = depths[len(depths) // 2], depths[-1]
    rows = []
    for n in depths:
        for p in ("avg", "rep"):
            texts = []
            if p == "rep":
                claim = f"Avg beats Rep at N = {n}"
                texts.append(says(claim, metric, _t1(n, "avg"), _t1(n, p), **_floor(floor)))
            elif n != middle:
                claim = f"N = {middle} beats N = {n} (Avg)"
                texts.append(says(claim, metric, _t1(middle, p), _t1(n, p), **_floor(floor)))
            if n == deepest and len(depths) > 1 and floor is not None:
                claim = f"N = {n} fails ({p.capitalize()})"
                found = reporting.fails(
                    claim, ours(metric, _t1(n, p)), floor, metric=metric, digits=3
                )
                texts.append(found.sentence)
            rows.append(
                PaperRow(
                    f"Table 1 cross-view AP, N = {n} {p.capitalize()}",
                    metric,
                    PAPER["Table 1"].get((n, p)),
                    CHAPTER,
                    _t1(n, p),
                    digits=3,
                    finding=" ".join(texts),
                    source="Table 1",
                )
            )
    return rows


def _floor(floor: float | None) -> dict[str, Any]:
    """The keywords of a Table 1 comparison: the floor, and that one failing run may be the
    paper's point."""
    return {} if floor is None else {"must_beat": floor, "both_must_learn": False}


def _table2_rows(
    config: Config, ours: _Ours, says: _Says, floors: Mapping[str, float]
) -> list[PaperRow]:
    """Table 2's rows: on each head count but the paper's best, h = 16 beats it; on the best
    row, which head count has the highest mean here."""
    best_h, floor = PAPER_BEST_HEADS, floors.get("acoustic_ap")
    means = {
        h: float(np.mean(v))
        for h in config.sweep_heads
        if (v := ours("acoustic_ap", {"table": "2", "h": h}))
    }
    rows = []
    for h in config.sweep_heads:
        text = ""
        if h != best_h and best_h in config.sweep_heads:
            text = says(
                f"h = {best_h} beats h = {h}",
                "acoustic_ap",
                {"table": "2", "h": best_h},
                {"table": "2", "h": h},
                must_beat=floor,
            )
        elif h == best_h and means:
            top = max(means, key=means.get)
            text = f"Highest mean acoustic AP here: h = {top} ({means[top]:.3f})."
        rows.append(
            PaperRow(
                f"Table 2 acoustic AP, h = {h}",
                "acoustic_ap",
                PAPER["Table 2"].get(h),
                CHAPTER,
                {"table": "2", "h": h},
                digits=3,
                finding=text,
                source="Table 2",
            )
        )
    return rows


def findings(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    *,
    chance: Mapping[str, float] | None = None,
    on_dtw_pairs: Sequence[float] | None = None,
) -> pd.DataFrame:
    """The paper-vs-ours table of chapter 04, every value and finding from ledger ``records``.

    Findings (each by :func:`audiorepro.reporting.finding` over the seeds, so a claim
    reproduces or contradicts only beyond the seed spread): Avg beats Rep at every depth; the
    middle depth beats the others (Avg); the deepest one fails to learn
    (:func:`audiorepro.reporting.fails`; both poolings collapse in the paper); h = 16 beats
    the other head counts; the transformer beats MFCC + DTW (on the baseline's own pairs when
    ``on_dtw_pairs``, the chosen models' acoustic AP on that subset, is given; DTW has no
    seed, so one value suffices there); acoustic AP exceeds cross-view AP.

    ``chance`` (:func:`chance_levels` of the scored split) sets the floor a run must beat to
    count as having learned, :data:`FLOOR_FACTOR` times chance: a Table 2 comparison with a
    run below it is inconclusive; in Table 1, where a failing encoder is the paper's claim,
    only a comparison of two runs below it is, and the floor is what "fails" means. Without
    ``chance`` there is no floor and no "fails" finding. Only the records of ``config`` and
    its seeds count (:func:`current`), so a row of an older preset or another setting never
    shows.
    """
    records = current(records, config)
    floors = {m: FLOOR_FACTOR * v for m, v in (chance or {}).items()}

    def ours(metric: str, tags: Mapping[str, Any]) -> list[float]:
        return reporting.values(records, chapter=CHAPTER, preset=preset, metric=metric, tags=tags)

    def says(claim: str, metric: str, better: Any, worse: Any, **kw: Any) -> str:
        better = ours(metric, better) if isinstance(better, Mapping) else better
        return reporting.finding(
            claim, better, ours(metric, worse), metric=metric, digits=3, **kw
        ).sentence

    rows = _table1_rows(config, ours, says, floors)
    rows += _table2_rows(config, ours, says, floors)
    chosen, dtw = {"model": "chosen"}, {"model": "mfcc-dtw"}
    pairs = "on the same pairs" if on_dtw_pairs is not None else "(whole test set)"
    beats_dtw = says(
        f"the transformer beats MFCC + DTW {pairs}",
        "acoustic_ap",
        list(on_dtw_pairs) if on_dtw_pairs is not None else chosen,
        dtw,
        min_seeds=1,
    )
    below = reporting.finding(
        "acoustic AP exceeds cross-view AP",
        ours("acoustic_ap", chosen),
        ours("crossview_ap", chosen),
        digits=3,
    ).sentence
    rows += [
        PaperRow(
            "Table 3 MFCC + DTW acoustic AP",
            "acoustic_ap",
            PAPER["Table 3"]["mfcc-dtw"],
            CHAPTER,
            dtw,
            digits=3,
            finding=beats_dtw,
            source="Table 3",
        ),
        PaperRow(
            "Table 3 transformer acoustic AP",
            "acoustic_ap",
            PAPER["Table 3"]["chosen"],
            CHAPTER,
            chosen,
            digits=3,
            finding="mean ± std over seeds",
            source="Table 3",
        ),
        PaperRow(
            "Table 4 transformer cross-view AP",
            "crossview_ap",
            PAPER["Table 4"]["chosen"],
            CHAPTER,
            chosen,
            digits=3,
            finding=below,
            source="Table 4",
        ),
    ]
    return reporting.paper_vs_ours(rows, preset=preset, records=records)


__all__ = [
    "CHAPTER",
    "PAPER",
    "PRESETS",
    "AWERun",
    "Config",
    "FLOOR_FACTOR",
    "acoustic_ap_on",
    "anchor_check",
    "chance_levels",
    "chapter_configs",
    "corpus_pronunciation_variation",
    "corpus_root",
    "curve_ends",
    "current",
    "data_digest",
    "dtw_baseline",
    "dtw_table_ap",
    "embed_segments",
    "embed_table",
    "embed_words",
    "embeddings_ap",
    "evaluate",
    "findings",
    "load_config",
    "lexicon_ids",
    "load_data",
    "load_run",
    "model_config",
    "nearest_word_table",
    "nearest_words",
    "num_parameters",
    "num_phone_ids",
    "project_2d",
    "projection",
    "pronunciation_variation",
    "record_sweep",
    "run_config",
    "seed_configs",
    "segment_features",
    "segments_data",
    "corpus_segments_table",
    "corpus_vocab",
    "read_segments",
    "compare_segments",
    "setting_label",
    "sign_stats",
    "squared_config",
    "sweep",
    "sweep_curves",
    "sweep_spreads",
    "sweep_table",
    "sweep_tags",
    "sweeps",
    "table1_configs",
    "table2_configs",
    "train",
    "train_ahead",
    "train_on_segments",
    "written_word_geometry",
]
