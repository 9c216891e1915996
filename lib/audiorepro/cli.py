"""``audiorepro``: units, ABX and word embeddings on anyone's recordings, from the shell.

Only argument parsing lives here; every command is one call of a chapter's experiments module
(:mod:`audiorepro.experiments.zerospeech`, :mod:`audiorepro.experiments.awe`), which notebooks
can call the same way::

    audiorepro segments --audio DIR [--word-of parent|prefix[:SEP]|MAP.tsv]
                        [--speaker-of RULE] --out SEG.tsv
    audiorepro units train --audio DIR [--speaker-of prefix|parent|MAP.tsv] [--preset P]
                           [--set key=value ...] --out RUN
    audiorepro units encode RUN --audio DIR --out SUBMISSION_DIR
                            [--what vectors|codes|frames|kmeans] [--speaker-of RULE]
    audiorepro units bitrate SUBMISSION_DIR (--audio DIR | --filelist FILE)
    audiorepro units voice RUN --audio VOICE_DIR [--set key=value ...] --out VOICE
    audiorepro units resynth VOICE --audio DIR --out WAV_DIR
    audiorepro abx items --segments SEG.tsv --out FILE.item [--audio DIR]
                         [--times auto|relative|seconds]
    audiorepro abx score ITEM_FILE SUBMISSION_DIR [--mode across|within] [--distance D]
                         [--frame-shift S]
    audiorepro awe train --segments SEG.tsv [--lexicon cmudict|characters|FILE]
                         [--dev SEG.tsv]
                         [--preset P] [--set key=value ...] --out RUN
    audiorepro awe embed RUN --segments SEG.tsv --out EMB.npz
    audiorepro awe ap EMB.npz
    audiorepro awe dtw --segments SEG.tsv [--tokens N] [--seed S]

``SEG.tsv``: a tab-separated table with the header ``path word speaker start end`` (seconds;
``start`` and ``end`` empty for a whole file). Audio files are ``.wav``, ``.flac`` or ``.ogg``
at any sample rate (resampled). A file's id is its name without the extension; when names
repeat across subfolders (``spk1/001.wav``, ``spk2/001.wav``), its path under ``--audio``
(``units encode`` mirrors the subfolders; give ``abx items`` the same ``--audio``). A bad
input exits with status 1 and a message naming the file, line and field; a bad command line
with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from audiorepro.config import PRESETS, ConfigError
from audiorepro.data.recipes.common import RecipeError
from audiorepro.features import AudioError
from audiorepro.storage import WriteError, atomic_write

__all__ = ["main", "parse_sets"]

_ERRORS = (
    WriteError,  # a full disk: the message names the path, the space left and what was kept
    RecipeError,
    ConfigError,
    AudioError,
    FileNotFoundError,
    KeyError,
    ValueError,
)


def parse_sets(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``["train.max_steps=5", ...]`` → ``{"train.max_steps": 5}`` (values read as YAML)."""
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {pair!r}: expected key=value (e.g. train.max_steps=200)")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ConfigError(f"--set {pair!r}: the value is not valid YAML: {err}") from err
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="audiorepro", description="Units, ABX and acoustic word embeddings on any wavs."
    )
    groups = parser.add_subparsers(dest="group", required=True)

    def preset_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--preset", default="embedded", choices=PRESETS, help="model sizes")
        p.add_argument(
            "--set",
            dest="sets",
            action="append",
            metavar="KEY=VALUE",
            help="override one preset field (dotted: train.max_steps=200); repeatable",
        )

    def folder_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--audio", required=True, help="folder of .wav/.flac/.ogg files (searched recursively)"
        )
        p.add_argument(
            "--speaker-of",
            default="prefix",
            help="prefix (name up to the first _; prefix:- up to the first -), parent (folder "
            "name) or a MAP.tsv (file<TAB>speaker)",
        )

    p = groups.add_parser(
        "segments", help="write a whole-file SEG.tsv from a folder (a word per file)"
    )
    p.set_defaults(command="table")
    folder_args(p)
    p.add_argument(
        "--word-of",
        default="parent",
        help="parent (folder name: yes/x.wav), prefix[:SEP] (file name up to SEP) or a "
        "MAP.tsv (file<TAB>word; files it leaves out are not in the table)",
    )
    p.add_argument("--out", required=True, help="the SEG.tsv to write")

    units = groups.add_parser("units", help="discrete units (chapter 03's VQ-VAE)")
    units_cmds = units.add_subparsers(dest="command", required=True)
    p = units_cmds.add_parser("train", help="train a VQ-VAE on a folder of wavs")
    folder_args(p)
    preset_args(p)
    p.add_argument("--out", required=True, help="the run folder to write")
    p = units_cmds.add_parser("encode", help="one ZeroSpeech 2019 .txt per wav")
    p.add_argument("run", help="a units train --out folder")
    p.add_argument("--audio", required=True, help="folder of audio files (as units train)")
    p.add_argument("--out", required=True, help="the submission folder to write")
    p.add_argument(
        "--speaker-of",
        default=None,
        help="with per-speaker normalisation (model.feature_norm=speaker): how to tell this "
        "folder's speakers apart (prefix, parent or a MAP.tsv); default: the run's own rule",
    )
    p.add_argument(
        "--what",
        default="vectors",
        choices=("vectors", "codes", "frames", "kmeans"),
        help="the units as codebook vectors or one-hot codes, or a baseline to score beside "
        "them: the input frames the model reads (10 ms) or the run's k-means units (same K "
        "and code rate)",
    )

    p = units_cmds.add_parser("voice", help="train an inverter: units -> speech in one voice")
    p.add_argument("run", help="a units train --out folder")
    p.add_argument("--audio", required=True, help="recordings of the voice to speak with")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        metavar="KEY=VALUE",
        help="override an inverter field (inverter_train.max_steps=600); repeatable",
    )
    p.add_argument("--out", required=True, help="the voice folder to write")
    p = units_cmds.add_parser("resynth", help="speak recordings again through their units")
    p.add_argument("voice", help="a units voice --out folder")
    p.add_argument("--audio", required=True, help="folder of audio files to resynthesise")
    p.add_argument("--out", required=True, help="the folder of 16 kHz wavs to write")
    p = units_cmds.add_parser(
        "bitrate", help="bits per second of a units folder (ZeroSpeech 2019)"
    )
    p.add_argument("submission_dir", help="a units encode --out folder")
    durations = p.add_mutually_exclusive_group(required=True)
    durations.add_argument("--audio", help="the folder units encode read (durations from it)")
    durations.add_argument("--filelist", help="an official bitrate list: <name>.txt <seconds>")

    abx = groups.add_parser("abx", help="ABX item files and scores")
    abx_cmds = abx.add_subparsers(dest="command", required=True)
    p = abx_cmds.add_parser("items", help="word items from a segments table")
    p.add_argument("--segments", required=True, help="SEG.tsv: path word speaker start end")
    p.add_argument("--out", required=True, help="the .item file to write")
    p.add_argument(
        "--audio",
        default=None,
        help="the folder units encode read: items name files by its file ids (paths under it "
        "when file names repeat across subfolders); default: file names",
    )
    p.add_argument(
        "--times",
        default="auto",
        choices=("auto", "relative", "seconds"),
        help="relative: whole files as 0 1 (score without --frame-shift); seconds: score "
        "with --frame-shift; auto: relative if every segment is a whole file",
    )
    p = abx_cmds.add_parser("score", help="ABX error (%%) of a submission folder")
    p.add_argument("item_file")
    p.add_argument("submission_dir")
    p.add_argument("--mode", default="across", choices=("across", "within"))
    p.add_argument(
        "--distance", default="angular", choices=("angular", "cosine", "kl", "levenshtein")
    )
    p.add_argument(
        "--frame-shift",
        type=float,
        default=None,
        help="seconds between feature lines (units: 0.04) to read item times as seconds; "
        "default: the 2019 rule (relative times, whole files)",
    )

    awe = groups.add_parser("awe", help="acoustic word embeddings (chapter 04)")
    awe_cmds = awe.add_subparsers(dest="command", required=True)
    p = awe_cmds.add_parser("train", help="train the multi-view model on word segments")
    p.add_argument("--segments", required=True, help="SEG.tsv: path word speaker start end")
    p.add_argument(
        "--lexicon",
        default="cmudict",
        help="cmudict, characters (the spelling: any language) or a 'WORD PH1 PH2 ...' file",
    )
    p.add_argument("--dev", default=None, help="SEG.tsv of development words (default: 10%%)")
    preset_args(p)
    p.add_argument("--out", required=True, help="the run folder to write")
    p = awe_cmds.add_parser("embed", help="embed the segments of a table")
    p.add_argument("run", help="an awe train --out folder")
    p.add_argument("--segments", required=True)
    p.add_argument("--out", required=True, help="the .npz to write")
    p = awe_cmds.add_parser("ap", help="same-different average precision of an .npz")
    p.add_argument("embeddings")
    p = awe_cmds.add_parser(
        "dtw", help="the MFCC + DTW baseline: same-different AP of a segments table"
    )
    p.add_argument("--segments", required=True, help="SEG.tsv: path word speaker start end")
    p.add_argument(
        "--tokens", type=int, default=None, help="a seeded subset of this many rows (default: all)"
    )
    p.add_argument("--seed", type=int, default=0, help="the subset's seed")
    return parser


