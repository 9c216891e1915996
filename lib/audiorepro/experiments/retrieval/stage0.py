"""Stage 0 at the embedded scale: sound-event tagging of the scene generator's events, the
analogue of the AudioSet pretraining the papers' audio encoders start from (paper (a) §2.2,
paper (b) §4.2), saved in the released checkpoint's layout for ``audio_pretrained: stage0``."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from audiorepro.config import ConfigError, replace, to_dict
from audiorepro.data.retrieval import CaptionItem, caption_items, log_mel_features
from audiorepro.experiments.retrieval.config import Stage0
from audiorepro.metrics.tagging import chance_map, tagging_map
from audiorepro.models.audio_encoders import (
    FRAMES_PER_SECOND,
    AudioEncoderConfig,
    build_audio_encoder,
    resolve_audio_pretrained,
    save_released_layout,
)
from audiorepro.repro import seed_everything, torch_threads
from audiorepro.storage import Run, RunStore, known_file_sha256, read_json, write_json
from audiorepro.training.callbacks import EpochSetter
from audiorepro.training.loop import TrainConfig, Trainer

CHECKPOINT_STEPS = 100
"""Most optimizer steps between two checkpoints of a stage-0 run (it resumes after a kill)."""

STAGE0 = "stage0"
"""The ``audio_pretrained`` value that names this module's tagging run."""


@dataclasses.dataclass(frozen=True)
class TaggingClip:
    """One clip of a tagging split: its retrieval key, its events as (class index, start s,
    end s), and its duration (s)."""

    key: str
    events: tuple[tuple[int, float, float], ...]
    duration: float

    def labels(self, start_s: float, end_s: float, num_classes: int) -> np.ndarray:
        """Multi-hot (C,) of the events that sound inside [start_s, end_s)."""
        y = np.zeros(num_classes, dtype=np.float32)
        for c, a, b in self.events:
            if a < end_s and b > start_s:
                y[c] = 1.0
        return y


