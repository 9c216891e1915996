from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from audiorepro import reporting
from audiorepro.reporting import (
    LedgerError,
    PaperRow,
    format_mean_std,
    ledger_frame,
    paper_vs_ours,
    read_ledger,
    record_result,
)


def test_record_appends_one_line_with_provenance(tmp_path):
    path = tmp_path / "ledger.jsonl"
    rec = record_result(
        "03_zerospeech",
        "03_abx_bitrate",
        {"abx_across": np.float32(14.5), "bitrate": 400},
        preset="smoke",
        seed=1,
        config={"widths": (1, 2)},
        command="papermill page.ipynb",
        wall_time_s=1.5,
        tags={"K": 256},
        path=path,
    )
    record_result(
        "03_zerospeech", "03_abx_bitrate", {"abx_across": 15.5}, preset="smoke", seed=2, path=path
    )
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["metrics"] == {"abx_across": 14.5, "bitrate": 400}
    assert first["config"] == {"widths": [1, 2]}
    assert first["command"] == "papermill page.ipynb"
    assert set(first["env"]) >= {"git_sha", "packages", "device", "python"}
    assert first["env"]["packages"]["torch"]
    assert rec["tags"] == {"K": 256}


def test_default_ledger_location_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIOREPRO_RESULTS", str(tmp_path / "r"))
    record_result("c", "p", {"m": 1.0}, preset="smoke", seed=0)
    assert (tmp_path / "r" / "ledger.jsonl").exists()
    assert len(read_ledger()) == 1


def test_non_numeric_metric_rejected(tmp_path):
    with pytest.raises(TypeError, match="metric values must be numbers"):
        record_result("c", "p", {"m": "high"}, preset="smoke", seed=0, path=tmp_path / "l")


def test_malformed_ledger_line_names_line(tmp_path):
    path = tmp_path / "ledger.jsonl"
    record_result("c", "p", {"m": 1.0}, preset="smoke", seed=0, path=path)
    with open(path, "a") as fh:
        fh.write("{not json\n")
    with pytest.raises(LedgerError, match=r"ledger.jsonl:2: not valid JSON"):
        read_ledger(path)
    path.write_text(json.dumps({"chapter": "c"}) + "\n")
    with pytest.raises(LedgerError, match=r":1: missing key\(s\) page, metrics, preset, seed"):
        read_ledger(path)


def test_mean_std_formatting_by_hand():
    assert format_mean_std([1.0, 2.0, 3.0]) == "2.0 ± 1.0"  # sample std of 1,2,3 is 1
    assert format_mean_std([0.25], digits=2) == "0.25"
    with pytest.raises(ValueError):
        reporting.mean_std([])


def test_paper_vs_ours_reads_latest_run_per_seed_and_filters_tags(tmp_path):
    path = tmp_path / "ledger.jsonl"
    for seed, v in [(0, 0.10), (1, 0.20), (0, 0.30)]:  # seed 0 re-run: 0.30 replaces 0.10
        record_result(
            "01",
            "eval",
            {"mAP@10": v},
            preset="embedded",
            seed=seed,
            tags={"model": "passt"},
            path=path,
        )
    record_result(
        "01",
        "eval",
        {"mAP@10": 0.9},
        preset="embedded",
        seed=0,
        tags={"model": "cnn14"},
        path=path,
    )
    record_result(
        "01", "eval", {"mAP@10": 0.7}, preset="smoke", seed=0, tags={"model": "passt"}, path=path
    )
    rows = [
        PaperRow(
            "mAP@10 PaSST", "mAP@10", 29.0, "01", tags={"model": "passt"}, scale=100, finding="x"
        ),
        PaperRow("R@1 PaSST", "R@1", 18.0, "01", tags={"model": "passt"}),
    ]
    table = paper_vs_ours(rows, preset="embedded", path=path)
    assert list(table.columns) == ["metric", "paper", "ours", "preset", "seeds", "finding"]
    first = table.iloc[0]
    assert first["ours"] == "25.0 ± 7.1"  # mean(30, 20) = 25, sample std = 7.07
    assert first["seeds"] == "0, 1" and first["paper"] == "29.0"
    assert table.iloc[1]["ours"] == "not run"


