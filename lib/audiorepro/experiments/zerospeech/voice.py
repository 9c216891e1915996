"""What ``audiorepro units voice`` and ``units resynth`` run: a codebook inverter trained for a
units run on one voice's recordings, and any folder spoken again through its units in that
voice (chapter 03's inverter, :mod:`.inverter`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiorepro.config import from_dict, refuse_unused, to_dict
from audiorepro.data.recordings import (
    RecordingsError,
    find_wavs,
    scan_folder,
)
from audiorepro.data.speech_segments import (
    SAMPLE_RATE,
    load_wav_features,
)
from audiorepro.experiments.zerospeech.config import load_config, store
from audiorepro.experiments.zerospeech.data import (
    refuse_short_files,
    training_files,
)
from audiorepro.experiments.zerospeech.evaluate import model_inputs
from audiorepro.experiments.zerospeech.inverter import (
    fit_inverter,
    inverter_config,
    inverter_pairs,
    resynthesize,
)
from audiorepro.experiments.zerospeech.recordings import (
    UnitsRun,
    load_units,
    speakers_of,
)
from audiorepro.features import save_audio, spectral_convergence
from audiorepro.models.inverter import CodebookInverter, InverterConfig
from audiorepro.repro import seed_everything
from audiorepro.storage import (
    load_model_weights,
    read_run_info,
    save_model_weights,
    write_json,
)

VOICE_FILE = "voice.json"


VOICE_FIELDS = ("inverter", "inverter_train", "seed", "griffin_lim_iters")
"""The configuration fields that shape a :func:`train_voice` run; ``--set`` of others is
refused."""


@dataclass
class VoiceRun:
    """A codebook inverter trained for a units run on one voice (``audiorepro units voice``)."""

    units: UnitsRun
    inverter: CodebookInverter
    griffin_lim_iters: int
    history: dict[str, Any]
    path: Path
    pieces: int | None = None
    """Training pairs of ``segment_frames`` code frames the files gave (:func:`inverter_pairs`)."""
    files: int | None = None
    """The files the inverter trained on."""
    left_out: list[tuple[Path, str]] = field(default_factory=list)
    """Files under the voice's folder left out of training, and why (silent, cancelling)."""


def train_voice(
    run: UnitsRun | str | os.PathLike[str],
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
) -> VoiceRun:
    """Train the chapter's codebook inverter (page ``04_inverter``) for the units of ``run`` on
    every audio file under ``audio``, the recordings of the voice that :func:`resynthesize_folder`
    will then speak with: the frozen VQ-VAE encodes each file, and the inverter learns to map
    its codebook vectors to the file's linear magnitudes (10 ms frames).

    ``overrides`` (``{"inverter_train.max_steps": 600}``) change the fields of
    :data:`VOICE_FIELDS` of the units run's preset; others are a ``ConfigError``. Writes
    ``out/inverter.safetensors`` and ``out/voice.json`` (the units run's folder, the
    inverter's configuration, the files, the history)."""
    units = run if isinstance(run, UnitsRun) else load_units(run)
    config = load_config(units.preset, overrides)
    refuse_unused(overrides, VOICE_FIELDS, "units voice", "--audio")
    vqvae = units.model
    # Silent files and files whose channels cancel are left out and named (training_files), as
    # in units train: an inverter trained on silence would learn to say nothing.
    wavs, left_out = training_files(find_wavs(audio))
    if not wavs:
        raise RecordingsError(
            audio, None, f"no file to train on: {scan_folder(audio).note(left_out, used=0)}"
        )
    inputs = load_wav_features(wavs, units.feature, store())
    mags = load_wav_features(wavs, "linear", store())
    # one voice: a model that normalises per speaker reads the folder as one speaker
    voice = {name: "voice" for name in inputs}
    items = inverter_pairs(vqvae, inputs, mags, config.inverter_train.segment_frames, voice)
    if not items:
        raise ValueError(f"{audio}: every file is shorter than one code frame")
    inv_cfg = inverter_config(config.inverter, vqvae, mags)
    seed_everything(config.seed)
    inverter, history = fit_inverter(
        CodebookInverter(inv_cfg), items, config.inverter_train.loop(config.seed), None,
        progress=progress,
    )  # fmt: skip
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_model_weights(inverter, out / "inverter.safetensors")
    write_json(
        out / VOICE_FILE,
        {
            "kind": "voice",
            "units": str(units.path.resolve()),
            "inverter": to_dict(inv_cfg),
            "inverter_train": to_dict(config.inverter_train),
            "seed": config.seed,
            "griffin_lim_iters": config.griffin_lim_iters,
            "audio": str(Path(audio).resolve()),
            "files": len(wavs),
            "left_out": [[str(path), why] for path, why in left_out],
            "pieces": len(items),
            "history": history,
        },
    )
    return VoiceRun(
        units, inverter, config.griffin_lim_iters, history, out, len(items), len(wavs), left_out
    )


def load_voice(path: str | os.PathLike[str]) -> VoiceRun:
    """The :class:`VoiceRun` that :func:`train_voice` wrote to the folder ``path``, with the
    units run it names."""
    path = Path(path)
    info_path = path / VOICE_FILE
    info = read_run_info(path, VOICE_FILE, "voice", "a voice run", "units voice")
    units = load_units(info["units"])
    inverter = CodebookInverter(from_dict(InverterConfig, info["inverter"], source=str(info_path)))
    load_model_weights(inverter, path / "inverter.safetensors")
    return VoiceRun(
        units,
        inverter.eval(),
        info["griffin_lim_iters"],
        info["history"],
        path,
        info.get("pieces"),
        info.get("files"),
        [(Path(p), why) for p, why in info.get("left_out", [])],
    )


def resynthesize_folder(
    voice: VoiceRun | str | os.PathLike[str],
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    speaker_of: str | None = None,
) -> dict[str, float]:
    """Speak every audio file under ``audio`` again through its units, in ``voice``'s voice:
    units (:func:`resynthesize`) → the inverter's magnitudes → Griffin-Lim, one 16 kHz
    ``<out>/<file id>.wav`` each, as long as its source (to the 10 ms frame). Returns
    ``{file id: spectral convergence of the inverter's magnitudes to the file's own}`` (0 is
    exact; voice conversion into another speaker is far from 0 by design). Units that
    normalise per speaker read each speaker's files together, the speakers told apart by
    ``speaker_of`` (default: the units run's rule), as ``units encode`` does."""
    voice = voice if isinstance(voice, VoiceRun) else load_voice(voice)
    wavs = find_wavs(audio)
    inputs = load_wav_features(wavs, voice.units.feature, store())  # silent files: AudioError
    refuse_short_files(wavs, inputs)
    mags = load_wav_features(wavs, "linear", store())
    cfg = voice.units.model.cfg
    normalised = cfg.feature_norm == "speaker"
    if normalised:  # each speaker's files together, as units encode reads them
        speakers = speakers_of(wavs, speaker_of or voice.units.speaker_of, audio)
        inputs = model_inputs(inputs, cfg.feature_norm, speakers)
    out = Path(out)
    convergence = {}
    for name in sorted(wavs):
        wav, mag, _ = resynthesize(
            voice.units.model, voice.inverter, inputs[name], None, voice.griffin_lim_iters,
            normalised=normalised,
        )  # fmt: skip
        save_audio(out / f"{name}.wav", wav, SAMPLE_RATE)
        convergence[name] = spectral_convergence(mags[name], mag[: len(mags[name])])
    return convergence
