"""Would units lose less to their codebook if each speaker's encoder outputs were centred
before it? A study, not a bench.

    python bench/study_units_centred.py TRAIN TEST ITEMS [--seed 0] [--momentum 0.01]

``TRAIN`` and ``TEST`` hold one folder per speaker (``--speaker-of parent``), ``ITEMS`` is the
ABX item file of ``TEST``. The script trains as ``units train`` does (per-speaker
normalisation, the whole-file pairs it finds beside each file's own reconstruction, 2,400
steps), with one change: before the codebook, the encoder's output of a file has its
speaker's mean subtracted (the input's speaker, not the decoder's), a running mean over the
training batches (``--momentum``), as per-speaker normalisation does for the input frames.
The codes are then shared by what the speakers say, not by where their recording chains put
it. It prints the units' word ABX across speakers on ``ITEMS`` twice: with each speaker's
running mean from training, and with the mean of the encoder outputs of the files scored
(as a new speaker would be centred). ``--momentum 0`` trains and scores ``units train``'s
model (no centring).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from study_units_adversary import SourcedPairs, collate
from study_units_channels import TrainingSet, fit_units, training_set

from audiorepro.data.recordings import scan_folder, speakers_of
from audiorepro.data.speech_segments import load_wav_features
from audiorepro.experiments.zerospeech.config import store
from audiorepro.experiments.zerospeech.data import model_inputs, training_files
from audiorepro.experiments.zerospeech.train import _vqvae_step
from audiorepro.losses.vq import length_mask
from audiorepro.metrics.abx import abx_error
from audiorepro.models.vqvae import VQVAE, VQVAEConfig


class CentredVQVAE(VQVAE):
    """:class:`VQVAE` whose encoder outputs lose their input speaker's running mean before
    the codebook; ``sources`` (B,) names the input speakers of the next call."""

    def __init__(self, cfg: VQVAEConfig, n_speakers: int, momentum: float) -> None:
        super().__init__(cfg, n_speakers)
        self.momentum = momentum
        self.register_buffer("speaker_mean", torch.zeros(n_speakers, cfg.code_dim))
        self.register_buffer("seen", torch.zeros(n_speakers, dtype=torch.bool))
        self.sources: torch.Tensor | None = None
        self.offset: torch.Tensor | None = None  # (D,) at scoring: subtract this instead

    def quantize(self, feats: torch.Tensor, lengths: torch.Tensor):
        x = (feats - self.feat_mean) / self.feat_std
        z, code_lengths = self.encoder(x, lengths)
        z = self.pre_quant(z)
        mask = length_mask(code_lengths, z.shape[1])
        if self.momentum > 0:
            if self.offset is not None:
                z = z - self.offset
            else:
                src = self.sources
                if self.training:
                    with torch.no_grad():
                        for s in src.unique().tolist():
                            mean = z[(src == s)[:, None] & mask].mean(0)
                            if not self.seen[s]:
                                self.speaker_mean[s] = mean
                                self.seen[s] = True
                            else:
                                self.speaker_mean[s].lerp_(mean, self.momentum)
                z = z - self.speaker_mean[src][:, None, :]
        codes, e = self.quantizer(z, mask)
        return x, z, codes, e, code_lengths


def step(model: CentredVQVAE, batch) -> dict[str, torch.Tensor]:
    *paired, sources = batch
    model.sources = sources
    return _vqvae_step(model, paired)


def score(model: CentredVQVAE, data: TrainingSet, test: Path, items: Path) -> dict[str, float]:
    """Word ABX across speakers of the units of ``test``: centred by the training means, and by
    the scored files' own."""
    wavs, _ = training_files(scan_folder(test).files)
    speakers = speakers_of(wavs, "parent", test)
    feats = model_inputs(load_wav_features(wavs, data.feature, store()), "speaker", speakers)
    model.eval()
    out = {}
    with torch.no_grad():
        z = {}
        for name, x in feats.items():
            t = torch.from_numpy(x)[None]
            xn = (t - model.feat_mean) / model.feat_std
            zz, n = model.encoder(xn, torch.tensor([len(x)]))
            z[name] = model.pre_quant(zz)[0, : int(n[0])]
        for how in ("training means", "the scored files' means"):
            units = {}
            for name, zz in z.items():
                s = data.order.index(speakers[name])
                if how == "training means":
                    offset = model.speaker_mean[s] if model.momentum > 0 else 0.0
                else:
                    mine = [z[n] for n in z if speakers[n] == speakers[name]]
                    offset = torch.cat(mine).mean(0) if model.momentum > 0 else 0.0
                zc = (zz - offset)[None]
                _, e = model.quantizer(zc, torch.ones(zc.shape[:2], dtype=torch.bool))
                units[name] = e[0].numpy().astype(np.float32)
            out[how] = abx_error(units, items, mode="across")
            print(f"units (codebook vectors), centred by {how}: {out[how]:.2f} %", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--momentum", type=float, default=0.01)
    args = parser.parse_args(argv)
    data = training_set(args.train, args.seed)
    dataset = SourcedPairs(
        data.clean, data.index, data.found.pairs, data.config.train.segment_frames
    )
    model = fit_units(
        data,
        dataset,
        lambda: CentredVQVAE(data.config.model, len(data.order), args.momentum),
        step,
        collate,
    )
    score(model, data, args.test, args.items)


if __name__ == "__main__":
    main()
