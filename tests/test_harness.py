"""The tests' own machinery: how long a test waits for the processes it starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, subprocess_timeout


def test_waits_scale_with_the_environment(monkeypatch):
    monkeypatch.delenv("AUDIOREPRO_TEST_TIMEOUT_SCALE", raising=False)
    assert subprocess_timeout(120) == 120
    monkeypatch.setenv("AUDIOREPRO_TEST_TIMEOUT_SCALE", "2.5")
    assert subprocess_timeout(120) == 300
    for bad in ("ten", "0", "-1", "nan"):
        monkeypatch.setenv("AUDIOREPRO_TEST_TIMEOUT_SCALE", bad)
        with pytest.raises(ValueError, match=f"AUDIOREPRO_TEST_TIMEOUT_SCALE='{bad}'"):
            subprocess_timeout(120)


def test_ci_runs_the_background_tests_at_the_lowest_priority_with_longer_waits():
    run = (REPO / ".ci" / "run").read_text()
    assert "session=(setsid)" in run  # a session of their own
    assert '"${session[@]}" bash .ci/background_tests ' in run
    assert "set -m" not in run  # job control would make setsid fork, and $! the wrong process
    script = (REPO / ".ci" / "background_tests").read_text()
    assert "echo 19 2> /dev/null > /proc/self/autogroup" in script
    # the second environment installs first, at the normal priority (a 5 GB download on a
    # fresh machine must not wait for the book's idle cores)
    install = script.index('make install PYTHON="$second"')
    assert install < script.index("> /proc/self/autogroup")
    assert "nice" not in script[script.rindex("\n", 0, install) : install]
    tests = script[script.index("AUDIOREPRO_TEST_TIMEOUT_SCALE=") :]
    assert tests.startswith("AUDIOREPRO_TEST_TIMEOUT_SCALE=10 ")
    assert "nice -n 19" in tests.split("make test", 1)[0]
    # the pages, the paper dry run and the comparisons of process arrangements run only in the
    # foreground, where make test runs every test
    assert "-m 'not notebook and not dry_run and not processes'" in tests
    assert "-m" not in _make_variable("PYTEST_ARGS")


def _make_variable(name):
    line = next(x for x in (REPO / "Makefile").read_text().splitlines() if x.startswith(name))
    return line.split("=", 1)[1].split("#", 1)[0]


def test_the_tests_left_to_the_foreground_are_comparisons_of_process_arrangements():
    marked = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "processes", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=subprocess_timeout(300),
    ).stdout.splitlines()
    ids = [line for line in marked if "::" in line]
    assert len(ids) >= 10
    # each compares runs spread over several processes with runs trained in one
    words = (
        "side_by_side",
        "two_processes",
        "two_workers",
        "train_ahead",
        "trains_ahead",
        "interrupted",
        "workers_do_not",
        "trains_what_its_page_needs",
        "fine_tunes_without",
    )
    assert [i for i in ids if not any(w in i for w in words)] == []


def test_every_wait_for_a_process_goes_through_the_scale():
    raw = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "tests").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "timeout=" in line and "timeout=subprocess_timeout(" not in line
    ]
    assert raw == []