def test_ledger_frame_one_row_per_metric(tmp_path):
    path = tmp_path / "ledger.jsonl"
    record_result("c", "p", {"a": 1.0, "b": 2.0}, preset="smoke", seed=3, tags={"k": 1}, path=path)
    frame = ledger_frame(path)
    assert sorted(frame["metric"]) == ["a", "b"]
    assert set(frame["tag.k"]) == {1}


# ------------------------------------------------------------------------------ findings


def test_finding_reproduces_beyond_the_spread():
    # better 10, 11, 12 (mean 11, std 1); worse 5, 6, 7 (mean 6, std 1): +5 > spread 1
    f = reporting.finding("A beats B", [10, 11, 12], [5, 6, 7], metric="mAP@10", digits=1)
    assert f.verdict == "reproduces" and f.reason == ""
    assert f.difference == pytest.approx(5.0) and f.spread == pytest.approx(1.0)
    assert f.sentence == "A beats B: reproduces, mAP@10 11.0 ± 1.0 vs 6.0 ± 1.0 (+5.0, 3/3 seeds)."
    assert str(f) == f.sentence


def test_finding_contradicts_beyond_the_spread_and_lower_is_better_flips_the_sign():
    assert reporting.finding("A beats B", [5, 6, 7], [10, 11, 12]).verdict == "contradicts"
    # an error metric: A's lower errors are the paper's direction
    f = reporting.finding("A beats B", [5, 6, 7], [10, 11, 12], higher_is_better=False)
    assert f.verdict == "reproduces" and f.difference == pytest.approx(5.0)


def test_finding_within_the_spread_is_inconclusive_and_says_so():
    # +1 difference, spread max(2, 0.5) = 2
    f = reporting.finding("A beats B", [8, 10, 12], [8.5, 9, 9.5])
    assert f.verdict == "inconclusive" and "within the seed spread" in f.sentence
    # a difference exactly equal to the spread is not beyond it
    tie = reporting.finding("A beats B", [1, 2, 3], [0, 1, 2])
    assert tie.difference == pytest.approx(tie.spread) and tie.verdict == "inconclusive"


def test_finding_with_a_run_not_above_chance_is_inconclusive_whatever_the_gap():
    f = reporting.finding("A beats B", [30, 31, 32], [2.8, 2.9, 3.0], chance=2.9, must_beat=8.7)
    assert f.verdict == "inconclusive"
    assert "(the compared setting does not reach the chance floor 8.70)" in f.sentence
    both = reporting.finding("A beats B", [3, 4, 5], [2, 3, 4], must_beat=8.7)
    assert both.reason == "neither compared run reaches the chance floor 8.70"
    # errors: must be below the floor
    err = reporting.finding(
        "A beats B", [20, 21, 22], [49, 50, 51], higher_is_better=False, must_beat=40
    )
    assert err.verdict == "inconclusive" and "compared setting" in err.reason


def test_finding_where_one_side_may_fail_is_inconclusive_only_when_neither_learned():
    # A failing worse side is the claim (a collapsed setting): it reproduces.
    f = reporting.finding(
        "A beats B", [30, 31, 32], [2.8, 2.9, 3.0], must_beat=8.7, both_must_learn=False
    )
    assert f.verdict == "reproduces"
    # The paper's better setting failed while the other learned: it contradicts.
    g = reporting.finding(
        "A beats B", [2.8, 2.9, 3.0], [30, 31, 32], must_beat=8.7, both_must_learn=False
    )
    assert g.verdict == "contradicts"
    both = reporting.finding(
        "A beats B", [3, 4, 5], [2, 3, 4], must_beat=8.7, both_must_learn=False
    )
    assert both.reason == "neither compared run reaches the chance floor 8.70"


