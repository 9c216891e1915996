"""Run a chapter's ``paper`` preset end to end on the CPU on a tiny corpus (``make paper-dry-run``).

The corpus is written in the real corpus's distributed layout where the ``paper`` preset looks
for it (under ``$AUDIOREPRO_DATA``), the models are the paper's sizes, and the only overrides are
sizes that make a CPU run feasible (:data:`OVERRIDES`: epochs, number of seeds, the DTW subset).
Each chapter goes through its experiments functions as its pages do (train, evaluate, record,
findings) and must leave ledger rows; the script exits 1 if a chapter fails or records nothing.

Chapters done: 03 (Transformer VQ-VAE, the ZeroSpeech 2019 release layout) and 04 (multi-view AWE, the Switchboard word lists + npz features of
``audiorepro.data.recipes.switchboard``). Everything goes to ``--out`` (a temporary folder by
default): data, run store, ledger::

    PYTHONPATH=lib python bench/paper_dry_run.py [--out DIR] [--chapters 04]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The only changes to the paper presets: sizes, never the models or the method.
OVERRIDES: dict[str, dict[str, Any]] = {
    "03_zerospeech": {
        "train.max_steps": 2,  # paper: 100 epochs
        "inverter_train.max_steps": 2,  # paper: 100 epochs
        "main_seeds": [0],  # paper: 0, 1, 2
        "griffin_lim_iters": 4,  # paper: 100
        "n_examples": 1,  # resynthesised files; paper: 4
    },
    "04_awe": {
        "train.num_epochs": 1,  # paper: 100 with early stopping
        "sweep_epochs": 1,  # paper: 15
        "seeds": [0],  # paper: 0, 1, 2
        "dtw_tokens": 20,  # paper: 2000
        "train.device": "cpu",
    },
}


def use_folder(out: Path) -> None:
    """Point the data, runs, ledger and checkpoints at folders under ``out``."""
    for name, sub in (
        ("AUDIOREPRO_DATA", "data"),
        ("AUDIOREPRO_RUNS", "runs"),
        ("AUDIOREPRO_RESULTS", "results"),
        ("AUDIOREPRO_CHECKPOINTS", "checkpoints"),
    ):
        (out / sub).mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(out / sub)


def awe_chapter(out: Path) -> str:
    """Chapter 04 under ``paper``: the smoke word corpus written as the Switchboard word folder
    the preset names (``{train,dev,test}.list``, ``swbd.<split>.npz``, ``vocab.json``), then
    pages 02 and 03's experiments: the chosen model, both tables' sweeps, the seeds, the
    MFCC + DTW baseline, the findings."""
    from audiorepro import reporting
    from audiorepro.config import replace, to_dict
    from audiorepro.data.embedded.word_corpus import generate_word_corpus
    from audiorepro.experiments import awe

    cfg = awe.load_config("paper", **OVERRIDES["04_awe"])
    generate_word_corpus(awe.corpus_root(cfg), "smoke", 0)  # the real layout, tiny
    data = awe.load_data(cfg)
    preset = "paper"

    run = awe.train(cfg, data)
    for split in ("dev", "test"):
        reporting.record_result(
            awe.CHAPTER, "02_train", awe.evaluate(run.model, data[split]), preset=preset,
            seed=run.seed, config=to_dict(cfg), tags={"model": "chosen-full-schedule",
                                                       "split": split},
        )  # fmt: skip
    squared = awe.train(replace(cfg, distance="cos2"), data)
    reporting.record_result(
        awe.CHAPTER, "02_train", {"dev_crossview_ap": squared.best_dev}, preset=preset,
        seed=squared.seed, config=to_dict(cfg), tags={"model": "chosen", "distance": "cos2"},
    )  # fmt: skip
    for number, configs in (("1", awe.table1_configs(cfg)), ("2", awe.table2_configs(cfg))):
        table = awe.sweep(configs, data)
        awe.record_sweep(table, number, page="03_evaluate", preset=preset, config=cfg)
    test = data["test"]
    for c in awe.seed_configs(cfg):
        reporting.record_result(
            awe.CHAPTER, "03_evaluate", awe.evaluate(awe.train(c, data).model, test),
            preset=preset, seed=c.seed, config=to_dict(cfg), tags={"model": "chosen"},
        )  # fmt: skip
    baseline = awe.dtw_baseline(test, cfg.dtw_tokens, seed=cfg.seed)
    reporting.record_result(
        awe.CHAPTER, "03_evaluate", {"acoustic_ap": baseline["ap"]}, preset=preset,
        seed=cfg.seed, config=to_dict(cfg), tags={"model": "mfcc-dtw"},
    )  # fmt: skip
    chance = awe.chance_levels(test)
    findings = awe.findings(reporting.read_ledger(), cfg, preset, chance=chance)
    params = sum(p.numel() for p in run.model.parameters())
    return f"model {params / 1e6:.1f}M parameters, {len(findings)} findings rows"


def zerospeech_chapter(out: Path) -> str:
    """Chapter 03 under ``paper``: the smoke speech corpus written as the ZeroSpeech 2019 release
    where the preset looks for it (``zerospeech2019/2019/{english,surprise}`` with the ABX item
    file, ``bitrate_filelist.txt`` and ``synthesis.txt``), then pages 02-04's experiments: every
    row of Tables 1-3 (train, ABX, bitrate), the surprise language, the submission files scored
    from disk, the codebook inverter and a resynthesis, the findings."""
    from audiorepro import reporting
    from audiorepro.config import to_dict
    from audiorepro.data.embedded.zerospeech_corpus import generate_zerospeech_corpus
    from audiorepro.experiments import zerospeech as zs

    preset = "paper"
    cfg = zs.load_config(preset, OVERRIDES["03_zerospeech"])
    generate_zerospeech_corpus(cfg.corpus.resolve(zs.data_dir()), "smoke", 0)
    records = []
    for row in zs.ablation_rows(cfg):
        for s in cfg.main_seeds:
            trained, metrics = zs.run_row(cfg, row, s)
            records.append(
                reporting.record_result(
                    zs.CHAPTER,
                    "03_abx_bitrate",
                    metrics,
                    preset=preset,
                    seed=s,
                    config=to_dict(trained.model.cfg),
                    tags={"row": row.key, "language": "english"},
                )  # fmt: skip
            )
    if cfg.surprise:
        _, metrics = zs.run_row(cfg, zs.ablation_rows(cfg)[0], cfg.seed, language="surprise")
        reporting.record_result(
            zs.CHAPTER, "03_abx_bitrate", metrics, preset=preset, seed=cfg.seed,
            config=to_dict(cfg.model), tags={"row": "base", "language": "surprise"},
        )  # fmt: skip
    main = zs.train_vqvae(cfg, cfg.model, cfg.seed)
    lang = zs.language_dir(cfg, "english")
    codes, vectors = zs.encode_files(main.model, zs.load_features(lang, "test", "mfcc"))
    submission = zs.export_submission(
        zs.submission_dir(), "english", codes, vectors=vectors,
        hyperparameters=to_dict(main.model.cfg),
    )  # fmt: skip
    zs.score_submission(
        submission / "2019/english/test", lang, frame_shift=cfg.model.stride * 0.01
    )

    voice = sorted(
        n for n in zs.load_features(lang, "train/voice", "mfcc") if n.startswith(cfg.target_voice)
    )
    holdout = voice[-cfg.n_examples :]
    inverter = zs.train_inverter(cfg, main, cfg.seed, holdout=holdout)
    mfcc = zs.load_features(lang, "train/voice", "mfcc")
    convergence = []
    for name in holdout:
        wav, sr = zs.load_audio(lang / "train/voice" / f"{name}.wav", sr=16000)
        _, mag, _ = zs.resynthesize(
            main.model, inverter.model, mfcc[name], len(wav), cfg.griffin_lim_iters
        )
        true_mag = zs.linear_spectrogram(wav, sr=sr)
        convergence.append(zs.spectral_convergence(true_mag, mag[: len(true_mag)]))
    reporting.record_result(
        zs.CHAPTER, "04_inverter", {"spectral_convergence": sum(convergence) / len(convergence)},
        preset=preset, seed=cfg.seed, config=to_dict(inverter.model.cfg),
        tags={"row": "inverter", "language": "english", "voice": cfg.target_voice},
    )  # fmt: skip
    findings = zs.findings(reporting.read_ledger(), cfg, preset)
    params = sum(p.numel() for p in main.model.parameters())
    return f"main VQ-VAE {params / 1e6:.1f}M parameters, {len(findings)} findings rows"


CHAPTERS: dict[str, Callable[[Path], str]] = {
    "03_zerospeech": zerospeech_chapter,
    "04_awe": awe_chapter,
}


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI; returns 1 when a chapter failed or left no ledger row."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--chapters", default=",".join(CHAPTERS), help=f"of {', '.join(CHAPTERS)}")
    args = parser.parse_args(argv)
    chapters = [c.strip() for c in args.chapters.split(",") if c.strip()]
    unknown = [c for c in chapters if c not in CHAPTERS]
    if unknown:
        parser.error(f"--chapters: unknown {unknown}; known: {', '.join(CHAPTERS)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="paper-dry-run-"))
    use_folder(out)
    from audiorepro import reporting

    failed = []
    for chapter in chapters:
        start = time.perf_counter()
        try:
            summary = CHAPTERS[chapter](out)
        except Exception:  # noqa: BLE001 - each chapter is reported, the others still run
            traceback.print_exc()
            failed.append(chapter)
            print(f"{chapter}: FAILED after {time.perf_counter() - start:.0f} s", flush=True)
            continue
        rows = [r for r in reporting.read_ledger() if r["chapter"] == chapter]
        ok = bool(rows) and all(r["preset"] == "paper" for r in rows)
        if not ok:
            failed.append(chapter)
        print(
            f"{chapter}: {'ok' if ok else 'FAILED'} in {time.perf_counter() - start:.0f} s, "
            f"{len(rows)} ledger rows under preset paper, {summary}",
            flush=True,
        )
    print(f"ledger: {reporting.ledger_path()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
