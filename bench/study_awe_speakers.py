"""How much does one more training speaker give acoustic word embeddings on unseen speakers?
Segments tables of chapter 04's embedded corpus, for the command. A study, not a bench.

    python bench/study_awe_speakers.py OUT [--corpus DIR] [--speakers 5]

Writes, from the corpus's word lists (``DIR``: ``<data>/embedded/embedded-seed0/words``, which
``make book`` builds; each list line ``word_S001-A_005823-005927``, times in 10 ms frames):

- ``OUT/train.tsv``: the tokens of the first ``--speakers`` training speakers (FSDD has six
  speakers, so ``awe train`` on five of them holds one out to choose the epoch on);
- ``OUT/dev.tsv``: the tokens of one speaker of the corpus's development speakers, for ``awe
  train --dev`` (the same number of training speakers, the epoch chosen on another voice);
- ``OUT/test.tsv``: the tokens of the corpus's eight test speakers, none of them trained on.

Then, per seed::

    audiorepro awe train --segments OUT/train.tsv --out RUN --set seed=S [--no-refit]
    audiorepro awe train --segments OUT/train.tsv --dev OUT/dev.tsv --out RUN --set seed=S
    audiorepro awe embed RUN --segments OUT/test.tsv --out test.npz
    audiorepro awe ap test.npz

Synthetic speech (eSpeak voices): it measures what the command does with few speakers, not
how it does on real voices.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from audiorepro.paths import data_dir

HEADER = "path\tword\tspeaker\tstart\tend\n"


def table(corpus: Path, split: str, speakers: set[str] | None) -> list[str]:
    """The table lines of a word list's tokens of ``speakers`` (all: ``None``)."""
    lines = []
    for line in (corpus / f"{split}.list").read_text().split():
        word, side, span = line.rsplit("_", 2)
        speaker = side.split("-")[0]
        if speakers is not None and speaker not in speakers:
            continue
        start, end = (int(v) / 100 for v in span.split("-"))
        wav = (corpus / "audio" / f"{side}.wav").resolve()
        lines.append(f"{wav}\t{word}\t{speaker}\t{start:.2f}\t{end:.2f}\n")
    return lines


def speakers_of(corpus: Path, split: str) -> list[str]:
    return sorted(
        {line.rsplit("_", 2)[1].split("-")[0] for line in open(corpus / f"{split}.list")}
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--speakers", type=int, default=5)
    args = parser.parse_args(argv)
    corpus = args.corpus or data_dir() / "embedded" / "embedded-seed0" / "words"
    if not (corpus / "train.list").is_file():
        raise SystemExit(f"{corpus}: no train.list (build the book, or give --corpus)")
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = {
        "train": set(speakers_of(corpus, "train")[: args.speakers]),
        "dev": set(speakers_of(corpus, "dev")[:1]),
        "test": None,
    }
    for split, speakers in chosen.items():
        lines = table(corpus, split, speakers)
        (args.out / f"{split}.tsv").write_text(HEADER + "".join(lines))
        who = "all speakers" if speakers is None else ", ".join(sorted(speakers))
        print(f"{args.out / f'{split}.tsv'}: {len(lines)} tokens of {who}")


if __name__ == "__main__":
    main()
