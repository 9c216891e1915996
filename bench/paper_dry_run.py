"""Run a chapter's ``paper`` preset end to end on the CPU on a tiny corpus (``make paper-dry-run``).

The corpus is written in the real corpus's distributed layout where the ``paper`` preset looks
for it (under ``$AUDIOREPRO_DATA``), the models are the paper's sizes, and the only overrides are
sizes that make a CPU run feasible (:data:`OVERRIDES`: epochs or steps, batch, captions per
corpus, number of seeds, the number of ablation and sweep settings and λ values, the DTW subset).
Each chapter goes through its experiments functions as its pages do (train, evaluate, record,
findings) and must leave ledger rows; the script exits 1 if a chapter fails or records nothing.

Chapters: 01 (PaSST-N + RoBERTa-large, the ClothoV2 / AudioCaps / WavCaps distributed layouts),
02 (the PaSST, ATST-Frame and MobileNetV3 teachers, stage 2, the λ sweep), 03 (Transformer VQ-VAE,
the ZeroSpeech 2019 release layout) and 04 (multi-view AWE, the Switchboard word lists + npz
features of ``audiorepro.data.recipes.switchboard``). Chapters 01-02 find their pretrained weights
as a researcher's machine would: the released AudioSet checkpoints under their published file
names in ``$AUDIOREPRO_CHECKPOINTS`` (written here with random weights in the released key
layouts, :func:`write_released_checkpoints`) and ``roberta-large`` in the Hugging Face hub cache
(random weights of the published configuration, :func:`write_text_model`), loaded offline.
Everything goes to ``--out`` (a temporary folder by default, removed at the end when every
chapter passed): data, checkpoints, hub cache, run store, ledger; a chapter's runs are deleted
once it has passed (``--keep-runs`` keeps them, and the temporary folder: chapter 01 left
19 GB)::

    PYTHONPATH=lib python bench/paper_dry_run.py [--out DIR] [--chapters 04] [--keep-runs]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The only changes to the paper presets: sizes, never the models or the method.
OVERRIDES: dict[str, dict[str, Any]] = {
    "01_retrieval": {
        "train.batch_size": 2,  # paper: 64
        "train.num_epochs": 1,  # paper: 16
        "max_train_items": 2,  # captions per corpus; paper: all
        "max_eval_items": 6,  # paper: all 5,225 evaluation captions
        "eval_batch_size": 4,  # paper: 64
        "finetune_epochs": 2,  # paper: 5 (two epoch ends: the validation selection runs)
        "ablation_epochs": 1,  # paper: 16
        "seeds": [0],  # paper: 0, 1, 2
        "corpus_combinations": ["clotho", "audiocaps+wavcaps+clotho"],  # paper: all seven
        "snippet_lengths_s": [5.0, 10.0],  # paper: 2, 5, 10, 15
    },
    "02_distillation": {
        "retrieval.train.batch_size": 2,  # paper: 64
        "retrieval.train.num_epochs": 1,  # paper: 16 (chapter 01)
        "retrieval.max_train_items": 2,
        "retrieval.max_eval_items": 6,
        "retrieval.eval_batch_size": 4,
        "retrieval.seeds": [0],
        "mobilenet_batch_size": 2,  # paper: 32
        "stage1_steps": 2,  # paper: 20 epochs (not chapter 01's recipe: PaSST trains its own)
        "finetune_epochs": 1,  # paper: 20
        "seeds": [0],  # paper: 0, 1, 2
        "lambdas": [0.0, 1.0],  # paper: 0, 0.5, 1, 2
    },
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
        "max_train_tokens": 64,  # paper: all (one batch of 64 a run: the sizes, not the steps)
        "sweep_heads": [4, 32],  # Table 2; paper: 1, 4, 8, 16, 32 (4 heads: a Table 1 run)
        "train.device": "cpu",
    },
}


#: The published configuration of each text model a ``paper`` preset names (its ``config.json``
#: on the Hugging Face hub), written with random weights by :func:`write_text_model`.
TEXT_MODELS: dict[str, dict[str, Any]] = {
    "roberta-large": dict(
        model_type="roberta", vocab_size=50265, hidden_size=1024, num_hidden_layers=24,
        num_attention_heads=16, intermediate_size=4096, max_position_embeddings=514,
        type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    ),
}  # fmt: skip


def use_folder(out: Path) -> None:
    """Point the data, runs, ledger, checkpoints and the Hugging Face hub cache (offline) at
    folders under ``out``."""
    for name, sub in (
        ("AUDIOREPRO_DATA", "data"),
        ("AUDIOREPRO_RUNS", "runs"),
        ("AUDIOREPRO_RESULTS", "results"),
        ("AUDIOREPRO_CHECKPOINTS", "checkpoints"),
        ("HF_HOME", "huggingface"),
    ):
        (out / sub).mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(out / sub)
    os.environ["HF_HUB_OFFLINE"] = "1"  # as on the CI machine: nothing is downloaded


def write_text_model(
    repo_id: str, captions: Sequence[str], sizes: dict[str, Any] | None = None
) -> Path:
    """``repo_id`` as a download of it sits in the Hugging Face hub cache
    (``$HF_HOME/hub/models--<repo>/snapshots/<revision>/`` and ``refs/main``), so that
    ``from_pretrained(repo_id)`` loads it offline: the published configuration
    (:data:`TEXT_MODELS`) with random weights, and a byte-level BPE tokenizer in the model's
    file layout (``vocab.json``, ``merges.txt``, ``<s>`` ``<pad>`` ``</s>`` ``<unk>``
    ``<mask>``) trained on ``captions`` (the published vocabulary is a download too).
    ``sizes`` replaces configuration fields (the tests' small model)."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import AutoConfig, AutoModel, RobertaTokenizerFast

    revision = "0" * 40
    cache = Path(os.environ["HF_HOME"]) / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = cache / "snapshots" / revision
    if (snapshot / "config.json").is_file():
        return snapshot
    snapshot.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator(list(captions), vocab_size=1000, special_tokens=specials)
    bpe.save_model(str(snapshot))
    tokenizer = RobertaTokenizerFast(
        vocab_file=str(snapshot / "vocab.json"), merges_file=str(snapshot / "merges.txt")
    )
    tokenizer.save_pretrained(snapshot)
    if repo_id not in TEXT_MODELS:
        raise ValueError(f"no published configuration for {repo_id!r}; known: {list(TEXT_MODELS)}")
    fields = TEXT_MODELS[repo_id] | (sizes or {})
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    AutoModel.from_config(config, add_pooling_layer=False).save_pretrained(snapshot)
    (cache / "refs").mkdir(exist_ok=True)
    (cache / "refs" / "main").write_text(revision)
    return snapshot


def write_released_checkpoints(model_cfgs: Sequence[Any]) -> list[Path]:
    """The released AudioSet checkpoint of each audio encoder in ``model_cfgs`` (those with
    ``audio_pretrained: audioset``), under its published file name in
    ``$AUDIOREPRO_CHECKPOINTS``: the paper-size encoder with random weights and a 527-class
    head, in the family's released key layout (``save_released_layout``), a PaSST with its
    release's time encoding (10 s, 20 s for S20)."""
    import torch
    from torch import nn

    from audiorepro.config import replace
    from audiorepro.models.audio_encoders import (
        AUDIOSET,
        build_audio_encoder,
        released_checkpoint,
        released_head_inputs,
        save_released_layout,
    )
    from audiorepro.models.passt import PASST_CONFIGS
    from audiorepro.paths import checkpoints_dir

    written: dict[Path, Path] = {}
    for cfg in model_cfgs:
        if cfg.audio_pretrained != AUDIOSET:
            continue
        path = checkpoints_dir() / released_checkpoint(cfg).file_name
        if path in written or path.is_file():
            continue
        changes: dict[str, Any] = {"audio_pretrained": None}
        if cfg.audio_encoder == "passt":
            changes["snippet_s"] = PASST_CONFIGS[cfg.passt_variant]["img_size"][1] / 100
        torch.manual_seed(0)
        encoder, _, _ = build_audio_encoder(replace(cfg, **changes))
        _calibrate_batch_norm(encoder)
        head = nn.Linear(released_head_inputs(encoder, cfg), 527)
        written[path] = save_released_layout(encoder, cfg, path, head=head)
    return list(written.values())


def _calibrate_batch_norm(encoder: Any, batches: int = 4) -> None:
    """Sets the running statistics of ``encoder``'s batch norms to what they are on random
    log-mel input, as a trained network's are on its data. Without it a random paper-size
    MobileNetV3 normalises with the initial mean 0 / variance 1, its activations shrink layer by
    layer, and its output no longer depends on its input: every clip gets one embedding (to
    1e-9), which the retrieval metrics refuse as collapsed. A released checkpoint's output does
    depend on its input; so does this stand-in's after calibration."""
    import torch
    from torch import nn

    norms = [m for m in encoder.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over the batches
    encoder.train()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(batches):
            encoder(torch.randn(4, 1, 128, 250, generator=generator))
    encoder.eval()
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum


def _caption_data(cfg: Any) -> Any:
    """Chapter 01's data under ``paper``: the smoke audio-caption corpora written where the
    preset reads the real downloads (``<data>/real/{clotho,audiocaps,wavcaps}``, in their
    distributed layouts) and loaded by the recipes; the text model's hub snapshot is written
    first, its tokenizer trained on these captions."""
    from audiorepro.data.embedded.audio_caption import generate_audio_caption_corpora
    from audiorepro.experiments.retrieval.data import all_items, load_data

    root = cfg.corpus.resolve(Path(os.environ["AUDIOREPRO_DATA"]) / "real")
    if not (root / "clotho").is_dir():
        generate_audio_caption_corpora(root, "smoke", 0)
    data = load_data(cfg)
    items = all_items(data.pretrain, data.validation, data.evaluation)
    write_text_model(cfg.model.text_model, [i.caption for i in items])
    return data


def retrieval_chapter(out: Path) -> str:
    """Chapter 01 under ``paper``: the smoke audio-caption corpora in the ClothoV2, AudioCaps and
    WavCaps layouts, PaSST-N (and CNN14, PaSST-S20) from released-layout AudioSet files,
    RoBERTa-large from the hub cache, then pages 02-04's experiments: pretraining, fine-tuning
    with and without caption augmentation (validation selection), the four ablations, the
    findings and the mechanism checks."""
    from audiorepro import reporting
    from audiorepro.experiments import retrieval
    from audiorepro.experiments.retrieval.stages import ablation_config, ablation_settings

    preset = "paper"
    cfg = retrieval.load_config(preset, OVERRIDES["01_retrieval"])
    data = _caption_data(cfg)
    write_released_checkpoints(
        [cfg.model]
        + [
            ablation_config(cfg, kind, setting).model
            for kind, settings in ablation_settings(cfg).items()
            for setting in settings
        ]
    )
    runs = retrieval.evaluate_stages(cfg, data, preset=preset, page="03_finetune")
    retrieval.run_ablations(cfg, data, preset=preset, page="04_evaluate")
    records = reporting.read_ledger()
    _, floor = retrieval.chance_floor(data)
    findings = retrieval.findings(records, cfg, preset, must_beat=floor)
    checks = retrieval.mechanism_checks(cfg, data)
    model = runs["pretrain", cfg.seeds[0]][0]
    params = sum(p.numel() for p in model.parameters())
    return (
        f"dual encoder {params / 1e6:.1f}M parameters, {len(findings)} findings rows, "
        f"{len(checks)} mechanism checks"
    )


def distillation_chapter(out: Path) -> str:
    """Chapter 02 under ``paper``: chapter 01's corpora, text model and checkpoints plus the
    ATST-Frame and MobileNetV3 (mn40_as_ext) releases, then pages 01-04's experiments: every
    stage-1 teacher (PaSST its own, §4.5's recipe differing from chapter 01's), the ensemble
    and its soft targets, stage 2 of every student, the λ sweep, the findings."""
    from audiorepro import reporting
    from audiorepro.experiments import distillation
    from audiorepro.experiments.distillation.config import own_passt_teacher, teacher_config

    preset = "paper"
    cfg = distillation.load_config(preset, OVERRIDES["02_distillation"])
    rcfg = cfg.retrieval
    data = _caption_data(rcfg)
    write_released_checkpoints([teacher_config(cfg, t).model for t in cfg.teachers])
    if not own_passt_teacher(cfg):
        raise RuntimeError("the paper preset's PaSST teacher should be chapter 02's own")
    distillation.evaluate_teachers(cfg, data, preset=preset, page="01_teachers")
    seed = cfg.seeds[0]
    items = distillation.finetune_items(cfg, data)
    ensemble = distillation.teacher_ensemble(cfg, seed, data, items)
    distillation.target_summary(cfg, seed, data, ensemble)
    distillation.evaluate_models(cfg, data, preset=preset, page="03_distill")
    distillation.evaluate_sweep(cfg, data, preset=preset, page="04_evaluate")
    records = reporting.read_ledger()
    chance = distillation.chance_levels(data, cfg)
    findings = distillation.findings(records, cfg, preset, chance)
    return f"{len(cfg.teachers)} teachers, {len(findings)} findings rows"


def awe_chapter(out: Path) -> str:
    """Chapter 04 under ``paper``: the smoke word corpus written as the Switchboard word folder
    the preset names (``{train,dev,test}.list``, ``swbd.<split>.npz``, ``vocab.json``), then
    pages 02 and 03's experiments: the chosen model, both tables' sweeps, the seeds, the
    MFCC + DTW baseline, the findings."""
    from audiorepro import reporting
    from audiorepro.config import replace, to_dict
    from audiorepro.data.embedded.word_corpus import generate_word_corpus
    from audiorepro.experiments import awe
    from audiorepro.experiments.awe.plan import sweep, table2_configs

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
    for number, configs in (("1", awe.table1_configs(cfg)), ("2", table2_configs(cfg))):
        table = sweep(configs, data)
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
    from audiorepro.paths import data_dir

    preset = "paper"
    cfg = zs.load_config(preset, OVERRIDES["03_zerospeech"])
    generate_zerospeech_corpus(cfg.corpus.resolve(data_dir()), "smoke", 0)
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
    "01_retrieval": retrieval_chapter,
    "02_distillation": distillation_chapter,
    "03_zerospeech": zerospeech_chapter,
    "04_awe": awe_chapter,
}


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI; returns 1 when a chapter failed or left no ledger row."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--chapters", default=",".join(CHAPTERS), help=f"of {', '.join(CHAPTERS)}")
    parser.add_argument(
        "--keep-runs",
        action="store_true",
        help="keep each chapter's run store (chapters 01-02's paper-size runs take 10-20 GB "
        "each; by default a chapter's runs are deleted once it has passed)",
    )
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
        elif not args.keep_runs:
            shutil.rmtree(Path(os.environ["AUDIOREPRO_RUNS"]) / chapter, ignore_errors=True)
        print(
            f"{chapter}: {'ok' if ok else 'FAILED'} in {time.perf_counter() - start:.0f} s, "
            f"{len(rows)} ledger rows under preset paper, {summary}",
            flush=True,
        )
    if args.out is None and not failed and not args.keep_runs:
        # Its own temporary folder (GBs of corpora, checkpoints and hub cache): nothing to keep.
        shutil.rmtree(out, ignore_errors=True)
        print(f"removed {out} (--out DIR keeps the data and the ledger)")
    else:
        print(f"ledger: {reporting.ledger_path()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
