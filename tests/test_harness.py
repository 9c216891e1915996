"""The tests' own machinery: how long a test waits for the processes it starts."""

from __future__ import annotations

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


def test_every_wait_for_a_process_goes_through_the_scale():
    raw = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "tests").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "timeout=" in line and "timeout=subprocess_timeout(" not in line
    ]
    assert raw == []
