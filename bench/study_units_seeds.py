"""Units of several seeds set side by side: one folder ``abx score`` reads. A study, not a bench.

    python bench/study_units_seeds.py OUT UNITS0 UNITS1 [UNITS2 ...]

Each ``UNITSk`` is a folder ``units encode`` wrote of the same audio (``--what vectors``, or
``--what kmeans`` for the baseline's side), from runs of other seeds. For every ``.txt`` of the
first, ``OUT`` gets the same file whose lines are the folders' vectors, each scaled to unit
length, set side by side and divided by the square root of their number, so that the cosine of
two lines is the mean of the folders' cosines. Then ``audiorepro abx score ITEMS OUT`` (no
baseline beside it: combine the runs' ``--what kmeans`` folders the same way for a fair one).
Measured on two real pairs of voices (Spanish, French Asterisk prompts; session note, stop 55):
the three seeds' units 5.07 % and 12.17 %, their k-means units combined 4.71 % and 14.39 %.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from audiorepro.experiments.zerospeech.recordings import models_joined


def combined(folders: list[Path], name: Path) -> np.ndarray:
    """The lines of ``name`` in every folder, unit length, side by side, over sqrt(count): what
    ``units encode`` writes of a run of several models (:func:`models_joined`)."""
    parts = [np.loadtxt(folder / name, ndmin=2) for folder in folders]
    lengths = {len(p) for p in parts}
    if len(lengths) != 1:
        raise ValueError(f"{name}: {sorted(lengths)} lines in the folders: not of the same audio")
    return models_joined(parts, "vectors")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args(argv)
    names = sorted(p.relative_to(args.folders[0]) for p in args.folders[0].rglob("*.txt"))
    for name in names:
        (args.out / name).parent.mkdir(parents=True, exist_ok=True)
        np.savetxt(args.out / name, combined(args.folders, name), fmt="%.7g")
    print(f"wrote {len(names)} files of {len(args.folders)} folders side by side to {args.out}")


if __name__ == "__main__":
    main()