def test_a_run_is_learned_by_its_metric_and_its_training_loss_decides_nothing():
    # chapter 01's "pretrained beats random text encoder": mAP@10 23.96 vs 12.90 with chance
    # 2.93, both far above 3 x chance (8.79), the random one with a training loss near ln(batch)
    f = reporting.finding(
        "pretrained beats random", [23.4, 24.0, 24.5], [12.0, 12.9, 13.8], chance=2.93,
        must_beat=3 * 2.93,
    )  # fmt: skip
    assert f.verdict == "reproduces" and f.reason == ""
    with pytest.raises(TypeError, match="losses"):
        reporting.finding("A beats B", [1, 2], [1, 2], losses=([4.0], [4.0]))  # type: ignore[call-arg]
    # the floor is reached at 3 x chance exactly (at least, or at most for an error)
    at = reporting.finding("A beats B", [30, 31, 32], [8.7, 8.7, 8.7], must_beat=8.7)
    assert at.verdict == "reproduces"
    below = reporting.finding("A beats B", [30, 31, 32], [8.6, 8.6, 8.6], must_beat=8.7)
    assert below.reason == "the compared setting does not reach the chance floor 8.70"
    err = reporting.finding(
        "A beats B", [10, 11, 12], [25, 25, 25], higher_is_better=False, must_beat=25.0
    )
    assert err.verdict == "reproduces"
    # a run at chance tests nothing, however large the gap
    c = reporting.finding("A beats B", [30, 31, 32], [2.9, 2.9, 3.0], chance=2.93, must_beat=8.79)
    assert c.verdict == "inconclusive" and "chance floor 8.79" in c.reason


def test_paper_rows_judge_by_the_metric_whatever_loss_was_recorded(tmp_path):
    path = tmp_path / "ledger.jsonl"
    for seed in range(3):
        for side, (m, loss) in {"a": (0.10 + seed / 100, 3.8), "b": (0.20, 1.0)}.items():
            record_result("c", "p", {"m": m, "loss": loss}, preset="smoke", seed=seed,
                          tags={"s": side}, path=path)  # fmt: skip
    row = PaperRow("A", "m", None, "c", {"s": "a"}, scale=100, claim="A beats B",
                   versus={"s": "b"}, must_beat=9.0)  # fmt: skip
    table = paper_vs_ours([row], preset="smoke", path=path)
    assert table["finding"][0].startswith("A beats B: contradicts, m 11.0 ± 1.0 vs 20.0")
    with pytest.raises(TypeError):
        PaperRow("A", "m", None, "c", loss_metric="loss")  # type: ignore[call-arg]
    floor = paper_vs_ours([dataclasses.replace(row, must_beat=15.0)], preset="smoke", path=path)
    assert floor["finding"][0].startswith(
        "A beats B: inconclusive (the paper's better setting does not reach the chance floor"
    )


def test_fails_judges_a_setting_against_the_floor_beyond_the_spread():
    # mean 1, std 0.1: below the floor 3 by more than the spread
    f = reporting.fails("N = 8 fails", [0.9, 1.0, 1.1], 3.0, metric="AP", digits=1)
    assert f.verdict == "reproduces" and f.reason == ""
    assert f.sentence == "N = 8 fails: reproduces, AP 1.0 ± 0.1 against the floor 3.0 (3 seeds)."
    assert reporting.fails("N = 8 fails", [9, 10, 11], 3.0).verdict == "contradicts"
    within = reporting.fails("N = 8 fails", [1, 3, 5], 3.5)
    assert (
        within.verdict == "inconclusive" and within.reason == "the floor is within the seed spread"
    )
    one = reporting.fails("N = 8 fails", [1.0], 3.0)
    assert one.verdict == "inconclusive" and "fewer than 2 seeds" in one.reason
    assert reporting.fails("N = 8 fails", [], 3.0).reason == "not run"
    # errors: failing is staying above the floor
    assert reporting.fails("fails", [49, 50, 51], 40, higher_is_better=False).verdict == (
        "reproduces"
    )


