"""What a killed command leaves, and the paths around ``--out``: unfinished copies of an output
are removed by the next command that writes it; a link and the folder it names take one lock;
an input that another command is writing is refused; a quoted ``~`` is the home folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_safety import one_paragraph, run_cli
from test_out_safety import SMOKE, noise_folder

from audiorepro.outputs import OutputBusy, being_written, output_lock


@pytest.fixture
def audio(tmp_path, monkeypatch):
    return noise_folder(tmp_path, monkeypatch)


def started(code: str, *args: object) -> subprocess.Popen:
    """A Python process running ``code`` (``sys.argv[1:]``: ``args``), once it printed a line."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    return child


def killed(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)  # nothing runs after: no finally, no atexit
    child.wait()


WRITING = """
import sys, time
from pathlib import Path
from audiorepro.storage import atomic_write, output_folder
out = Path(sys.argv[1])
with output_folder(out / "run") as tmp:
    (tmp / "model.safetensors").write_bytes(b"half")
    def write(path):
        path.write_text("half a table")
        print("ready", flush=True)
        time.sleep(60)
    atomic_write(out / "seg.tsv", write)
"""


def test_what_a_killed_command_left_beside_its_out_goes_with_the_next_command(
    audio, tmp_path, capsys
):
    """A command killed while writing leaves its temporary folder or file (nothing runs to
    remove it); the next command writing the same ``--out`` removes it and says so. A copy of
    a process still running, and a file of the user's of a like name, stay."""
    child = started(WRITING, tmp_path)
    left = sorted(p.name for p in tmp_path.glob(".*tmp*"))
    killed(child)
    assert len(left) == 2 and all(str(child.pid) in name for name in left), left
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = tmp_path / f".run.tmp-{live.pid}-0123abcd"
        running.mkdir()
        mine = tmp_path / ".run.tmp-notes"
        mine.write_text("the user's")
        code, out, err = run_cli(
            capsys, "units", "train", "--audio", audio, *SMOKE, "--out", tmp_path / "run"
        )
        assert code == 0, err
        removed = [name for name in left if name.startswith(".run.")]
        assert f"{tmp_path / 'run'}: removed {removed[0]}, an unfinished output" in out
        assert (tmp_path / "run" / "model.safetensors").read_bytes() != b"half"
        assert running.is_dir() and mine.read_text() == "the user's"
        assert not (tmp_path / removed[0]).exists()
        code, out, err = run_cli(
            capsys, "segments", "--audio", audio, "--out", tmp_path / "seg.tsv"
        )
        assert code == 0, err
        assert "removed .seg.tsv." in out
        assert sorted(p.name for p in tmp_path.glob(".*tmp*")) == sorted([mine.name, running.name])
    finally:
        live.kill()
        live.wait()


def test_a_link_to_a_folder_and_the_folder_are_one_out(tmp_path):
    real = tmp_path / "runs" / "a"
    real.mkdir(parents=True)
    alias = tmp_path / "latest"
    alias.symlink_to(real)
    with output_lock(real, command="units train", folder=True):
        with pytest.raises(OutputBusy, match=r"latest: another audiorepro command"):
            with output_lock(alias, command="units train", folder=True):
                pass
        assert being_written(alias) == ""  # this process's own lock: not another command
    with output_lock(alias, command="units train", folder=True):  # free again
        pass


HOLDING = """
import sys, time
from audiorepro.outputs import output_lock
with output_lock(sys.argv[1], command="units train", folder=True):
    print("ready", flush=True)
    time.sleep(60)
"""


def test_a_run_that_another_command_is_writing_is_not_read(audio, tmp_path, capsys):
    """``units train --force RUN`` replaces RUN's files one by one: ``units encode RUN`` in the
    meantime would read one model's codebook with another's settings. It is refused, naming
    the writer; once that writer is gone (here killed, its lock file left behind) it runs."""
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", run)
    assert code == 0, err
    child = started(HOLDING, run)
    try:
        assert f"pid {child.pid}" in being_written(run)
        code, _, err = run_cli(
            capsys, "units", "encode", run, "--audio", audio, "--out", tmp_path / "enc"
        )
        assert code == 1 and one_paragraph(err), err
        assert err.startswith(
            f"audiorepro: error: {run} (RUN): another audiorepro command is writing it now "
            f"(`units train`, pid {child.pid}, since "
        ), err
        assert "wait for it to end, then run this command again" in err
        assert not (tmp_path / "enc").exists()
    finally:
        killed(child)
    assert (tmp_path / ".run.lock").exists()  # a killed writer's lock: no writer any more
    assert being_written(run) == ""
    code, _, err = run_cli(
        capsys, "units", "encode", run, "--audio", audio, "--out", tmp_path / "enc"
    )
    assert code == 0, err
    assert len(list((tmp_path / "enc").glob("*.txt"))) == 4


