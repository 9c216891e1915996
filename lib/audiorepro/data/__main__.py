"""Command line for corpus manifests: ``python -m audiorepro.data check ...``.

``check <manifest dir> --root <audio dir> [--sources sources.yaml] [--checksums] [--samples]``
reads every ``<split>_recordings.jsonl[.gz]`` and ``<split>_supervisions.jsonl[.gz]`` in the
directory and prints every problem as ``path:line: field: message``, then a summary line that
says whether the audio was checked by its headers only or decoded (``--samples``: every file
decoded, NaN or infinite samples reported with the file). Exit status: 0 when
there is no problem, 1 when there is at least one, 2 for a usage error (bad arguments, a
missing directory, a malformed ``sources.yaml``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from audiorepro.data.manifests import check_manifest_dir, find_manifests
from audiorepro.data.sources import SourcesError, load_sources


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The top-level parser and its ``check`` subcommand parser."""
    parser = argparse.ArgumentParser(
        prog="python -m audiorepro.data",
        description="Check corpus manifests (lhotse JSONL) against the audio they describe.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="check a directory of manifests; print every problem; exit 1 if any",
        description=(
            "Read every <split>_recordings.jsonl[.gz] and <split>_supervisions.jsonl[.gz] in "
            "MANIFEST_DIR; check each line, each audio file's header (sampling rate, samples, "
            "channels), that supervisions lie within their recordings, and, with --sources, "
            "the corpus sampling rate and the expected counts per split. Only audio headers "
            "are read unless --samples. Prints one problem per line as path:line: field: "
            "message, then a summary."
        ),
    )
    check.add_argument("manifest_dir", type=Path, help="directory holding the manifests")
    check.add_argument(
        "--root",
        type=Path,
        required=True,
        help="audio root: relative sources in the manifests (and sources.yaml files) are "
        "resolved under it",
    )
    check.add_argument(
        "--sources",
        type=Path,
        help="the corpus's sources.yaml (expected counts, sampling rate, downloads)",
    )
    check.add_argument(
        "--checksums",
        action="store_true",
        help="also verify size and checksums of the sources.yaml files under --root "
        "(needs --sources; reads every byte)",
    )
    check.add_argument(
        "--samples",
        action="store_true",
        help="also decode every audio file and report undecodable data and NaN or infinite "
        "samples (reads every byte; without it only headers are checked)",
    )
    return parser, check


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 on bad arguments)."""
    parser, check = _parser()
    args = parser.parse_args(argv)
    if not args.manifest_dir.is_dir():
        check.error(f"{args.manifest_dir}: not a directory")
    if args.checksums and args.sources is None:
        check.error("--checksums needs --sources (the sources.yaml listing the files)")
    sources = None
    if args.sources is not None:
        try:
            sources = load_sources(args.sources)
        except SourcesError as err:
            check.error(str(err))

    problems = check_manifest_dir(
        args.manifest_dir,
        args.root,
        sources=sources,
        checksums=args.checksums,
        samples=args.samples,
    )
    for problem in problems:
        print(problem)
    splits = find_manifests(args.manifest_dir)
    summary = (
        f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {args.manifest_dir} "
        f"({len(splits)} split{'s' if len(splits) != 1 else ''}: "
        f"{', '.join(sorted(splits)) or 'none'}); "
        + (
            "every audio file decoded"
            if args.samples
            else "audio checked by headers only, samples not decoded (--samples decodes them)"
        )
    )
    print(summary)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