def test_finding_needs_seeds_and_values():
    one = reporting.finding("A beats B", [10], [5])
    assert one.verdict == "inconclusive" and "fewer than 2 seeds" in one.reason
    assert reporting.finding("A beats B", [], [5, 6]).sentence == (
        "A beats B: inconclusive, the paper's better setting not run."
    )
    assert reporting.finding("A beats B", [float("nan")] * 3, []).reason == "not run"


def test_paper_vs_ours_computes_the_finding_from_claim_and_versus(tmp_path):
    path = tmp_path / "ledger.jsonl"
    for seed, (a, b) in enumerate([(0.30, 0.10), (0.32, 0.11), (0.31, 0.12)]):
        record_result("c", "p", {"m": a}, preset="smoke", seed=seed, tags={"s": "a"}, path=path)
        record_result("c", "p", {"m": b}, preset="smoke", seed=seed, tags={"s": "b"}, path=path)
    rows = [
        PaperRow("A", "m", 40.0, "c", {"s": "a"}, scale=100, claim="A beats B", versus={"s": "b"}),
        PaperRow("B", "m", 30.0, "c", {"s": "b"}, scale=100),
    ]
    table = paper_vs_ours(rows, preset="smoke", path=path)
    assert table["ours"].tolist() == ["31.0 ± 1.0", "11.0 ± 1.0"]
    assert table["finding"][0].startswith("A beats B: reproduces, m 31.0 ± 1.0 vs 11.0 ± 1.0")
    assert table["finding"][1] == ""


def test_values_and_seed_table_read_the_newest_record_per_seed(tmp_path):
    path = tmp_path / "ledger.jsonl"
    record_result("c", "p", {"m": 0.1}, preset="smoke", seed=0, tags={"s": "a"}, path=path)
    record_result("c", "p", {"m": 0.2}, preset="smoke", seed=0, tags={"s": "a"}, path=path)
    record_result("c", "p", {"m": 0.4}, preset="smoke", seed=1, tags={"s": "a"}, path=path)
    records = read_ledger(path)
    got = reporting.values(
        records, chapter="c", preset="smoke", metric="m", tags={"s": "a"}, scale=100
    )
    assert got == pytest.approx([20.0, 40.0])
    table = reporting.seed_table(
        records,
        [("A", {"s": "a"}), ("none", {"s": "z"})],
        chapter="c",
        preset="smoke",
        metrics=["m"],
        scale=100,
        digits=1,
    )
    assert table.to_dict("records") == [
        {"setting": "A", "seeds": 2, "m": "30.0 ± 14.1"},
        {"setting": "none", "seeds": 0, "m": "not run"},
    ]


def test_records_carry_config_hash_rerunnable_command_and_wall_time(tmp_path, monkeypatch):
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(
        "AUDIOREPRO_COMMAND", "python -m audiorepro.pages run p.py OUT -p preset smoke"
    )
    a = record_result("c", "p", {"m": 1}, preset="smoke", seed=0, config={"lr": 1}, path=path)
    b = record_result("c", "p", {"m": 2}, preset="smoke", seed=0, config={"lr": 2}, path=path)
    assert a["command"].startswith("python -m audiorepro.pages run p.py")
    assert a["config_hash"] != b["config_hash"] and len(a["config_hash"]) == 16
    assert b["wall_time_s"] >= 0 and b["wall_time_source"] == "since the previous record"
    c = record_result("c", "p", {"m": 3}, preset="smoke", seed=1, wall_time_s=2.5, path=path)
    assert c["wall_time_s"] == 2.5 and c["wall_time_source"] == "measured"
    records = read_ledger(path)
    # a table picks the configuration and the page's seeds, never a stale record
    assert [r["metrics"]["m"] for r in reporting.select(records, chapter="c")] == [2, 3]
    old = reporting.select(records, chapter="c", config_hash=a["config_hash"])
    assert [r["metrics"]["m"] for r in old] == [1]
    assert [r["seed"] for r in reporting.select(records, chapter="c", seeds=[1, 2])] == [1]