def test_a_quoted_tilde_is_the_home_folder_not_a_folder_named_tilde(
    audio, tmp_path, capsys, monkeypatch
):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    os.rename(audio, home / "audio")
    code, _, err = run_cli(capsys, "segments", "--audio", "~/audio", "--out", "~/t/seg.tsv")
    assert code == 0, err
    assert (home / "t" / "seg.tsv").is_file()
    assert list(work.iterdir()) == []  # no folder named "~"
    code, _, err = run_cli(
        capsys, "abx", "items", "--segments", "~/t/seg.tsv", "--out", Path("~") / "t" / "w.item"
    )
    assert code == 0, err
    assert (home / "t" / "w.item").is_file() and list(work.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ("segments", "--audio", "{audio}", "--out", ""),
        ("units", "encode", "{audio}", "--audio", "{audio}", "--out", " "),
        ("awe", "embed", "run", "--segments", "", "--out", "e.npz"),
        ("abx", "score", "", "units"),
        ("segments", "--audio", "{audio}", "--out", "-"),
    ],
    ids=["segments-out", "units-encode-out", "awe-embed-segments", "abx-score-item", "dash"],
)
def test_an_empty_path_is_a_usage_error_not_the_current_folder(
    audio, tmp_path, capsys, monkeypatch, argv
):
    """``--out "$NOT_SET"`` is an empty string, which a path reads as ``.``: the command would
    write into the current folder (beside, or with --force over, the user's files)."""
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(SystemExit) as stopped:
        run_cli(capsys, *(a.format(audio=audio) for a in argv))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    said = "the commands write files, not standard output" if "-" in argv else "empty (an unset"
    assert said in err, err
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize("text", ["my own notes\n", '{"command": "mine"}\n'])
def test_a_command_json_of_the_users_is_named_among_what_force_replaces(
    audio, tmp_path, capsys, text
):
    """A ``command.json`` that audiorepro did not write (notes, another tool's JSON) is one of
    the user's files: the refusal says so and names it among what --force would replace."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "command.json").write_text(text)
    code, _, err = run_cli(capsys, "segments", "--audio", audio, "--out", tmp_path / "t.tsv")
    assert code == 0, err
    argv = ("abx", "items", "--segments", tmp_path / "t.tsv", "--out", out / "w.item")
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err  # a file beside it: nothing replaced
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", out)
    assert code == 1 and one_paragraph(err), err
    assert "(its command.json was not written by audiorepro)" in err
    assert "--force would replace command.json" in err
    assert "holds the output of `mine`" not in err
    assert (out / "command.json").read_text() == text


def test_abx_items_names_the_files_of_its_table_whatever_else_the_folder_holds(
    audio, tmp_path, capsys
):
    """``abx items --audio ROOT`` only names the table's files by their ids under ROOT: an
    .mp3 elsewhere under it, which ``units encode`` of ROOT would refuse, is no reason to
    refuse the items."""
    root = tmp_path / "corpus"
    (root / "other").mkdir(parents=True)
    (root / "other" / "podcast.mp3").write_bytes(b"ID3" + bytes(64))
    os.rename(audio, root / "base")
    table = tmp_path / "t.tsv"
    code, _, err = run_cli(capsys, "segments", "--audio", root / "base", "--out", table)
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "abx", "items", "--segments", table, "--audio", root, "--out", tmp_path / "w.item"
    )
    assert code == 0, err
    assert "wrote 4 items" in out
    code, _, err = run_cli(capsys, "units", "train", "--audio", root, *SMOKE, "--out",
                           tmp_path / "run")  # fmt: skip
    assert code == 1 and "podcast.mp3: 1 audio file(s) under" in err, err  # encoding: refused


def test_no_command_writes_into_another_commands_output_even_with_force(audio, tmp_path, capsys):
    """A units run given by mistake as the --out of `units encode`: with --force the units
    went in beside the run and the encode's record replaced the run's, so `units train` no
    longer knew its own folder. Refused, with or without --force; the run is as it was."""
    first, run = tmp_path / "first", tmp_path / "run"
    for folder in (first, run):
        code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out",
                               folder)  # fmt: skip
        assert code == 0, err
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    for force in ((), ("--force",)):
        code, _, err = run_cli(capsys, "units", "encode", first, "--audio", audio, "--out",
                               run, *force)  # fmt: skip
        assert code == 1 and one_paragraph(err), err
        assert (
            f"{run}: the folder holds the output of `units train` (its command.json says so), "
            "and `units encode` never writes into another command's output, even with --force"
        ) in err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    code, out, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE, "--out", run)
    assert code == 0 and "reusing it" in out, (out, err)
