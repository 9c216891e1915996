"""Where do a units run's ABX points go? A study, not a bench.

    python bench/study_units_layers.py RUN TEST ITEMS [--speaker-of parent]

``RUN`` is a folder ``audiorepro units train`` wrote, ``TEST`` the audio folder the item file
``ITEMS`` was made from (``audiorepro abx items``). The script scores, on the same items (word
ABX across speakers, angular distance, whole files), each step from the input to the units:

- the input frames as the model reads them (normalised as it was trained), every 10 ms;
- those frames averaged to the code rate (what the k-means baseline quantises);
- the k-means units of the run (``units train``'s baseline);
- the encoder's continuous output, before the codebook;
- the units (codebook vectors), what ``units encode`` writes.

The step between two lines is what the frame rate, the encoder and each quantiser cost. The
Reference's "Your own recordings" page gives the numbers on the Spanish Asterisk voices.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from audiorepro.data.speech_segments import average_frames
from audiorepro.experiments.zerospeech.recordings import load_units, unit_rows
from audiorepro.metrics.abx import abx_error


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("--speaker-of", default=None)
    args = parser.parse_args(argv)
    run = load_units(args.run)
    frames = unit_rows(run, args.test, "frames", args.speaker_of)
    rows = {
        "input frames (10 ms)": frames,
        f"frames averaged to the code rate ({run.model.cfg.stride} frames)": {
            n: average_frames(x, run.model.cfg.stride) for n, x in frames.items()
        },
        "k-means units": unit_rows(run, args.test, "kmeans", args.speaker_of),
    }
    quantizer = run.model.quantizer
    quantize = quantizer.forward
    quantizer.forward = lambda z, mask: (quantize(z, mask)[0], z)  # the vectors: z itself
    rows["encoder output (before the codebook)"] = unit_rows(
        run, args.test, "vectors", args.speaker_of
    )
    quantizer.forward = quantize
    rows["units (codebook vectors)"] = unit_rows(run, args.test, "vectors", args.speaker_of)
    for name, features in rows.items():
        print(f"{name:<48} {abx_error(features, args.items, mode='across'):6.2f} %", flush=True)


if __name__ == "__main__":
    main()