def test_only_the_main_process_writes_the_ledger(tmp_path, monkeypatch):
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("RANK", "1")
    record_result("c", "p", {"m": 1}, preset="smoke", seed=0, path=path)
    assert not path.exists()
    monkeypatch.setenv("RANK", "0")
    record_result("c", "p", {"m": 1}, preset="smoke", seed=0, path=path)
    assert len(read_ledger(path)) == 1


def test_an_executed_page_records_the_command_that_reruns_it(tmp_path):
    from audiorepro.pages import execute_page

    page = tmp_path / "page.py"
    page.write_text(
        '# %% tags=["parameters"]\npreset: str = "embedded"\nn: int = 1\n\n# %%\n'
        "from audiorepro.reporting import record_result\n"
        'record_result("c", "p", {"m": n}, preset=preset, seed=0)\n'
    )
    execute_page(
        page,
        tmp_path / "out" / "page.ipynb",
        preset="smoke",
        parameters={"n": 4},
        cwd=tmp_path,
        env={"AUDIOREPRO_RESULTS": str(tmp_path / "res")},
    )
    (rec,) = read_ledger(tmp_path / "res" / "ledger.jsonl")
    assert rec["command"] == (
        f"python -m audiorepro.pages run {page} OUT.ipynb -p preset smoke -p n 4"
    )


def test_config_table_flattens_sections_to_dotted_fields_with_their_help():
    from audiorepro.config import field

    @dataclasses.dataclass(frozen=True)
    class Train:
        max_steps: int = field(600, help="optimizer steps")
        lr: float = field(1e-3, help="peak learning rate " + "x" * 80)

    @dataclasses.dataclass(frozen=True)
    class Config:
        seeds: tuple[int, ...] = field((0, 1, 2), help="one run per seed")
        train: Train = field(default_factory=Train, help="training section")
        name: str | None = None  # a field without help

    table = reporting.config_table(Config())
    assert list(table.index) == ["seeds", "train.max_steps", "train.lr", "name"]
    assert list(table.columns) == ["value", "help"]
    assert table.loc["seeds", "value"] == "0, 1, 2"
    assert table.loc["train.max_steps"].tolist() == ["600", "optimizer steps"]
    assert table.loc["name"].tolist() == ["None", ""]
    # shown whole: a long help text is not cut to pandas' 50 characters
    assert "x" * 80 in table._repr_html_() and "x" * 80 in repr(table)
    assert "..." not in table._repr_html_()
    with pytest.raises(TypeError, match="dataclass instance"):
        reporting.config_table(Config)


def test_finding_parts_read_back_every_sentence_shape():
    found = reporting.finding("A beats B", [3.0, 3.1, 3.2], [1.0, 1.1, 1.2], metric="mAP@10")
    parts = reporting.finding_parts(found.sentence)
    assert parts["claim"] == "A beats B" and parts["verdict"] == found.verdict == "reproduces"
    assert parts["reason"] == ""
    assert parts["numbers"].startswith("mAP@10 3.10 ± 0.10 vs 1.10 ± 0.10 (+2.00, 3/3 seeds")
    low = reporting.finding("A beats B", [3.0, 3.1], [1.0, 1.1], must_beat=2.0)
    parts = reporting.finding_parts(low.sentence)
    assert parts["verdict"] == "inconclusive" and parts["reason"] == low.reason
    assert "(chance floor" not in parts["reason"] and "chance floor 2.00" in parts["reason"]
    assert parts["numbers"].startswith("3.05")
    parts = reporting.finding_parts(reporting.finding("A beats B", [], []).sentence)
    assert (parts["verdict"], parts["reason"], parts["numbers"]) == (
        "inconclusive",
        "neither side not run",
        "",
    )
    failed = reporting.fails("depth 8 fails", [0.1, 0.12], 0.5, metric="AP")
    assert reporting.finding_parts(failed.sentence)["numbers"].endswith("(2 seeds)")
    with pytest.raises(ValueError, match="not a finding sentence"):
        reporting.finding_parts("a sentence of another kind")


