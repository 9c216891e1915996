"""The real speech that ships with the book: two Italian voices of the Asterisk telephone system,
cut from their Debian packages into ``book/real_speech/italian/``.

The pages that try the ``audiorepro`` command on real recordings read that folder; this recipe
wrote it, and rebuilds it from the packages' extracted trees so that anyone can check it::

    dpkg-deb -x asterisk-core-sounds-it-wav_1.6.1-1_all.deb carlo
    dpkg-deb -x asterisk-prompt-it-menardi-wav_1%3a1.4.22+mm20110907-3.1_all.deb menardi
    python -m audiorepro.data.recipes.asterisk carlo menardi

What it takes: the number words (``digits/``) both speakers recorded, all of them, and every
eighth of the other prompts both recorded (sorted by name) that hold sound. The samples are the
packages' own (8 kHz, 16 bit), written losslessly as FLAC; ``numbers.tsv`` lists the number
words as a segments table (:func:`audiorepro.data.recordings.read_segments`, whole files).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import soundfile as sf

from audiorepro.paths import repo_root

SOUNDS = {
    "carlo": "usr/share/asterisk/sounds/it_IT_m_Carlo",
    "menardi": "usr/share/asterisk/sounds/it_IT_f_Menardi",
}
"""Where each speaker's prompts lie in the extracted tree of their package."""
EVERY = 8
"""One prompt in ``EVERY`` (by name) is kept: what keeps the folder a few MB."""


def italian_folder() -> Path:
    """``book/real_speech/italian``: the subset the book ships."""
    return repo_root() / "book" / "real_speech" / "italian"


def _silent(path: Path) -> bool:
    samples, _ = sf.read(path, dtype="int16")
    return not np.any(samples)


def write_subset(trees: Mapping[str, Path], out: Path) -> dict[str, int]:
    """Write the subset of the packages extracted under ``trees`` (``{speaker: root}``, the
    speakers of :data:`SOUNDS`) to ``out``: ``prompts/<speaker>/*.flac``,
    ``numbers/<speaker>/*.flac`` and ``numbers.tsv``. Returns how many prompts and number words
    each speaker got."""
    roots = {speaker: Path(trees[speaker]) / SOUNDS[speaker] for speaker in SOUNDS}
    for speaker, root in roots.items():
        if not root.is_dir():
            raise FileNotFoundError(
                f"{root}: no prompts of {speaker} (expected {SOUNDS[speaker]})"
            )
    numbers = sorted(
        set.intersection(*({p.stem for p in r.glob("digits/*.wav")} for r in roots.values()))
    )
    prompts = sorted(
        set.intersection(*({p.stem for p in r.glob("*.wav")} for r in roots.values()))
    )
    prompts = [n for n in prompts if not any(_silent(r / f"{n}.wav") for r in roots.values())]
    prompts = prompts[::EVERY]
    rows = ["path\tword\tspeaker\tstart\tend"]  # whole files: no times
    for speaker, root in roots.items():
        for part, names, folder in (
            ("prompts", prompts, root),
            ("numbers", numbers, root / "digits"),
        ):
            (out / part / speaker).mkdir(parents=True, exist_ok=True)
            for name in names:
                samples, rate = sf.read(folder / f"{name}.wav", dtype="int16")
                sf.write(out / part / speaker / f"{name}.flac", samples, rate, format="FLAC")
        rows += [f"numbers/{speaker}/{n}.flac\t{n}\t{speaker}\t\t" for n in numbers]
    (out / "numbers.tsv").write_text("\n".join(rows) + "\n")
    return {"prompts": len(prompts), "numbers": len(numbers)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("carlo", type=Path, help="extracted asterisk-core-sounds-it-wav")
    parser.add_argument("menardi", type=Path, help="extracted asterisk-prompt-it-menardi-wav")
    parser.add_argument("--out", type=Path, default=None, help="default: the book's folder")
    args = parser.parse_args(argv)
    out = args.out or italian_folder()
    counts = write_subset({"carlo": args.carlo, "menardi": args.menardi}, out)
    print(f"{out}: {counts['prompts']} prompts and {counts['numbers']} number words a speaker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