def scene_clips(
    corpora_root: str | Path, split: str
) -> tuple[list[CaptionItem], dict[str, dict[str, Any]]]:
    """The Clotho-layout clips of ``split`` (one caption item per clip) and each one's scene
    (``embedded_scenes_{split}.jsonl``), keyed by the item's :attr:`CaptionItem.key`.

    Raises:
        ConfigError: the corpus has no scene file (only the embedded corpora write one; the
            real corpora use the released AudioSet checkpoints, ``audio_pretrained: audioset``).
    """
    path = Path(corpora_root) / "clotho" / f"embedded_scenes_{split}.jsonl"
    if not path.is_file():
        raise ConfigError(
            f"audio_pretrained: stage0 needs the embedded corpus' scene labels, and {path} does "
            "not exist; on the real corpora use audio_pretrained: audioset (the released "
            "checkpoints) or a checkpoint path"
        )
    scenes: dict[str, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for line, text in enumerate(f, start=1):
            try:
                row = json.loads(text)
                scenes[row["file_name"]] = row["scene"]
            except (json.JSONDecodeError, KeyError) as err:
                raise ValueError(f"{path}:{line}: not a scene record ({err})") from err
    by_file: dict[str, CaptionItem] = {}
    for item in caption_items(corpora_root, "clotho", [split]):
        by_file.setdefault(Path(item.audio).name, item)
    missing = sorted(set(by_file) - set(scenes))
    if missing:
        raise ValueError(f"{path}: no scene for {len(missing)} clips, e.g. {missing[0]!r}")
    return list(by_file.values()), {item.key: scenes[name] for name, item in by_file.items()}


def _clips(
    items: Sequence[CaptionItem], scenes: Mapping[str, Mapping[str, Any]], classes: Sequence[str]
) -> tuple[list[TaggingClip], int]:
    """The clips with their events as class indices, and how many events had a class outside
    ``classes`` (a held-out class never seen in training: left out, and counted)."""
    index = {c: i for i, c in enumerate(classes)}
    out, unknown = [], 0
    for item in items:
        scene = scenes[item.key]
        spans = [
            (e["event_class"], e["start"], e["start"] + e["duration"]) for e in scene["events"]
        ]
        if scene.get("background"):
            spans.append((scene["background"]["event_class"], 0.0, scene["duration"]))
        events = tuple((index[c], a, b) for c, a, b in spans if c in index)
        unknown += len(spans) - len(events)
        out.append(TaggingClip(item.key, events, float(scene["duration"])))
    return out, unknown


def _classes(scenes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    names = set()
    for scene in scenes.values():
        names.update(e["event_class"] for e in scene["events"])
        if scene.get("background"):
            names.add(scene["background"]["event_class"])
    return sorted(names)


class _CropEpoch:
    """Sets the epoch of a :class:`_Crops` for :class:`~audiorepro.training.callbacks.EpochSetter`
    (see :meth:`_Crops.epoch_target`)."""

    def __init__(self, crops: _Crops) -> None:
        self.crops = crops

    def set_epoch(self, epoch: int) -> None:
        self.crops.epoch = epoch


class _Crops(torch.utils.data.Dataset):
    """Random crops of ``crop`` frames with the labels of the events sounding in them."""

    def __init__(self, clips, features, crop: int, num_classes: int, seed: int) -> None:
        self.clips, self.features, self.crop = list(clips), features, crop
        self.num_classes, self.seed, self.epoch = num_classes, seed, 0

    def epoch_target(self) -> _CropEpoch:
        """What :class:`~audiorepro.training.callbacks.EpochSetter` tells the epoch, after each
        step. Deliberately not a ``set_epoch`` method: accelerate's DataLoader calls a dataset's
        ``set_epoch`` at the start of every epoch, before it fetches the epoch's first batches,
        and stage 0 has always drawn those with the previous epoch's crops; the book's stage-0
        runs (and every number after them) depend on it."""
        return _CropEpoch(self)

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, index: int) -> dict[str, Any]:
        clip = self.clips[index]
        feats = self.features[clip.key]  # (T, F)
        start = 0
        if feats.shape[0] > self.crop:
            rng = np.random.default_rng([self.seed, self.epoch, index])
            start = int(rng.integers(feats.shape[0] - self.crop + 1))
        window = feats[start : start + self.crop]
        labels = clip.labels(
            start / FRAMES_PER_SECOND, (start + window.shape[0]) / FRAMES_PER_SECOND,
            self.num_classes,
        )  # fmt: skip
        return {"feats": window, "labels": torch.from_numpy(labels)}


class Tagger(nn.Module):
    """An audio encoder with a linear classifier where its released checkpoint has one: on
    PaSST's normalised tokens (``head.0``), PANNs' ``fc1``, ATST-Frame's features, and in place
    of MobileNet's final class projection (``classifier.5``)."""

    def __init__(self, encoder: nn.Module, family: str, num_features: int, num_classes: int,
                 pad: float) -> None:  # fmt: skip
        super().__init__()
        self.encoder, self.family, self.pad_value = encoder, family, pad
        body = getattr(encoder, "encoder", encoder)  # a CNN inside MelBinPool
        if family == "mobilenet":
            last = body.classifier[5]
            body.classifier[5] = nn.Linear(last.in_features, num_classes)
            self.head = None
        else:
            self.head = nn.Linear(num_features, num_classes)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, T, F) log-mel → (B, C) logits."""
        first, features = self.encoder(feats.transpose(1, 2)[:, None])
        if self.head is None:  # MobileNet: its own classifier, last layer replaced
            return first
        return self.head(features if self.family == "atst" else first)


def _collate(pad: float):
    def collate(examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        longest = max(e["feats"].shape[0] for e in examples)
        bins = examples[0]["feats"].shape[1]
        feats = torch.full((len(examples), longest, bins), pad)
        for i, e in enumerate(examples):
            feats[i, : e["feats"].shape[0]] = e["feats"].float()
        return {"feats": feats, "labels": torch.stack([e["labels"] for e in examples])}

    return collate


def _loss(model: Tagger, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.binary_cross_entropy_with_logits(model(batch["feats"]), batch["labels"])


@torch.no_grad()
def _heldout_scores(model: Tagger, clips, features, crop: int, num_classes: int):
    """Scores and labels of the first ``crop`` frames of every held-out clip."""
    model.eval()
    scores, labels = [], []
    collate = _collate(model.pad_value)
    for start in range(0, len(clips), 64):
        part = clips[start : start + 64]
        batch = collate([
            {"feats": features[c.key][:crop], "labels": torch.zeros(num_classes)} for c in part
        ])  # fmt: skip
        scores.append(model(batch["feats"]).float())
        labels += [c.labels(0.0, min(crop, features[c.key].shape[0]) / FRAMES_PER_SECOND, num_classes)
                   for c in part]  # fmt: skip
    return torch.cat(scores).numpy(), np.stack(labels)


def _front_end_pad(model_cfg: AudioEncoderConfig) -> float:
    from audiorepro.models.dual_encoder import SILENCE_LOG_MEL

    if model_cfg.front_end == "atst":
        from audiorepro.models.atst import ATST_SILENCE

        return ATST_SILENCE
    return SILENCE_LOG_MEL


def encoder_fields(model_cfg: AudioEncoderConfig, stage0: Stage0) -> AudioEncoderConfig:
    """The tagging run's encoder: the audio-encoder part of ``model_cfg`` (a dual-encoder
    config has text fields too) without ``audio_pretrained``, with a time encoding of the
    stage-0 crop. Like a released PaSST checkpoint, one tagging run then serves every snippet
    length up to the crop (a shorter model keeps the first time positions on loading)."""
    names = {f.name for f in dataclasses.fields(AudioEncoderConfig)}
    values = {k: v for k, v in to_dict(model_cfg).items() if k in names}
    values["snippet_s"] = stage0.crop_s
    if "audio_pretrained" in values:
        values["audio_pretrained"] = None
    return AudioEncoderConfig(**values)


def stage0_checkpoint(
    model_cfg: AudioEncoderConfig,
    corpora_root: str | Path,
    stage0: Stage0,
    *,
    run_store: RunStore,
    corpus: Mapping[str, Any],
    features: Mapping[str, torch.Tensor] | None = None,
    progress: str = "lines",
    callbacks: Sequence[Any] = (),
) -> Path:
    """The released-layout checkpoint of the stage-0 tagging run of ``model_cfg``'s encoder,
    trained now unless ``run_store`` holds it. ``features`` may hold the training split's
    log-mel (in the encoder's front end) to avoid computing it again.

    The papers' audio encoders (PaSST, CNN14, ATST-Frame, MobileNetV3) start from checkpoints
    trained to tag AudioSet's 527 sound-event classes. Those files cannot be loaded offline and
    would not fit the book's tiny encoders anyway, so the embedded presets train the same kind
    of model on what the scene generator knows: each Clotho-layout clip's foreground events and
    background bed, with their times (``clotho/embedded_scenes_{split}.jsonl``). The encoder
    with a linear classifier trains on the ``development`` clips (multi-label binary
    cross-entropy on random crops, labelled with the events that sound in the crop), is scored
    by held-out tagging mAP on the ``validation`` clips, and its weights are written in the
    released checkpoint's file layout of the encoder's family
    (:func:`audiorepro.models.audio_encoders.save_released_layout`). The retrieval models then
    load it through the same ``audio_pretrained`` field that loads the released AudioSet files
    at the ``paper`` scale; :func:`resolve_stage0` turns the preset's ``audio_pretrained:
    stage0`` into that file's path.

    Neither split holds a clip of the retrieval evaluation split, so stage 0 never sees the
    audio the retrieval metrics are computed on. A caveat the chapters state: the embedded
    captions are written from the same event classes that stage 0 learns to tag, so the help it
    gives retrieval overstates what AudioSet gives on real captions.

    The run checkpoints once per epoch (at most every :data:`CHECKPOINT_STEPS` steps) into
    the store's staging folder of its configuration; called again after a kill, it continues
    from the last checkpoint and ends with the weights of an uninterrupted run. ``callbacks``
    are further Trainer callbacks (progress hooks, tests)."""
    encoder_cfg = encoder_fields(model_cfg, stage0)
    run = stage0_entry(model_cfg, stage0, run_store=run_store, corpus=corpus)
    if not run.complete:
        staging = run_store.staging(run)
        run_store.publish(
            run,
            lambda folder: _train_stage0(
                encoder_cfg, corpora_root, stage0, folder, features, progress,
                staging=staging, callbacks=callbacks,
            ),
        )  # fmt: skip
    return Path(run.path) / read_json(run.file("tagging.json"))["checkpoint"]


def stage0_entry(
    model_cfg: AudioEncoderConfig, stage0: Stage0, *, run_store: RunStore,
    corpus: Mapping[str, Any],
) -> Run:  # fmt: skip
    """The run-store entry of the stage-0 run of ``model_cfg``'s encoder (complete or not):
    whether :func:`stage0_checkpoint` would train."""
    encoder_cfg = encoder_fields(model_cfg, stage0)
    spec = {"encoder": to_dict(encoder_cfg), "stage0": to_dict(stage0), "corpus": dict(corpus)}
    return run_store.run(STAGE0, spec)


def _train_stage0(
    encoder_cfg: AudioEncoderConfig,
    corpora_root: str | Path,
    stage0: Stage0,
    folder: Path,
    features: Mapping[str, torch.Tensor] | None,
    progress: str,
    *,
    staging: Path | None = None,
    callbacks: Sequence[Any] = (),
) -> dict[str, Any]:
    train_items, train_scenes = scene_clips(corpora_root, stage0.train_split)
    held_items, held_scenes = scene_clips(corpora_root, stage0.heldout_split)
    classes = _classes(train_scenes)
    train, _ = _clips(train_items, train_scenes, classes)
    held, unknown = _clips(held_items, held_scenes, classes)
    if unknown:
        print(
            f"stage 0: {unknown} held-out events of classes never seen in training are not scored"
        )
    front = encoder_cfg.front_end
    if features is None or any(c.key not in features for c in train):
        features = log_mel_features(train_items, front_end=front)
    held_features = log_mel_features(held_items, front_end=front)
    seed_everything(stage0.seed)
    encoder, num_features, _ = build_audio_encoder(encoder_cfg)
    pad = _front_end_pad(encoder_cfg)
    model = Tagger(encoder, encoder_cfg.audio_encoder, num_features, len(classes), pad)
    crop = int(round(stage0.crop_s * FRAMES_PER_SECOND))
    dataset = _Crops(train, features, crop, len(classes), stage0.seed)
    per_epoch = -(-len(dataset) // stage0.batch_size)
    config = TrainConfig(
        num_epochs=-(-stage0.steps * stage0.batch_size // len(dataset)),
        checkpoint_every=min(per_epoch, CHECKPOINT_STEPS) if staging is not None else 0,
        max_steps=stage0.steps,
        schedule_steps=stage0.steps,
        batch_size=stage0.batch_size,
        lr=stage0.lr,
        weight_decay=0.01,
        warmup_steps=stage0.warmup_steps,
        schedule="cosine",
        seed=stage0.seed,
        device="cpu",
        mixed_precision="no",
        log_every=max(1, stage0.steps // 10),
        find_unused_parameters=True,
    )
    start = time.perf_counter()
    with torch_threads(stage0.torch_threads):
        result = Trainer(
            model, _loss, dataset, config, collate_fn=_collate(pad), out_dir=staging,
            callbacks=[EpochSetter(dataset.epoch_target()), *callbacks], progress=progress,
        ).fit(resume=staging is not None)  # fmt: skip
        seconds = time.perf_counter() - start
        scores, labels = _heldout_scores(model, held, held_features, crop, len(classes))
    mean_ap, per_class = tagging_map(scores, labels)
    body = getattr(model.encoder, "encoder", model.encoder)
    suffix = {"cnn14": ".pth", "cnn10": ".pth", "atst": ".ckpt"}.get(
        encoder_cfg.audio_encoder, ".pt"
    )
    name = save_released_layout(body, encoder_cfg, folder / f"checkpoint{suffix}", model.head)
    report = {
        "checkpoint": Path(name).name,
        "classes": classes,
        "heldout_map": mean_ap,
        "heldout_chance_map": chance_map(labels),
        "per_class_ap": [None if np.isnan(v) else float(v) for v in per_class],
        "train_clips": len(train),
        "heldout_clips": len(held),
        "heldout_events_of_unseen_classes": unknown,
        "steps": stage0.steps,
        "seconds": seconds,
        "steps_per_s": (result.final_step - result.resumed_step) / seconds,
        "history": result.to_dict(),
    }
    write_json(folder / "tagging.json", report)
    return {}


def stage0_report(checkpoint: str | Path) -> dict[str, Any]:
    """What the stage-0 run of ``checkpoint`` measured (``tagging.json`` beside it): held-out
    tagging mAP and its chance level, per-class AP, steps/s and the loss history."""
    return read_json(Path(checkpoint).parent / "tagging.json")


def resolve_stage0(
    model_cfg: AudioEncoderConfig,
    corpora_root: str | Path,
    stage0: Stage0,
    *,
    run_store: RunStore,
    corpus: Mapping[str, Any],
    features: Mapping[str, torch.Tensor] | None = None,
) -> AudioEncoderConfig:
    """``model_cfg`` with ``audio_pretrained: stage0`` replaced by the path of the stage-0
    checkpoint (trained now if needed); any other value is returned unchanged."""
    if model_cfg.audio_pretrained != STAGE0:
        return model_cfg
    path = stage0_checkpoint(
        model_cfg, corpora_root, stage0, run_store=run_store, corpus=corpus, features=features
    )
    return replace(model_cfg, audio_pretrained=str(path))


def pretrained_key(model_cfg: AudioEncoderConfig) -> dict[str, Any]:
    """``to_dict(model_cfg)`` with a checkpoint path replaced by its content hash, so that a run
    store key names the weights a run starts from, not where the file happens to lie."""
    values = to_dict(model_cfg)
    if values.get("audio_pretrained") in (None, STAGE0):
        return values
    path = resolve_audio_pretrained(model_cfg)  # a missing file is an error here
    values["audio_pretrained"] = "sha256:" + known_file_sha256(path)
    return values
