"""Would a label-free held-out rule choose `units train`'s step budget well? A study, not a bench.

    python bench/study_units_stopping.py TRAIN TEST ITEMS OUT.json [--steps 4800] [--seed 0]

``TRAIN`` and ``TEST`` hold one folder per speaker (``--speaker-of parent``), ``ITEMS`` is the
ABX item file of ``TEST`` (``audiorepro abx items``). The script finds the pairs that
``units train`` finds, holds out 15 % of them (their files leave training altogether), trains
as ``units train`` does (per-speaker normalisation, the pairs beside each file's own
reconstruction), and at some steps scores the units of

- the held-out files, by a pair ABX: each held-out pair a "word", ABX across its two speakers,
  the other held-out files of A's speaker as the B's (no label needed);
- the test files on ``ITEMS`` (the labels: only to see whether the first tracks it).

Each line goes to ``OUT.json`` as it is measured. The Reference's "Your own recordings" page
gives the numbers on three pairs of Asterisk voices (Italian, Spanish, French).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from audiorepro.data.recordings import scan_folder, speakers_of
from audiorepro.data.speech_segments import feature_of, load_wav_features, normalize_features
from audiorepro.experiments.zerospeech.config import load_config, store
from audiorepro.experiments.zerospeech.data import MIN_TRAIN_FRAMES, training_files
from audiorepro.experiments.zerospeech.evaluate import encode_files
from audiorepro.experiments.zerospeech.pairs import find_pairs
from audiorepro.experiments.zerospeech.train import fit_vqvae
from audiorepro.metrics.abx import abx_error

HELD_OUT = 0.15
CHECKS = (300, 600, 1200, 1800, 2400, 3600, 4800, 7200)


def folder_features(folder: Path, feature: str) -> tuple[dict, dict]:
    """``({file id: frames}, {file id: speaker})`` of the files ``units train`` would use."""
    wavs, _ = training_files(scan_folder(folder).files)
    return load_wav_features(wavs, feature, store()), speakers_of(wavs, "parent", folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=4800)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    overrides = {"model.feature_norm": "speaker", "train.pairs": "nearest"}
    config = load_config("embedded", {**overrides, "train.max_steps": args.steps})
    feature = feature_of(config.model.input_dim)
    feats, speakers = folder_features(args.train, feature)
    names = [n for n in sorted(feats) if len(feats[n]) >= MIN_TRAIN_FRAMES]
    voices = [speakers[n] for n in names]
    found = find_pairs(normalize_features([feats[n] for n in names], "speaker", voices), voices)
    print(found.line(), flush=True)
    order = np.random.default_rng(1000 + args.seed).permutation(len(found.pairs))
    held = [found.pairs[i] for i in order[: max(8, round(HELD_OUT * len(found.pairs)))]]
    held_files = sorted({i for pair in held for i in pair})
    kept = [i for i in range(len(names)) if i not in set(held_files)]
    index = {old: new for new, old in enumerate(kept)}
    pairs = [(index[a], index[b]) for a, b in found.pairs if a in index and b in index]
    print(f"held out {len(held)} pairs ({len(held_files)} files); training on {len(kept)} files, "
          f"{len(pairs)} pairs", flush=True)  # fmt: skip
    pair_items = args.out.with_suffix(".pairs.item")  # whole files: relative times 0 1
    pair_items.write_text(
        "#file onset offset #phone prev-phone next-phone speaker\n"
        + "".join(
            f"{names[i]} 0 1 p{k} - - {voices[i]}\n" for k, ab in enumerate(held) for i in ab
        )
    )
    held_feats = {names[i]: feats[names[i]] for i in held_files}
    held_speakers = {names[i]: voices[i] for i in held_files}
    test_feats, test_speakers = folder_features(args.test, feature)
    lines: list[dict] = []

    class Probe:
        def on_step_end(self, trainer, step, logs) -> None:
            if step not in CHECKS:
                return
            model = trainer.unwrapped_model
            mode = model.training
            with torch.no_grad():
                _, held_units = encode_files(model, held_feats, speakers=held_speakers)
                _, test_units = encode_files(model, test_feats, speakers=test_speakers)
            model.train(mode)
            line = {
                "step": step,
                "held_out_pair_abx": abx_error(held_units, pair_items),
                "test_abx": abx_error(test_units, args.items),
            }
            lines.append(line)
            print(line, flush=True)
            args.out.write_text(json.dumps(lines, indent=1) + "\n")

    fit_vqvae(
        config.train, config.model, [feats[names[i]] for i in kept], [voices[i] for i in kept],
        args.seed, "none", callbacks=[Probe()], pairs=pairs,
    )  # fmt: skip


if __name__ == "__main__":
    main()
