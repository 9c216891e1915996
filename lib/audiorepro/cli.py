"""``audiorepro``: units, ABX and word embeddings on anyone's recordings, from the shell.

Only argument parsing lives here; every command is one call of a chapter's experiments module
(:mod:`audiorepro.experiments.zerospeech`, :mod:`audiorepro.experiments.awe`), which notebooks
can call the same way::

    audiorepro segments --audio DIR [--word-of parent|prefix[:SEP]|field:N[:SEP]|MAP.tsv]
                        [--speaker-of RULE] --out SEG.tsv
    audiorepro units train --audio DIR [--speaker-of RULE] [--preset P]
                           [--set key=value ...] --out RUN
    audiorepro units encode RUN --audio DIR --out SUBMISSION_DIR
                            [--what vectors|codes|frames|kmeans] [--speaker-of RULE]
    audiorepro units bitrate SUBMISSION_DIR (--audio DIR | --filelist FILE)
    audiorepro units voice RUN --audio VOICE_DIR [--set key=value ...] --out VOICE
    audiorepro units resynth VOICE --audio DIR --out WAV_DIR
    audiorepro abx items --segments SEG.tsv --out FILE.item [--audio DIR]
                         [--times auto|relative|seconds]
    audiorepro abx score ITEM_FILE SUBMISSION_DIR [--mode across|within] [--distance D]
                         [--frame-shift S] [--no-baseline]
    audiorepro awe train --segments SEG.tsv [--lexicon cmudict|characters|FILE]
                         [--dev SEG.tsv]
                         [--preset P] [--set key=value ...] --out RUN
    audiorepro awe embed RUN --segments SEG.tsv --out EMB.npz
    audiorepro awe ap EMB.npz [--no-baseline]
    audiorepro awe dtw --segments SEG.tsv [--tokens N] [--seed S]

``SEG.tsv``: a tab-separated table with the header ``path word speaker start end`` (seconds;
``start`` and ``end`` empty for a whole file). Audio files are ``.wav``, ``.flac`` or ``.ogg``
at any sample rate (resampled). A file's id is its name without the extension; when names
repeat across subfolders (``spk1/001.wav``, ``spk2/001.wav``), its path under ``--audio``
(``units encode`` mirrors the subfolders; give ``abx items`` the same ``--audio``). A bad
input exits with status 1 and a message naming the file, line and field; a bad command line
with status 2.

``abx score`` of a ``units encode`` folder prints its ABX error beside its two baselines on the
same items (the run's k-means units, the input frames), ``awe ap`` of an ``awe embed`` .npz
the AP of MFCC + DTW on the same pairs, each with one sentence saying whether the model beats
them; ``--no-baseline`` prints the model's number alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
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
        if not value.strip():
            raise ConfigError(
                f"--set {pair!r}: the value of {key.strip()} is empty (an unset shell "
                "variable?); give a value, or leave the --set out to keep the preset's"
            )
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ConfigError(f"--set {pair!r}: the value is not valid YAML: {err}") from err
        if out[key.strip()] is None:
            raise ConfigError(
                f"--set {pair!r}: the value reads as null, which would keep the preset's value "
                f"of {key.strip()}; give a value, or leave the --set out"
            )
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

    def force_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--force",
            action="store_true",
            help="write into an --out that holds other files or another run, replacing what "
            "the command writes there (never an input)",
        )

    def folder_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--audio", required=True, help="folder of .wav/.flac/.ogg files (searched recursively)"
        )
        p.add_argument(
            "--speaker-of",
            default=None,
            help="prefix (name up to the first _; prefix:- up to the first -), field:N[:SEP] "
            "(the N-th field of the name: field:2 for 7_jackson_32.wav), parent (folder "
            "name) or a MAP.tsv (file<TAB>speaker); default: prefix, or field:2 for names "
            "word_speaker_take (7_jackson_32.wav; the output says which, and why)",
        )

    p = groups.add_parser(
        "segments", help="write a whole-file SEG.tsv from a folder (a word per file)"
    )
    p.set_defaults(command="table")
    folder_args(p)
    p.add_argument(
        "--word-of",
        default="parent",
        help="parent (folder name: yes/x.wav), prefix[:SEP] (file name up to SEP), "
        "field:N[:SEP] (the N-th field of the name; field:1 the whole name of al/0.wav when "
        "no name holds SEP) or a MAP.tsv (file<TAB>word; files it leaves out are not in the "
        "table)",
    )
    p.add_argument("--out", required=True, help="the SEG.tsv to write")
    force_arg(p)

    units = groups.add_parser("units", help="discrete units (chapter 03's VQ-VAE)")
    units_cmds = units.add_subparsers(dest="command", required=True)
    p = units_cmds.add_parser("train", help="train a VQ-VAE on a folder of wavs")
    folder_args(p)
    p.add_argument(
        "--models",
        type=_models,
        default=None,
        help="how many models to train, from seeds seed, seed + 1, ... (side by side, one a "
        "core); units encode sets their units side by side, abx score their k-means units "
        "(default: the preset's units_models, 3 under embedded)",
    )
    preset_args(p)
    p.add_argument("--out", required=True, help="the run folder to write")
    force_arg(p)
    p = units_cmds.add_parser("encode", help="one ZeroSpeech 2019 .txt per wav")
    p.add_argument("run", help="a units train --out folder")
    p.add_argument("--audio", required=True, help="folder of audio files (as units train)")
    p.add_argument("--out", required=True, help="the submission folder to write")
    force_arg(p)
    p.add_argument(
        "--speaker-of",
        default=None,
        help="with per-speaker normalisation (model.feature_norm=speaker): how to tell this "
        "folder's speakers apart (prefix[:SEP], field:N[:SEP], parent or a MAP.tsv); default: "
        "the run's own rule",
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
    force_arg(p)
    p = units_cmds.add_parser("resynth", help="speak recordings again through their units")
    p.add_argument("voice", help="a units voice --out folder")
    p.add_argument("--audio", required=True, help="folder of audio files to resynthesise")
    p.add_argument("--out", required=True, help="the folder of 16 kHz wavs to write")
    force_arg(p)
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
    force_arg(p)
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
    p = abx_cmds.add_parser(
        "score",
        help="ABX error (%%) of a submission folder, beside its baselines",
        description="ABX error (%) of a submission folder. A folder written by `units encode` "
        "is printed beside its two baselines, scored on the same items with the same mode, "
        "distance and frame rule: the run's k-means units and the input frames the model "
        "reads (computed in memory from the run and audio folders that `units encode` "
        "recorded in the folder's command.json), with the chance level (50 %) and one "
        "sentence saying whether the units beat them. Any other folder: its score alone, "
        "and why no baseline is shown.",
    )
    p.add_argument("item_file", help="a .item file (abx items)")
    p.add_argument("submission_dir", help="one <file id>.txt per file (units encode --out)")
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="print the folder's ABX error alone (no baseline: faster on large sets)",
    )
    p.add_argument("--mode", default="across", choices=("across", "within"))
    p.add_argument(
        "--distance", default="angular", choices=("angular", "cosine", "kl", "levenshtein")
    )
    p.add_argument(
        "--frame-shift",
        type=float,
        default=None,
        help="seconds between feature lines (units: 0.04) to read item times as seconds "
        "(the baselines at their own: frames 0.01, k-means units the units'); default: the "
        "2019 rule (relative times, whole files)",
    )

    awe = groups.add_parser("awe", help="acoustic word embeddings (chapter 04)")
    awe_cmds = awe.add_subparsers(dest="command", required=True)
    p = awe_cmds.add_parser("train", help="train the multi-view model on word segments")
    p.add_argument("--segments", required=True, help="SEG.tsv: path word speaker start end")
    p.add_argument(
        "--lexicon",
        default="cmudict",
        help="cmudict (a number in digits is said in English: 7 = seven), characters (the "
        "spelling: any language) or a 'WORD PH1 PH2 ...' file",
    )
    p.add_argument("--dev", default=None, help="SEG.tsv of development words (default: 10%%)")
    p.add_argument(
        "--speeds",
        type=_speeds,
        default=",".join(f"{v:g}" for v in AWE_SPEEDS),
        help="speed perturbation: a copy of each training row at these speeds, each 0.5 to 2 "
        "(default %(default)s; 1: none)",
    )
    p.add_argument(
        "--warps",
        type=_warps,
        default=",".join(f"{v:g}" for v in AWE_WARPS),
        help="vocal tract length perturbation: a copy of each training row with its spectrum's "
        "frequency axis warped by these factors, each 0.8 to 1.25 (default %(default)s; 1: "
        "none)",
    )
    norm_arg(p, "train on")
    p.add_argument(
        "--models",
        type=_models,
        default=None,
        help="how many models to train, from seeds seed, seed + 1, ... (side by side, one a "
        "core); awe embed concatenates their embeddings (default: the preset's table_models, "
        "3 under embedded)",
    )
    p.add_argument(
        "--no-refit",
        action="store_true",
        help="keep the weights of the development run; by default, when the development rows "
        "are held out of --segments (no --dev), the kept weights are trained again with them, "
        "for the epochs and learning rates that made them",
    )
    preset_args(p)
    p.add_argument("--out", required=True, help="the run folder to write")
    force_arg(p)
    p = awe_cmds.add_parser("embed", help="embed the segments of a table")
    p.add_argument("run", help="an awe train --out folder")
    p.add_argument("--segments", required=True)
    p.add_argument(
        "--speeds",
        type=_speeds,
        default=None,
        help="average each row's embedding with those of its copies at these speeds (default: "
        "the speeds the run trained its copies at; 1: the row alone)",
    )
    p.add_argument("--out", required=True, help="the .npz to write")
    force_arg(p)
    p = awe_cmds.add_parser(
        "ap",
        help="same-different average precision of an .npz, beside MFCC + DTW",
        description="Same-different AP (cosine) of the embeddings of an .npz. An .npz written "
        "by `awe embed` (which records the segments table and rows it embedded) is printed "
        "beside the MFCC + DTW baseline (`awe dtw`) on the same tokens, in the same order, "
        "with the same word rule, and the chance level, then one sentence saying whether the "
        "embeddings beat it. Any other .npz: its AP alone, and why no baseline is shown.",
    )
    p.add_argument("embeddings", help="an awe embed --out .npz (embeddings, labels)")
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="print the embeddings' AP alone (no DTW: faster on large sets)",
    )
    p = awe_cmds.add_parser(
        "dtw", help="the MFCC + DTW baseline: same-different AP of a segments table"
    )
    p.add_argument("--segments", required=True, help="SEG.tsv: path word speaker start end")
    p.add_argument(
        "--tokens",
        type=_at_least(2),
        default=None,
        help="a seeded subset of this many rows, at least 2 (default: all)",
    )
    p.add_argument("--seed", type=_at_least(0), default=0, help="the subset's seed, from 0")
    norm_arg(p, "score")
    return parser


def norm_arg(p: argparse.ArgumentParser, what: str) -> None:
    """``--norm`` of ``awe train`` and ``awe dtw``: the MFCC normalisation."""
    p.add_argument(
        "--norm",
        choices=("speaker", "file"),
        default=None,
        help=f"normalise the MFCCs of the rows to {what} per speaker or per file (default: "
        "per speaker when every speaker has 10 s of audio in the table, else per file)",
    )


UNITS_WRITES = ("model.safetensors", "run.json", "kmeans.npz")
VOICE_WRITES = ("inverter.safetensors", "voice.json")
AWE_WRITES = ("model.safetensors", "final.safetensors", "run.json")
"""The files each training command writes into its --out folder (what --force replaces)."""


def _command_name(args: argparse.Namespace) -> str:
    return "segments" if args.group == "segments" else f"{args.group} {args.command}"


def _models_of(args: argparse.Namespace, overrides: Mapping[str, Any]) -> int | None:
    """How many models ``awe train`` or ``units train`` trains: ``--models``, else the preset's
    (so that a run of the default is the run of ``--models 3``, and reused as one)."""
    if args.models is not None:
        return int(args.models)
    config = _loader(args)(args.preset, overrides)
    return int(config.table_models if args.group == "awe" else config.units_models)


def _loader(args: argparse.Namespace) -> Any:
    if args.group == "awe":
        from audiorepro.experiments.awe.config import load_config
    else:
        from audiorepro.experiments.zerospeech.config import load_config
    return load_config


def checked_sets(args: argparse.Namespace, preset: str) -> dict[str, Any]:
    """The ``--set`` overrides, each checked alone against ``preset``: a value of the wrong type
    names the ``--set`` given (``train.max_steps=abc``), not a field the loader derived from it."""
    overrides = parse_sets(args.sets)
    load_config = _loader(args)
    for pair in args.sets or ():  # each as given (a field set twice: the last counts)
        key = pair.partition("=")[0].strip()
        try:
            load_config(preset, {key: parse_sets([pair])[key]})
        except ConfigError as err:
            text = str(err)
            detail = text[text.index("field '") :] if "field '" in text else text
            raise ConfigError(
                f"--set {pair}: {detail}; give a value of that type (see the preset "
                f"{preset!r}), or leave the --set out"
            ) from err
        except ValueError as err:  # a value of the right type out of its range
            raise ConfigError(f"--set {pair}: {err}; give a value in that range") from err
    return overrides


def _files_of(folder: str | os.PathLike[str]) -> list[Path]:
    """The files of a run folder (its command record aside): the inputs a later run compares."""
    from audiorepro.outputs import OUTPUT_RECORD

    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != OUTPUT_RECORD)


def _recorded_audio(run: Path) -> list[Path]:
    """The audio folders a units run or a voice (and the units run it was trained for)
    recorded as trained on, those that exist: outputs may not go there (``units resynth
    --force`` wrote over a voice's own recordings)."""
    import json

    found: list[Path] = []
    for name in ("run.json", "voice.json"):
        try:
            info = json.loads((run / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and isinstance(info.get("audio"), str):
            found.append(Path(info["audio"]))
        if name == "voice.json" and isinstance(info, dict) and isinstance(info.get("units"), str):
            found += _recorded_audio(Path(info["units"]))
    return [f for f in dict.fromkeys(found) if f.is_dir()]


def _maps(args: argparse.Namespace, *names: str) -> list[Any]:
    """Inputs for the ``--word-of``/``--speaker-of`` values that are map files."""
    from audiorepro.outputs import Input

    found = []
    for name in names:
        value = getattr(args, name.lstrip("-").replace("-", "_"), None)
        if value and Path(value).is_file():
            found.append(Input(name, Path(value), data=False))
    return found


def _output(args: argparse.Namespace, overrides: Mapping[str, Any] | None = None) -> Any:
    """Check ``--out`` before any work (:func:`audiorepro.outputs.output_target`): a folder
    command reuses its own output of the same inputs and settings, and anything that is there
    needs ``--force``; prints what is reused or replaced. Returns the plan."""
    from audiorepro.data.recordings import find_wavs, read_segments
    from audiorepro.outputs import Input, OutputPlan, fingerprint, output_target

    name = _command_name(args)
    audio = [Input("--audio", Path(args.audio))] if getattr(args, "audio", None) else []
    segments = [Input("--segments", Path(args.segments))] if hasattr(args, "segments") else []
    files: list[Path] = []
    writes: Sequence[str] = ()
    settings: dict[str, Any] = {}
    folder = True
    inputs: list[Any] = []
    if name in ("segments", "abx items", "awe embed"):
        folder = False
        inputs = [*audio, *segments, *_maps(args, "--word-of", "--speaker-of")]
        if name == "awe embed":
            inputs.append(Input("RUN", Path(args.run), data=False))
    elif name == "awe train":
        inputs = [*segments, *_maps(args, "--lexicon")]
        if args.dev:
            inputs.append(Input("--dev", Path(args.dev)))
        tables = [Path(args.segments), *([Path(args.dev)] if args.dev else [])]
        rows = [r for t in tables for r in read_segments(t, check_audio=False)]
        files = [*tables, *(i.path for i in inputs[1:]), *{Path(r.path) for r in rows}]
        settings = {
            "--preset": args.preset,
            "--set": overrides,
            "--lexicon": args.lexicon,
            "--speeds": list(args.speeds),
            "--warps": list(args.warps),
            "--norm": args.norm,
            "--no-refit": args.no_refit,
            "--models": _models_of(args, overrides),
        }
        writes = AWE_WRITES
    else:  # units train, encode, voice, resynth: a folder of audio in, a folder out
        wavs = find_wavs(args.audio)
        run = getattr(args, "run", None) or getattr(args, "voice", None)
        inputs = [*audio, *_maps(args, "--speaker-of")]
        if run is not None:
            option = "VOICE" if args.command == "resynth" else "RUN"
            inputs.append(Input(option, Path(run), data=False))
            files = _files_of(run)
            given = {i.path.resolve() for i in inputs}
            inputs += [  # the recordings the run was trained on: never written over either
                Input(f"{option}'s --audio", folder)
                for folder in _recorded_audio(Path(run))
                if folder.resolve() not in given
            ]
        files += [*wavs.values(), *(i.path for i in inputs[1:] if i.path.is_file())]
        settings = {"--speaker-of": args.speaker_of} if hasattr(args, "speaker_of") else {}
        if name == "units train":
            settings |= {
                "--preset": args.preset,
                "--set": overrides,
                "--models": _models_of(args, overrides),
            }
            writes = UNITS_WRITES
        elif name == "units voice":
            settings |= {"--set": overrides}
            writes = VOICE_WRITES
        elif name == "units encode":
            settings |= {"--what": args.what}
            writes = [f"{n}.txt" for n in wavs]
        else:
            writes = [f"{n}.wav" for n in wavs]
    refused = _hold_out(args, name, folder, inputs)
    if any(not i.path.exists() for i in inputs):
        if refused is not None:
            raise refused
        return OutputPlan(Path(args.out))  # the command names the missing input before writing
    request = None
    if folder:
        found = (f for f in files if Path(f).is_file())
        request = {"inputs": fingerprint(found), "settings": settings}
    plan = output_target(
        args.out,
        command=name,
        folder=folder,
        inputs=inputs,
        request=request,
        writes=writes,
        force=args.force,
    )
    if refused is not None and not plan.reuse:
        raise refused  # reusing its own output, a command writes nothing: it may be read-only
    if plan.note():
        print(plan.note())
    return plan


_HELD: list[Any] = []
"""The ``--out`` locks of commands run without :func:`main` (held until the process ends)."""


def _hold_out(
    args: argparse.Namespace, name: str, folder: bool, inputs: Sequence[Any]
) -> Exception | None:
    """Hold the lock of ``--out`` (:func:`~audiorepro.outputs.output_lock`) for the rest of
    the command, from before any audio is read: another command writing it is refused now,
    not replaced when this one ends. An ``--out`` that cannot be written is returned (the caller
    raises it unless the command reuses its earlier output there, which writes nothing). An
    ``--out`` inside a data folder (a table beside its audio) is checked, not locked: a lock
    file there would be listed as a file of that folder."""
    import contextlib

    from audiorepro.outputs import OutputUnwritable, output_lock

    out = Path(args.out).absolute()
    inside = any(
        i.data and i.path.is_dir() and out.is_relative_to(i.path.absolute()) for i in inputs
    )
    held = getattr(args, "held", None)
    if held is None:
        held = contextlib.ExitStack()
        _HELD.append(held)
    try:
        left = held.enter_context(
            output_lock(args.out, command=name, folder=folder, lock=not inside)
        )
    except OutputUnwritable as err:
        return err
    for path in left:
        print(
            f"{args.out}: removed {path.name}, an unfinished output that a command writing "
            "there had left when it was stopped before its end (killed, or the machine went "
            "down)"
        )
    return None


def _done(args: argparse.Namespace, plan: Any, outputs: Sequence[str]) -> None:
    """Record a folder command's output (:func:`audiorepro.outputs.record_output`)."""
    from audiorepro.outputs import record_output

    record_output(plan, command=_command_name(args), outputs=outputs)


def _progress() -> str:
    """How a training command shows its progress: a live bar on a terminal (the user sees the
    run is alive, and when it will end), nothing otherwise (logs and pipes get only the
    command's own lines). Either way stdout holds the same lines: the bar and the training
    loop's own lines go to stderr (:func:`_trained`)."""
    try:
        return "bar" if sys.stderr.isatty() else "none"
    except (AttributeError, ValueError):
        return "none"


def _trained(args: argparse.Namespace, setting: str, lr: Any, train: Any) -> Any:
    """``train()`` (progress, where shown, on stderr); a non-finite loss becomes an error that
    names the setting to change."""
    import contextlib

    from audiorepro.training.loop import NonFiniteError

    try:
        with contextlib.redirect_stdout(sys.stderr):
            return train()
    except NonFiniteError as err:
        what = str(err).split(" Training stopped")[0].rstrip(".")
        rate = lr()
        raise ValueError(
            f"{what}. Training stopped and nothing was written to {args.out}. Lower the "
            f"learning rate, e.g. --set {setting}={rate / 10:g} (this run's: {rate:g})"
        ) from err


AWE_SPEEDS = (0.8, 0.9, 1.1, 1.2)
"""``awe train --speeds``' default: :data:`audiorepro.experiments.awe.recordings.SPEEDS` (a
test checks they agree; the parser does not import the chapter)."""

AWE_WARPS = (0.9, 1.1)
"""``awe train --warps``' default: :data:`audiorepro.experiments.awe.recordings.WARPS`."""


def _at_least(minimum: int) -> Any:
    """An argparse type: an integer of at least ``minimum`` (argparse names the option)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def _speeds(text: str, option: str = "--speeds") -> tuple[float, ...]:
    """``--speeds 0.9,1.1``: speeds, comma separated, each within the range
    :func:`~audiorepro.experiments.awe.recordings.check_speeds` accepts (a usage error here);
    ``option="--warps"``: vocal-tract warps, the same way."""
    from audiorepro.experiments.awe.recordings import SPEED_RANGE, WARP_RANGE, check_speeds

    what = "speeds" if option == "--speeds" else "warps"
    try:
        speeds = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {what} like 0.9,1.1 (1: none), got {text!r}"
        ) from None
    try:
        check_speeds(speeds, option, SPEED_RANGE if what == "speeds" else WARP_RANGE)
    except ValueError as err:  # argparse names the option itself
        raise argparse.ArgumentTypeError(str(err).removeprefix(f"{option}: ")) from None
    return speeds


def _models(text: str) -> int:
    """``--models N``: a whole number from 1 to
    :data:`~audiorepro.experiments.awe.config.MAX_TABLE_MODELS` (a usage error here)."""
    from audiorepro.experiments.awe.config import MAX_TABLE_MODELS

    try:
        models = int(text)
    except ValueError:
        models = 0
    if not 1 <= models <= MAX_TABLE_MODELS:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of models from 1 to {MAX_TABLE_MODELS}, got {text!r}"
        )
    return models


def _warps(text: str) -> tuple[float, ...]:
    """``--warps 0.9,1.1``: as :func:`_speeds`, of vocal-tract warps."""
    return _speeds(text, "--warps")


def _abx_score(args: argparse.Namespace) -> None:
    """``abx score``: the folder's ABX error; beside it, for a ``units encode`` folder, its
    baselines on the same items (:mod:`audiorepro.experiments.zerospeech.baselines`)."""
    from audiorepro.experiments.zerospeech import baselines

    folder = Path(args.submission_dir)
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "does not exist"
        raise FileNotFoundError(
            f"{folder}: {what}; SUBMISSION_DIR is the folder of one <file>.txt per item file "
            "(what `audiorepro units encode` writes)"
        )
    scored = baselines.score_folder(
        args.submission_dir,
        args.item_file,
        distance=args.distance,
        mode=args.mode,
        frame_shift=args.frame_shift,
        baselines=not args.no_baseline,
    )
    from audiorepro.metrics.abx import triplet_coverage

    if left := triplet_coverage(args.item_file, args.mode).line():
        print(left)
    if scored.encoding is None:
        if scored.why:
            print(f"no baseline: {scored.why}")
        print(f"{scored.error:.3f}")
        return
    print("\n".join(baselines.score_table(scored.rows, args.mode, args.distance)))
    print(baselines.verdict(scored.rows))


PATHS = {
    "out": "--out",
    "audio": "--audio",
    "segments": "--segments",
    "dev": "--dev",
    "run": "RUN",
    "voice": "VOICE",
    "item_file": "ITEM_FILE",
    "submission_dir": "SUBMISSION_DIR",
    "embeddings": "EMBEDDINGS",
}
"""The path arguments of the commands (attribute: as the usage names it)."""


def _checked_paths(args: argparse.Namespace) -> None:
    """Before any work: a path given with a literal ``~`` (quoted, so the shell left it) is
    the home folder, as the shell would have made it (``--out "~/runs/a"`` writes there, not
    into a new folder named ``~``); an input that another ``audiorepro`` command is writing now
    is refused (:func:`~audiorepro.outputs.check_not_being_written`)."""
    from audiorepro.outputs import check_not_being_written

    for name, option in PATHS.items():
        value = getattr(args, name, None)
        if isinstance(value, str) and value.startswith("~"):
            setattr(args, name, os.path.expanduser(value))
        value = getattr(args, name, None)
        if value and name != "out":
            check_not_being_written(option, value)


def _run(args: argparse.Namespace) -> None:
    from audiorepro.data.recordings import WORD_RULE, find_wavs, scan_folder
    from audiorepro.experiments.awe import recordings as awe
    from audiorepro.experiments.awe.evaluate import ap_table, embeddings_vs_dtw
    from audiorepro.experiments.zerospeech import recordings as units
    from audiorepro.experiments.zerospeech.ensemble import train_units_ensemble
    from audiorepro.experiments.zerospeech.voice import (
        load_voice,
        resynthesize_folder,
        train_voice,
    )

    _checked_paths(args)
    command = (args.group, args.command)
    if command == ("segments", "table"):
        from audiorepro.data.recordings import write_folder_segments

        _output(args)
        path, rows, left_out, told = write_folder_segments(
            args.audio, args.out, word_of=args.word_of, speaker_of=args.speaker_of
        )
        if told:
            print(told)
        print(f"wrote {rows} whole-file rows to {path} ({left_out} files without a word left out)")
        print(f"{args.audio}: {scan_folder(args.audio).note()}")
    elif command == ("units", "train"):
        overrides = checked_sets(args, args.preset)
        plan = _output(args, overrides)
        if plan.reuse:
            run = units.load_units(args.out)
        else:
            run = _trained(
                args,
                "train.lr",
                lambda: _loader(args)(args.preset, overrides).train.lr,
                lambda: train_units_ensemble(
                    args.audio,
                    args.out,
                    models=args.models,
                    speaker_of=args.speaker_of,
                    preset=args.preset,
                    overrides=overrides,
                    progress=_progress(),
                ),
            )
            members = [m.name for m in run.members]
            _done(
                args, plan, [*UNITS_WRITES, *(f"{m}/{f}" for m in members for f in UNITS_WRITES)]
            )
        steps, losses = run.history["step"], run.history["loss"]
        n = len(run.speakers)
        print(f"trained on {n} speaker{'' if n == 1 else 's'}, {run.note}")
        print(f"{len(steps)} logged steps (last {steps[-1] if steps else 0}) -> {run.path}")
        print(run.normalisation)
        print(run.pairing)
        print(run.budget)
        print(f"final loss {losses[-1] if losses else float('nan'):.4f}")
        if run.ensemble:
            print(run.ensemble)
    elif command == ("units", "encode"):
        plan = _output(args)
        if plan.reuse:
            return
        run = units.load_units(args.run)
        rows = units.encode_units(
            run, args.audio, args.out, what=args.what, speaker_of=args.speaker_of
        )
        _done(args, plan, [f"{name}.txt" for name in rows])
        shift = units.output_frame_shift(run, args.what)
        files = f"{len(rows)} file{'' if len(rows) == 1 else 's'}"
        print(f"wrote {files} to {args.out} (one line every {shift:g} s)")
        print(f"{args.audio}: {scan_folder(args.audio).note()}")
    elif command == ("units", "voice"):
        units_run = units.load_units(args.run)
        overrides = checked_sets(args, units_run.preset)
        plan = _output(args, overrides)
        if plan.reuse:
            voice = load_voice(args.out)
        else:
            voice = _trained(
                args,
                "inverter_train.lr",
                lambda: _loader(args)(units_run.preset, overrides).inverter_train.lr,
                lambda: train_voice(
                    units_run, args.audio, args.out, overrides=overrides, progress=_progress()
                ),
            )
            _done(args, plan, VOICE_WRITES)
        losses = voice.history["loss"]
        used = voice.files if voice.files is not None else len(find_wavs(args.audio))
        print(
            f"trained the inverter {len(losses)} steps on {voice.pieces} pieces of "
            f"{used} files -> {voice.path}"
        )
        print(f"{args.audio}: {scan_folder(args.audio).note(voice.left_out, used=used)}")
        print(f"final loss {losses[-1] if losses else float('nan'):.4f}")
        if units_run.members:  # an inverter reads one codebook
            print(
                f"the voice speaks the units of the run's first model (seed "
                f"{units_run.config.seed}), one of its {1 + len(units_run.members)}"
            )
    elif command == ("units", "resynth"):
        plan = _output(args)
        if plan.reuse:
            return
        convergence = resynthesize_folder(args.voice, args.audio, args.out)
        _done(args, plan, [f"{name}.wav" for name in convergence])
        print(f"wrote {len(convergence)} wavs (16 kHz) to {args.out}")
        print(f"{args.audio}: {scan_folder(args.audio).note()}")
        print(
            "spectral convergence to the sources' magnitudes, mean "
            f"{float(np.mean(list(convergence.values()))):.4f}"
        )
    elif command == ("units", "bitrate"):
        from audiorepro.experiments.zerospeech.units_bitrate import submission_bitrate

        rate = submission_bitrate(args.submission_dir, audio=args.audio, filelist=args.filelist)
        if args.audio is not None:  # the durations' files, and what the scan left out
            print(f"{args.audio}: {scan_folder(args.audio).note()}")
        print(f"{rate + 0.0:.2f} bits/s")  # + 0.0: one symbol's -0.0 reads 0.00
    elif command == ("abx", "items"):
        _output(args)
        path, times = units.abx_items(args.segments, args.out, times=args.times, audio=args.audio)
        n = sum(1 for line in open(path, encoding="utf-8") if line.strip()) - 1
        hint = "score without --frame-shift" if times == "relative" else "score with --frame-shift"
        print(f"wrote {n} items ({times} times: {hint}) to {path}")
        print(WORD_RULE)
    elif command == ("abx", "score"):
        _abx_score(args)
    elif command == ("awe", "train"):
        overrides = checked_sets(args, args.preset)
        plan = _output(args, overrides)
        if plan.reuse:
            from audiorepro.experiments.awe.ensemble import recorded_run

            run = recorded_run(args.out)
        else:
            from audiorepro.experiments.awe.ensemble import train_ensemble

            run = _trained(
                args,
                "train.lr",
                lambda: _loader(args)(args.preset, overrides).train.lr,
                lambda: train_ensemble(
                    args.segments,
                    args.out,
                    models=args.models,
                    lexicon=args.lexicon,
                    dev=args.dev,
                    preset=args.preset,
                    overrides=overrides,
                    speeds=args.speeds,
                    warps=args.warps,
                    norm=args.norm,
                    again=not args.no_refit,
                    progress=_progress(),
                ),
            )
            members = [p.name for p in awe.run_members(args.out)[1:]]
            _done(args, plan, [*AWE_WRITES, *(f"{m}/{f}" for m in members for f in AWE_WRITES)])
        epochs = run.history.final_epoch
        print(f"trained {epochs} epoch{'' if epochs == 1 else 's'} -> {run.path}")
        print(run.development)
        print(run.augmentation)
        print(run.normalisation)
        if run.budget:
            print(run.budget)
        if sum(run.left_out.values()):
            splits = ", ".join(f"{split} {n}" for split, n in run.left_out.items())
            splits += f"; first: {run.first_short}" if run.first_short else ""
            print(
                f"left out {sum(run.left_out.values())} rows shorter than "
                f"{_loader(args)(args.preset, overrides).min_frames} frames of 10 ms ({splits})"
            )
        print(WORD_RULE)
        print(f"kept the weights of epoch {run.kept_epoch} (select: {run.selected})")
        if run.best_dev >= 1.0 and run.selected == "best":
            print(
                "warning: the development words reached AP 1 and cannot tell later epochs "
                "apart; give a larger --dev table, or --set select=final",
                file=sys.stderr,
            )
        if run.beside_dtw:
            print(run.beside_dtw)
        if run.refit:
            print(run.refit)
        if getattr(run, "ensemble", ""):
            print(run.ensemble)
        print(f"best dev cross-view AP {run.best_dev:.4f}")
    elif command == ("awe", "embed"):
        _output(args)
        arrays = awe.embed_table(args.run, args.segments, args.speeds)

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)

        atomic_write(args.out, write, say_faults=True)  # a full disk keeps the earlier file
        n = len(arrays["labels"])
        print(f"wrote {n} embedding{'' if n == 1 else 's'} to {args.out}")
        speeds = str(arrays["speeds"]).replace(",", ", ")
        print(
            f"each row's embedding averaged with its copies at speeds {speeds} ("
            + ("--speeds" if args.speeds is not None else "the speeds the run trained at")
            + "; --speeds 1: the row alone)"
            if speeds
            else "each row embedded alone (no speed copies"
            + (": --speeds 1)" if args.speeds is not None else " in training)")
        )
        if str(arrays["left_out"]):
            print(arrays["left_out"])
        print(WORD_RULE)
    elif command == ("awe", "ap"):
        ap = awe.embeddings_ap(args.embeddings)
        print(WORD_RULE)
        rows, why = (None, "") if args.no_baseline else awe.embedded_rows(args.embeddings)
        if rows is None:
            if why:
                print(f"no baseline: {why}")
            print(f"{ap:.4f}")
        else:
            labels = [r.word for r in rows]  # the embeddings' labels (embedded_rows checks)
            norm = awe.embedded_norm(args.embeddings)
            base = awe.rows_dtw_ap(rows, labels, norm=norm)
            versus = embeddings_vs_dtw(awe.embeddings_of(args.embeddings), labels, ap, base)
            print("\n".join(ap_table(ap, base, versus)))
    elif command == ("awe", "dtw"):
        base = awe.dtw_table_ap(args.segments, tokens=args.tokens, seed=args.seed, norm=args.norm)
        print(base["normalisation"])
        if args.norm is None:
            print(
                "awe ap of a run's embeddings reads the frames as that run does (its line "
                "says how): give --norm to match it"
            )
        if base["left_out"]:
            print(base["left_out"])
        print(
            f"{base['tokens']} segments, {base['num_pairs']} pairs, "
            f"{base['positives']} of one word"
        )
        print(WORD_RULE)
        print(f"{base['ap']:.4f}")
    else:  # pragma: no cover - argparse allows only the commands above
        raise AssertionError(command)


DEBUG = "AUDIOREPRO_DEBUG"
"""Set (``AUDIOREPRO_DEBUG=1``) to see the traceback of an error instead of its message."""

_MADE_BY = {
    "encode": "units train",
    "voice": "units train",
    "resynth": "units voice",
    "embed": "awe train",
}


def error_message(err: BaseException, made_by: str = "the command that made it") -> str:
    """One paragraph for the user: what went wrong, where, and what to do."""
    import errno

    from audiorepro.storage import CheckpointError

    if isinstance(err, KeyError) and err.args:
        text = str(err.args[0])
    elif isinstance(err, OSError) and err.filename is not None:  # raised by the system
        hints = {
            "EACCES": "check the permissions of the file and its folder, or give another path",
            "EPERM": "check the permissions of the file and its folder, or give another path",
            "ENOENT": "check the path",
            "ENOSPC": "free some space on that disk, or give a path on another one",
            "EROFS": "give a path on a writable disk",
            "EISDIR": "give a file, not a folder",
            "ENOTDIR": "a part of the path is a file, not a folder: check the path",
        }
        code = errno.errorcode.get(err.errno or 0, "")
        hint = hints.get(code, "check the path and try again")
        text = f"{err.filename}: {(err.strerror or str(err)).lower()}; {hint}"
    elif isinstance(err, CheckpointError):
        text = (
            f"{err}; the run folder is damaged or incomplete: train it again with "
            f"`audiorepro {made_by}` (into a new folder, or with --force)"
        )
    elif isinstance(err, _ERRORS):
        text = str(err)
    else:
        text = (
            f"{type(err).__name__}: {err}. This is an error the command does not know how to "
            f"explain: run it again with {DEBUG}=1 to see where it came from, and report it"
        )
    return "\n".join(line for line in text.splitlines() if line.strip())


def _run_printing_warnings(args: argparse.Namespace) -> None:
    """:func:`_run`, printing each warning that a score is weak (a handful of pairs, one
    speaker: :class:`~audiorepro.metrics.checks.ScoreWarning`) or that an input is most likely
    not what was meant (:class:`~audiorepro.data.recordings.InputWarning`) as one line
    ``audiorepro: warning: ...`` on stderr, every time it is warned; a file read but not whole
    (:class:`~audiorepro.features.audio.AudioWarning`) once, however often it is read."""
    import warnings

    from audiorepro.data.recordings import InputWarning
    from audiorepro.features.audio import AudioWarning
    from audiorepro.metrics.checks import ScoreWarning

    shown = warnings.showwarning
    once: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if issubclass(category, AudioWarning) and str(message) in once:
            return
        if issubclass(category, (ScoreWarning, InputWarning, AudioWarning)):
            once.add(str(message))
            print(f"audiorepro: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", ScoreWarning)
        warnings.simplefilter("always", InputWarning)
        warnings.simplefilter("always", AudioWarning)
        warnings.showwarning = show
        _run(args)


SIGPIPE_STATUS = 141
"""The exit status of a command whose output was piped into a reader that stopped reading
(``| head``): a shell's for a process ended by SIGPIPE (128 + 13), as ``cat`` or ``grep``
give; the work itself was done (``units encode`` wrote its folder)."""


def _reader_gone() -> int:
    """No error message: the rest of the output goes nowhere, quietly, at exit too (Python
    flushes standard output when it exits, which would raise again)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file under sys.stdout (a test's capture)
        pass
    return SIGPIPE_STATUS


RESUMED = {("units", "train"): "every 100 steps", ("awe", "train"): "every epoch"}
"""The commands that continue an interrupted run when given again, and how often they
checkpoint."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 done, 1 bad input, 2 bad command line).

    No traceback reaches the user: every error becomes one paragraph naming the file, line or
    field and what to do (``AUDIOREPRO_DEBUG=1`` shows the traceback instead)."""
    import contextlib

    parser = _parser()
    args = parser.parse_args(argv)
    for name, option in PATHS.items():
        value = getattr(args, name, None)
        if isinstance(value, str) and not value.strip():
            parser.error(f"{option} {value!r}: empty (an unset shell variable?); give a path")
    if getattr(args, "out", None) == "-":
        parser.error(
            "--out -: the commands write files, not standard output: give a file or folder "
            "name (./- if a file named '-' is meant)"
        )
    try:
        with contextlib.ExitStack() as args.held:  # the --out lock, freed when the command ends
            _run_printing_warnings(args)
            sys.stdout.flush()  # a reader gone (`| head`) is found here, not at exit
    except KeyboardInterrupt:
        every = RESUMED.get((args.group, args.command))
        print(
            "audiorepro: interrupted"
            + (
                "; nothing was written to --out, and the same command again continues from "
                f"the last checkpoint ({every})"
                if every
                else ""
            ),
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:  # `| head`: the reader has what it wanted and went away
        return _reader_gone()
    except Exception as err:  # noqa: BLE001 - the top-level guard: one paragraph, no traceback
        if os.environ.get(DEBUG):
            raise
        made_by = _MADE_BY.get(args.command, "the command that made it")
        print(f"audiorepro: error: {error_message(err, made_by)}", file=sys.stderr)
        return 1
    return 0
