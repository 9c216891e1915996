"""Would a speaker adversary make `units train`'s units better across speakers? A study.

    python bench/study_units_adversary.py TRAIN TEST ITEMS OUT [--weight 0.3] [--seed 0]

``TRAIN`` and ``TEST`` hold one folder per speaker (``--speaker-of parent``), ``ITEMS`` is the
ABX item file of ``TEST`` (``audiorepro abx items``). The script runs the command's own path,
``units train`` (its defaults: per-speaker normalisation, the pairs beside each file's own
reconstruction, their step budget) into ``OUT``, ``units encode`` of ``TEST`` into
``OUT-units`` and ``abx score ITEMS --mode across``, with one change to training: a small
classifier reads each code frame of the encoder's output (before the codebook) and predicts
the speaker of the file it comes from, through a gradient reversal, so that the encoder is
trained to hide the speaker; its cross-entropy, times ``--weight``, joins the loss. The
classifier's accuracy goes to the run's history (``adv_acc``; chance is one over the number
of speakers).

The change is made here, by replacing the model, the paired dataset and the training step
that ``units train`` uses inside this process only: the library is not changed. The
Reference's "Your own recordings" page gives the numbers on three pairs of Asterisk voices.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from audiorepro.cli import main as command
from audiorepro.models.vqvae import VQVAE

train_module = importlib.import_module("audiorepro.experiments.zerospeech.train")
recordings = importlib.import_module("audiorepro.experiments.zerospeech.recordings")
pairs = importlib.import_module("audiorepro.experiments.zerospeech.pairs")


class Reverse(torch.autograd.Function):
    """Identity forward, negated gradient backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return -grad


class AdversaryVQVAE(VQVAE):
    """The VQ-VAE with a speaker classifier on its code frames (saved with it)."""

    def __init__(self, cfg, n_speakers: int, **kwargs) -> None:
        if n_speakers < 2:
            raise SystemExit(
                f"study_units_adversary: {n_speakers} speaker: an adversary that tells "
                "speakers apart needs recordings of two or more (--speaker-of parent)"
            )
        super().__init__(cfg, n_speakers=n_speakers, **kwargs)
        self.adversary = nn.Sequential(
            nn.Linear(cfg.code_dim, 64), nn.ReLU(), nn.Linear(64, n_speakers)
        )


class SourcedPairs(pairs.PairedSegments):
    """:class:`PairedSegments` whose items also carry the speaker of their input file."""

    def __init__(self, frames, speakers, pair_list, segment_frames, min_frames=8) -> None:
        self.items = []
        own = [(i, i) for i in range(len(frames))]
        for i, j in [*pair_list, *own]:
            for src, dst in ((i, j), (j, i))[: 1 if i == j else 2]:
                x = frames[src]
                target = x if src == dst else pairs.aligned_to(x, frames[dst])
                for start in range(0, len(x), segment_frames):
                    end = start + segment_frames
                    if len(x[start:end]) >= min_frames:
                        cut = (x[start:end], target[start:end])
                        self.items.append((*cut, int(speakers[dst]), int(speakers[src])))


def collate(batch):
    """:func:`collate_paired`, then the input files' speakers (B,)."""
    first = pairs.collate_paired([item[:3] for item in batch])
    return (*first, torch.tensor([item[3] for item in batch]))


def adversary_step(weight: float):
    """The training step of ``units train`` plus ``weight`` × the adversary's cross-entropy."""

    def step(model: AdversaryVQVAE, batch) -> dict[str, torch.Tensor]:
        feats, lengths, speakers, target, sources = batch
        out = model(feats, lengths, speakers, target)
        valid = torch.arange(out.z.shape[1])[None, :] < out.code_lengths[:, None]
        logits = model.adversary(Reverse.apply(out.z))[valid]  # (valid code frames, S)
        truth = sources[:, None].expand_as(valid)[valid]
        cross_entropy = F.cross_entropy(logits, truth)
        return {
            "loss": out.loss + weight * cross_entropy,
            "reconstruction": out.reconstruction.detach(),
            "adv_ce": cross_entropy.detach(),
            "adv_acc": (logits.argmax(-1) == truth).float().mean().detach(),
        }

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--weight", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train_module.VQVAE = recordings.VQVAE = AdversaryVQVAE
    train_module.PairedSegments, train_module.collate_paired = SourcedPairs, collate
    train_module._vqvae_step = adversary_step(args.weight)
    units = args.out.with_name(args.out.name + "-units")
    speakers = ["--speaker-of", "parent"]
    steps = [
        ["units", "train", "--audio", str(args.train), *speakers, "--out", str(args.out)]
        + ["--set", f"seed={args.seed}"],
        ["units", "encode", str(args.out), "--audio", str(args.test), *speakers]
        + ["--out", str(units)],
        ["abx", "score", str(args.items), str(units), "--mode", "across"],
    ]
    for argv in steps:
        code = command(argv)
        if code != 0:
            raise SystemExit(code)


if __name__ == "__main__":
    main()