def test_build_status_reads_page_times_bench_records_and_counts_tests(tmp_path):
    assert reporting.page_times(tmp_path / "page_times.json") is None  # no build yet
    (tmp_path / "page_times.json").write_text(
        json.dumps({"book/00_data/01_audio_features.py": 9.6, "book/04_awe/02_train.py": 274.5})
    )
    times = reporting.page_times(tmp_path / "page_times.json")
    assert times.to_dict("list") == {
        "page": ["book/00_data/01_audio_features.py", "book/04_awe/02_train.py"],
        "chapter": ["00_data", "04_awe"],
        "seconds": [9.6, 274.5],
    }
    assert reporting.bench_records(tmp_path / "none") == []
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "bench_b.json").write_text(json.dumps({"bench": "bench_b"}))
    (bench / "bench_a.json").write_text(json.dumps({"bench": "bench_a"}))
    assert [r["bench"] for r in reporting.bench_records(bench)] == ["bench_a", "bench_b"]
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text(
        "import pytest\n\ndef test_a():\n    pass\n\n"
        "@pytest.mark.parametrize('n', [1, 2, 3])\n@pytest.mark.parametrize('m', (1, 2))\n"
        "def test_b(n, m):\n    pass\n\n"
        "@pytest.mark.parametrize('p', PAGES)\ndef test_c(p):\n    pass\n\n"
        "class TestD:\n    def test_e(self):\n        pass\n\ndef helper():\n    pass\n"
    )
    (tests / "conftest.py").write_text("def test_not_a_test_file():\n    pass\n")
    assert reporting.count_tests(tests) == {
        "files": 1,
        "functions": 4,
        "cases": 1 + 6 + 1 + 1,
        "computed": 1,
    }


def test_findings_of_keeps_the_rows_with_a_verdict_and_mechanism_line_finds_their_checks():
    rows = [
        PaperRow("A", "m", 1.0, "c", tags={"s": "a"}, claim="A beats B", versus={"s": "b"}),
        PaperRow("B", "m", 0.5, "c", tags={"s": "b"}),
    ]
    records = [
        {"chapter": "c", "page": "p", "preset": "smoke", "seed": s, "tags": {"s": k},
         "metrics": {"m": v + s / 100}}
        for s in (0, 1, 2) for k, v in (("a", 3.0), ("b", 1.0))
    ]  # fmt: skip
    table = paper_vs_ours(rows, preset="smoke", records=records)
    found = reporting.findings_of(table)
    assert found.claim.tolist() == ["A beats B"] and found.verdict.tolist() == ["reproduces"]
    assert found.numbers[0] == "m 3.0 ± 0.0 vs 1.0 ± 0.0 (+2.0, 3/3 seeds)"
    assert (found.paper[0], found.seeds[0]) == ("1.0", "0, 1, 2")
    checks = pd.DataFrame(
        [
            {"finding": "A beats", "check": "size of A", "measured": "12"},
            {"finding": "C beats D", "check": "size of C", "measured": "3"},
            {"finding": "A beats B", "check": "cosine", "measured": "0.9", "reading": "close"},
        ]
    )
    assert reporting.mechanism_line("A beats B", checks) == ("size of A: 12; cosine: 0.9 (close)")
    assert reporting.mechanism_line("E beats F", checks) == ""
    assert reporting.mechanism_line("A beats B", None) == ""
