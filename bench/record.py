"""Run one benchmark and keep what it printed: ``bench/results/<bench>.json``.

``make bench`` runs every ``bench/bench_*.py`` through this, so the figures the benches print
are committed with when, where and at which commit they were produced, and the book's status
page (``book/reference/status.py``) shows them. The bench's output passes through unchanged;
its exit status is this command's, and a failed bench writes no record.

Run: ``python bench/record.py bench/bench_abx.py [ARGS...] [--results DIR]``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def git_sha() -> str:
    """The checkout's commit (with ``-dirty`` when it has uncommitted changes), or ""."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return ""
    return sha + ("-dirty" if dirty else "")


def record(bench: Path, args: list[str], results: Path = RESULTS) -> int:
    """Run ``bench`` with ``args``, echo its output, and write its record on success."""
    command = [sys.executable, str(bench), *args]
    start = time.perf_counter()
    lines = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        return proc.returncode
    results.mkdir(parents=True, exist_ok=True)
    entry = {
        "bench": bench.stem,
        "command": " ".join(["python", os.path.relpath(bench, REPO), *args]),
        "produced": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
        "seconds": round(seconds, 1),
        "output": "".join(lines),
    }
    out = results / f"{bench.stem}.json"
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(entry, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"[bench] {bench.stem}: {seconds:.1f} s -> {os.path.relpath(out, REPO)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    results = RESULTS
    if "--results" in argv:
        i = argv.index("--results")
        results = Path(argv[i + 1])
        del argv[i : i + 2]
    if not argv:
        print("usage: python bench/record.py BENCH.py [ARGS...] [--results DIR]", file=sys.stderr)
        return 2
    return record(Path(argv[0]), argv[1:], results)


if __name__ == "__main__":
    sys.exit(main())