def _run(args: argparse.Namespace) -> None:
    from audiorepro.data.recordings import WORD_RULE, find_wavs, scan_folder
    from audiorepro.experiments.awe import recordings as awe
    from audiorepro.experiments.zerospeech import recordings as units
    from audiorepro.metrics.abx import abx_error

    command = (args.group, args.command)
    if command == ("segments", "table"):
        from audiorepro.data.recordings import write_folder_segments

        path, rows, left_out = write_folder_segments(
            args.audio, args.out, word_of=args.word_of, speaker_of=args.speaker_of
        )
        print(f"wrote {rows} whole-file rows to {path} ({left_out} files without a word left out)")
        print(f"{args.audio}: {scan_folder(args.audio).note()}")
    elif command == ("units", "train"):
        run = units.train_units(
            args.audio,
            args.out,
            speaker_of=args.speaker_of,
            preset=args.preset,
            overrides=parse_sets(args.sets),
        )
        steps, losses = run.history["step"], run.history["loss"]
        print(f"trained on {len(run.speakers)} speakers, {run.note}")
        print(f"{len(steps)} logged steps (last {steps[-1] if steps else 0}) -> {run.path}")
        print(f"final loss {losses[-1] if losses else float('nan'):.4f}")
    elif command == ("units", "encode"):
        run = units.load_units(args.run)
        rows = units.encode_units(
            run, args.audio, args.out, what=args.what, speaker_of=args.speaker_of
        )
        shift = units.output_frame_shift(run, args.what)
        print(f"wrote {len(rows)} files to {args.out} (one line every {shift:g} s)")
        print(f"{args.audio}: {scan_folder(args.audio).note()}")
    elif command == ("units", "voice"):
        voice = units.train_voice(args.run, args.audio, args.out, overrides=parse_sets(args.sets))
        losses = voice.history["loss"]
        print(
            f"trained the inverter {len(losses)} steps on {voice.pieces} pieces of "
            f"{len(find_wavs(args.audio))} files -> {voice.path}"
        )
        print(f"{args.audio}: {scan_folder(args.audio).note()}")
        print(f"final loss {losses[-1] if losses else float('nan'):.4f}")
    elif command == ("units", "resynth"):
        convergence = units.resynthesize_folder(args.voice, args.audio, args.out)
        print(f"wrote {len(convergence)} wavs (16 kHz) to {args.out}")
        print(f"{args.audio}: {scan_folder(args.audio).note()}")
        print(
            "spectral convergence to the sources' magnitudes, mean "
            f"{float(np.mean(list(convergence.values()))):.4f}"
        )
    elif command == ("units", "bitrate"):
        rate = units.submission_bitrate(
            args.submission_dir, audio=args.audio, filelist=args.filelist
        )
        print(f"{rate:.2f}")
    elif command == ("abx", "items"):
        path, times = units.abx_items(args.segments, args.out, times=args.times, audio=args.audio)
        n = sum(1 for line in open(path, encoding="utf-8") if line.strip()) - 1
        hint = "score without --frame-shift" if times == "relative" else "score with --frame-shift"
        print(f"wrote {n} items ({times} times: {hint}) to {path}")
        print(WORD_RULE)
    elif command == ("abx", "score"):
        error = abx_error(
            args.submission_dir,
            args.item_file,
            distance=args.distance,
            mode=args.mode,
            frame_shift=args.frame_shift,
        )
        print(f"{error:.3f}")
    elif command == ("awe", "train"):
        run = awe.train_on_segments(
            args.segments,
            args.out,
            lexicon=args.lexicon,
            dev=args.dev,
            preset=args.preset,
            overrides=parse_sets(args.sets),
        )
        print(f"trained {run.history.final_epoch} epochs -> {run.path}")
        print(WORD_RULE)
        print(f"kept the weights of epoch {run.kept_epoch} (select: {run.selected})")
        if run.best_dev >= 1.0 and run.selected == "best":
            print(
                "warning: the development words reached AP 1 and cannot tell later epochs "
                "apart; give a larger --dev table, or --set select=final",
                file=sys.stderr,
            )
        print(f"best dev cross-view AP {run.best_dev:.4f}")
    elif command == ("awe", "embed"):
        arrays = awe.embed_table(args.run, args.segments)

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)

        atomic_write(args.out, write, say_faults=True)  # a full disk keeps the earlier file
        print(f"wrote {len(arrays['labels'])} embeddings to {args.out}")
        print(WORD_RULE)
    elif command == ("awe", "ap"):
        ap = awe.embeddings_ap(args.embeddings)
        print(WORD_RULE)
        print(f"{ap:.4f}")
    elif command == ("awe", "dtw"):
        base = awe.dtw_table_ap(args.segments, tokens=args.tokens, seed=args.seed)
        print(
            f"{base['tokens']} segments, {base['num_pairs']} pairs, "
            f"{base['positives']} of one word"
        )
        print(WORD_RULE)
        print(f"{base['ap']:.4f}")
    else:  # pragma: no cover - argparse allows only the commands above
        raise AssertionError(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 done, 1 bad input, 2 bad command line)."""
    args = _parser().parse_args(argv)
    try:
        _run(args)
    except _ERRORS as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"audiorepro: error: {message}", file=sys.stderr)
        return 1
    return 0
