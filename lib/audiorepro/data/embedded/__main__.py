"""``python -m audiorepro.data.embedded generate --preset {smoke,embedded} --seed S --out DIR``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from audiorepro.data.embedded.generate import CORPORA, PRESETS, ensure_corpora


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m audiorepro.data.embedded")
    sub = parser.add_subparsers(dest="cmd", required=True)
    gen = sub.add_parser("generate", help="generate (or reuse) the embedded corpora")
    gen.add_argument("--preset", default="embedded", choices=PRESETS)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--out", default=None, help="default: $AUDIOREPRO_DATA/embedded/<preset>-seed<S>"
    )
    gen.add_argument("--only", action="append", choices=CORPORA, help="one corpus (repeatable)")
    args = parser.parse_args(argv)
    try:
        ensure_corpora(args.preset, args.seed, out=args.out, only=args.only or CORPORA)
    except (ValueError, OSError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
