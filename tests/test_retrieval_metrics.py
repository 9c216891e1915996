"""Retrieval metrics against a brute-force reference written here, hand-computed cases and ties."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from audiorepro.metrics.checks import ScoreError, ScoreWarning
from audiorepro.metrics.retrieval import (
    audio_to_text_metrics,
    jackknife_ci,
    per_query_metrics,
    read_submission_csv,
    relevant_ranks,
    retrieval_metrics,
    score_submission,
    top_k_indices,
    write_submission_csv,
)

TIES = ("index", "pessimistic", "optimistic")


def brute_force(scores, relevant_sets, ties, ks=(1, 5, 10)):
    """Sort every query's items with an explicit key, then apply the DCASE formulas."""
    scores = np.asarray(scores, dtype=np.float64)
    recalls = {k: [] for k in ks}
    aps = []
    for j, row in enumerate(scores):
        rel = set(relevant_sets[j])
        items = list(range(len(row)))
        if ties == "index":
            items.sort(key=lambda i: (-row[i], i))
        elif ties == "pessimistic":
            items.sort(key=lambda i: (-row[i], i in rel, i))
        else:
            items.sort(key=lambda i: (-row[i], i not in rel, i))
        hits = [pos + 1 for pos, i in enumerate(items) if i in rel]
        for k in ks:
            recalls[k].append(sum(h <= k for h in hits) / len(rel))
        ap = sum((n + 1) / h for n, h in enumerate(hits) if h <= 10) / len(rel)
        aps.append(ap)
    out = {"mAP@10": float(np.mean(aps))}
    out.update({f"R@{k}": float(np.mean(recalls[k])) for k in ks})
    return out


def assert_metrics_equal(ours, ref):
    assert ours.keys() == ref.keys()
    for key in ref:
        assert ours[key] == pytest.approx(ref[key], abs=1e-12), key


# --------------------------------------------------------------------------------------------
# one relevant item per query (text-to-audio)


def test_hand_computed_single_relevant():
    # query 0: relevant item 2 ranks 1st; query 1: item 0 ranks 3rd; query 2: item 1 ranks 2nd.
    scores = np.array([[0.1, 0.2, 0.9, 0.3], [0.2, 0.8, 0.5, 0.1], [0.3, 0.7, 0.9, 0.1]])
    targets = [2, 0, 1]
    np.testing.assert_array_equal(relevant_ranks(scores, targets), [1, 3, 2])
    m = retrieval_metrics(scores, targets, ks=(1, 2, 5))
    assert m["R@1"] == pytest.approx(1 / 3)
    assert m["R@2"] == pytest.approx(2 / 3)
    assert m["R@5"] == pytest.approx(1.0)
    assert m["mAP@10"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)
    assert list(m) == ["mAP@10", "R@1", "R@2", "R@5"]


def test_rank_beyond_ten_gives_zero_ap():
    scores = np.tile(np.arange(12, 0, -1, dtype=np.float32), (1, 1))  # item i ranks i + 1
    m = retrieval_metrics(scores, [10])  # rank 11
    assert m == {"mAP@10": 0.0, "R@1": 0.0, "R@5": 0.0, "R@10": 0.0}
    m = retrieval_metrics(scores, [9])  # rank 10
    assert m == {"mAP@10": pytest.approx(0.1), "R@1": 0.0, "R@5": 0.0, "R@10": 1.0}


def test_ties_hand_computed():
    # All four items tie: the target (index 2) ranks 3rd, 4th or 1st depending on the rule.
    scores = np.zeros((1, 4))
    assert relevant_ranks(scores, [2], ties="index")[0] == 3
    assert relevant_ranks(scores, [2], ties="pessimistic")[0] == 4
    assert relevant_ranks(scores, [2], ties="optimistic")[0] == 1
    # One item strictly better, target ties with item 3 (after it in index order).
    scores = np.array([[0.5, 0.9, 0.5, 0.5]])
    assert relevant_ranks(scores, [2], ties="index")[0] == 3  # 1 better + item 0 before it
    assert relevant_ranks(scores, [2], ties="pessimistic")[0] == 4
    assert relevant_ranks(scores, [2], ties="optimistic")[0] == 2


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", range(4))
def test_single_relevant_matches_brute_force(ties, seed):
    rng = np.random.default_rng(seed)
    n_queries, n_items = 37, 23
    # Few distinct values, so ties are frequent; more than _BLOCK rows in one case.
    scores = rng.integers(0, 4, size=(n_queries, n_items)).astype(np.float32)
    if seed == 3:
        scores = rng.integers(0, 6, size=(300, 40)).astype(np.float16)
        n_queries, n_items = scores.shape
    targets = rng.integers(0, n_items, size=n_queries)
    ours = retrieval_metrics(scores, targets, ks=(1, 3, 5, 10), ties=ties)
    ref = brute_force(scores, [[t] for t in targets], ties, ks=(1, 3, 5, 10))
    assert_metrics_equal(ours, ref)


def test_torch_input_and_dtypes_agree():
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((20, 15)).astype(np.float32)
    targets = rng.integers(0, 15, size=20)
    ref = retrieval_metrics(scores, targets)
    assert retrieval_metrics(torch.from_numpy(scores), torch.from_numpy(targets)) == ref
    # bfloat16 rounding creates ties; they must be resolved as in the float32 copy of it.
    bf = torch.from_numpy(scores).bfloat16()
    assert retrieval_metrics(bf, targets) == retrieval_metrics(bf.float().numpy(), targets)


def test_metrics_are_fractions_and_monotone():
    rng = np.random.default_rng(2)
    scores = rng.standard_normal((50, 30))
    m = retrieval_metrics(scores, rng.integers(0, 30, 50))
    assert 0.0 <= m["R@1"] <= m["R@5"] <= m["R@10"] <= 1.0
    assert m["R@1"] <= m["mAP@10"] <= m["R@10"]


def test_perfect_and_worst_scores():
    scores = np.eye(12)
    assert retrieval_metrics(scores, np.arange(12)) == {
        "mAP@10": 1.0,
        "R@1": 1.0,
        "R@5": 1.0,
        "R@10": 1.0,
    }
    assert retrieval_metrics(-scores, np.arange(12))["R@10"] == 0.0  # rank 12 > 10


@pytest.mark.parametrize(
    ("scores", "targets", "message"),
    [
        (np.zeros(5), [0], "2-D"),
        (np.zeros((2, 3)), [0], "one item index per query"),
        (np.zeros((2, 3)), [0, 3], "query 1 has target 3"),
        (np.zeros((2, 3)), [0, -1], "query 1 has target -1"),
        (np.zeros((2, 3)), [0.0, 1.0], "integer"),
        (np.array([[0.0, np.nan, 1.0], [0, 0, 0]]), [0, 1], "NaN"),
        (np.zeros((0, 3)), np.zeros(0, dtype=int), "at least one query"),
    ],
)
def test_bad_input_is_a_clear_error(scores, targets, message):
    with pytest.raises(ValueError, match=message):
        retrieval_metrics(scores, targets)


def test_bad_ties_and_ks():
    with pytest.raises(ValueError, match="ties must be one of"):
        retrieval_metrics(np.zeros((1, 2)), [0], ties="random")
    with pytest.raises(ValueError, match="ks must be positive"):
        retrieval_metrics(np.zeros((1, 2)), [0], ks=(0,))


# --------------------------------------------------------------------------------------------
# several relevant items per query (audio-to-text)


def test_audio_to_text_hand_computed():
    # One audio, five relevant captions (0..4) among 8; order by score: 5, 0, 6, 1, 2, 7, 3, 4.
    scores = np.array([[0.9, 0.7, 0.6, 0.3, 0.2, 1.0, 0.8, 0.4]])
    m = audio_to_text_metrics(scores, [[0, 1, 2, 3, 4]], ks=(1, 5, 10))
    # relevant ranks 2, 4, 5, 7, 8
    assert m["R@1"] == 0.0
    assert m["R@5"] == pytest.approx(3 / 5)
    assert m["R@10"] == 1.0
    assert m["mAP@10"] == pytest.approx((1 / 2 + 2 / 4 + 3 / 5 + 4 / 7 + 5 / 8) / 5)


def test_audio_to_text_divides_by_all_relevant_not_by_ten():
    # 12 relevant items, all ranked first: only the 10 in the top 10 count, divided by 12.
    scores = np.concatenate([np.full(12, 1.0), np.zeros(3)])[None, :]
    m = audio_to_text_metrics(scores, [list(range(12))])
    assert m["mAP@10"] == pytest.approx(10 / 12)
    assert m["R@10"] == pytest.approx(10 / 12)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", range(3))
def test_audio_to_text_matches_brute_force(ties, seed):
    rng = np.random.default_rng(seed)
    n_audio, n_caps = 9, 45
    scores = rng.integers(0, 3, size=(n_audio, n_caps)).astype(np.float64)
    if seed == 2:
        n_audio, n_caps = 140, 30  # more rows than one block
        scores = rng.integers(0, 5, size=(n_audio, n_caps)).astype(np.float32)
    relevant = [
        sorted(rng.choice(n_caps, size=rng.integers(1, 7), replace=False).tolist())
        for _ in range(n_audio)
    ]
    ours = audio_to_text_metrics(scores, relevant, ties=ties)
    assert_metrics_equal(ours, brute_force(scores, relevant, ties))
    mask = np.zeros(scores.shape, dtype=bool)
    for a, r in enumerate(relevant):
        mask[a, r] = True
    assert audio_to_text_metrics(scores, mask, ties=ties) == ours


@pytest.mark.parametrize("ties", TIES)
def test_one_relevant_audio_to_text_equals_retrieval_metrics(ties):
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 4, size=(30, 12)).astype(np.float32)
    targets = rng.integers(0, 12, size=30)
    a2t = audio_to_text_metrics(scores, [[t] for t in targets], ties=ties)
    assert a2t == pytest.approx(retrieval_metrics(scores, targets, ties=ties), abs=1e-12)


def test_clotho_layout_audio_to_text():
    # 4 audios x 20 captions, caption c belongs to audio c // 5 (ClothoV2 ordering).
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((4, 20))
    relevant = [list(range(5 * a, 5 * a + 5)) for a in range(4)]
    assert_metrics_equal(
        audio_to_text_metrics(scores, relevant), brute_force(scores, relevant, "index")
    )


@pytest.mark.parametrize(
    ("relevant", "message"),
    [
        ([[0], [1]], "each of the 3 queries"),
        ([[0], [], [1]], "query 1 has no relevant item"),
        ([[0], [4], [1]], r"relevant\[1\] has an index outside"),
        ([[0], [1, 1], [2]], "twice"),
        (np.zeros((3, 4), dtype=bool), "query 0 has no relevant item"),
        (np.ones((2, 4), dtype=bool), "shape of scores"),
    ],
)
def test_audio_to_text_bad_input(relevant, message):
    with pytest.raises(ValueError, match=message):
        audio_to_text_metrics(np.zeros((3, 4)), relevant)


# --------------------------------------------------------------------------------------------
# submission CSV


def test_top_k_indices_breaks_ties_by_index():
    scores = np.array([[0.5, 0.9, 0.5, 0.1, 0.5]])
    np.testing.assert_array_equal(top_k_indices(scores, 4), [[1, 0, 2, 4]])


def write_gt(path, file_names, captions):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["file_name"] + [f"caption_{i}" for i in range(1, 6)])
        for a, name in enumerate(file_names):
            w.writerow([name] + captions[5 * a : 5 * a + 5])


def test_submission_roundtrip_scores_like_retrieval_metrics(tmp_path):
    rng = np.random.default_rng(0)
    n_audio = 14
    file_names = [f"clip {a:02d}, take 1.wav" for a in range(n_audio)]
    captions = [f'a "sound", number {c}' for c in range(5 * n_audio)]
    scores = rng.integers(0, 5, size=(5 * n_audio, n_audio)).astype(np.float32)
    targets = np.arange(5 * n_audio) // 5
    sub = write_submission_csv(tmp_path / "out" / "sub.csv", captions, file_names, scores)
    header = sub.read_text(encoding="utf-8").splitlines()[0]
    assert header == "caption," + ",".join(f"file_name_{i}" for i in range(1, 11))
    rows = read_submission_csv(sub)
    assert list(rows) == captions
    top = top_k_indices(scores, 10)
    assert rows[captions[7]] == [file_names[i] for i in top[7]]
    gt = tmp_path / "gt.csv"
    write_gt(gt, file_names, captions)
    assert score_submission(gt, sub) == pytest.approx(retrieval_metrics(scores, targets))


def test_submission_errors(tmp_path):
    scores = np.zeros((2, 10))
    with pytest.raises(ValueError, match="repeats caption 0"):
        write_submission_csv(tmp_path / "a.csv", ["x", "x"], [str(i) for i in range(10)], scores)
    with pytest.raises(ValueError, match="at least k=10"):
        write_submission_csv(tmp_path / "a.csv", ["x", "y"], ["0"] * 5, np.zeros((2, 5)))
    bad = tmp_path / "bad.csv"
    bad.write_text("caption,file_name_1\nx,a.wav\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.csv:1: header"):
        read_submission_csv(bad)
    short = tmp_path / "short.csv"
    short.write_text(
        "caption," + ",".join(f"file_name_{i}" for i in range(1, 11)) + "\nx,a.wav\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"short.csv:2: expected 11 fields"):
        read_submission_csv(short)
    sub = write_submission_csv(
        tmp_path / "sub.csv", ["c0", "c1"], [f"f{i}" for i in range(10)], scores
    )
    gt = tmp_path / "gt.csv"
    write_gt(gt, ["f0"], ["c0", "c1", "c2", "c3", "c4"])
    with pytest.raises(ValueError, match="5 problem") as info:
        score_submission(gt, sub)
    for caption in ("c2", "c3", "c4"):
        assert f"sub.csv: no row for ground-truth caption '{caption}'" in str(info.value)
    assert "sub.csv:2: 9 file name(s) not in" in str(info.value)


def _csv_rows(path, rows):
    header = "caption," + ",".join(f"file_name_{i}" for i in range(1, 11))
    path.write_text("\n".join([header] + [",".join(r) for r in rows]) + "\n", encoding="utf-8")
    return path


def test_the_scorer_refuses_what_the_official_script_would_score(tmp_path):
    names = [f"f{i}.wav" for i in range(10)]
    captions = [f"caption {c}" for c in range(50)]
    gt = tmp_path / "gt.csv"
    write_gt(gt, names, captions)
    good = [[c] + names for c in captions]
    # every file name unknown: the official script scores 0.00
    unknown = _csv_rows(
        tmp_path / "unknown.csv", [[c] + [f"x{i}.wav" for i in range(10)] for c in captions]
    )
    with pytest.raises(
        ValueError, match=r"50 problem\(s\)(.|\n)*unknown.csv:2: 10 file name\(s\) not in"
    ):
        score_submission(gt, unknown)
    # a caption that is not in the ground truth
    extra = _csv_rows(tmp_path / "extra.csv", good + [["not a caption"] + names])
    with pytest.raises(ValueError, match=r"extra.csv:52: caption 'not a caption' is not in"):
        score_submission(gt, extra)
    # one file repeated ten times in a row: the official script gives 100.00
    repeated = _csv_rows(tmp_path / "rep.csv", [[captions[0]] + [names[0]] * 10] + good[1:])
    with pytest.raises(
        ValueError, match=r"rep.csv:2: file\(s\) \['f0.wav'\] listed more than once"
    ):
        score_submission(gt, repeated)
    assert score_submission(gt, _csv_rows(tmp_path / "ok.csv", good))["R@10"] == 1.0


def test_scoring_cli(tmp_path, capsys):
    from audiorepro.metrics.retrieval import main

    names = [f"f{i}.wav" for i in range(10)]
    captions = [f"caption {c}" for c in range(50)]
    scores = np.zeros((50, 10))
    scores[np.arange(50), np.arange(50) // 5] = 1.0  # every caption finds its audio first
    sub = write_submission_csv(tmp_path / "sub.csv", captions, names, scores)
    gt = tmp_path / "gt.csv"
    write_gt(gt, names, captions)
    assert main([str(gt), str(sub)]) == 0
    out = capsys.readouterr().out.split()
    assert out == ["mAP@10", "100.00", "R@1", "100.00", "R@5", "100.00", "R@10", "100.00"]
    assert main([str(gt), str(tmp_path / "missing.csv")]) == 1
    assert "missing.csv" in capsys.readouterr().err


def test_per_query_metrics_average_to_retrieval_metrics():
    rng = np.random.default_rng(4)
    scores = rng.integers(0, 5, size=(40, 12)).astype(np.float32)
    targets = rng.integers(0, 12, size=40)
    per_query = per_query_metrics(scores, targets, ties="pessimistic")
    ranks = relevant_ranks(scores, targets, ties="pessimistic")
    np.testing.assert_array_equal(per_query["R@5"], (ranks <= 5).astype(float))
    assert {k: v.mean() for k, v in per_query.items()} == pytest.approx(
        retrieval_metrics(scores, targets, ties="pessimistic")
    )


def test_jackknife_ci_matches_leave_one_out():
    from scipy.stats import norm

    values = np.random.default_rng(0).random(25)
    n = values.size
    loo = np.array([np.delete(values, i).mean() for i in range(n)])
    estimate = n * values.mean() - (n - 1) * loo.mean()
    se = np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2))
    z = norm.ppf(0.975)
    got = jackknife_ci(values)
    assert got == pytest.approx((estimate, estimate - z * se, estimate + z * se))
    with pytest.raises(ValueError, match="at least 2 values"):
        jackknife_ci(np.ones(1))


def test_chance_metrics_are_the_mean_over_every_ranking():
    import itertools

    from audiorepro.metrics.retrieval import chance_metrics

    for n in (1, 3, 5, 12):
        # brute force: every position of the one relevant item among n is equally likely
        if n == 1:  # one item: refused by the metrics (every query ranks it first)
            got = {"mAP@10": 1.0, "R@1": 1.0, "R@5": 1.0, "R@10": 1.0}
        elif n <= 5:
            perms = list(itertools.permutations(range(n)))
            scores = np.array([[-float(p.index(i)) for i in range(n)] for p in perms])
            got = retrieval_metrics(scores, np.zeros(len(perms), dtype=int))
        else:
            ranks = np.arange(1, n + 1)
            got = {
                "mAP@10": float(np.mean(np.where(ranks <= 10, 1.0 / ranks, 0.0))),
                **{f"R@{k}": float(np.mean(ranks <= k)) for k in (1, 5, 10)},
            }
        want = chance_metrics(n)
        assert set(want) == set(got)
        for key in want:
            assert want[key] == pytest.approx(got[key]), (n, key)
    assert chance_metrics(1045)["mAP@10"] == pytest.approx(2.9290 / 1045, rel=1e-4)


def test_what_cannot_be_ranked_is_refused():
    # one item: every query ranks it first, R@1 = 1 whatever the model
    with pytest.raises(ScoreError, match=r"scores: 1 item to rank for each of the 3 queries"):
        retrieval_metrics(np.ones((3, 1)), [0, 0, 0])
    # collapsed embeddings: every query gives every item one score; the ranks would be the tie
    # rule's (index: the target's index; optimistic: all 1)
    with pytest.raises(ScoreError, match=r"scores: each of the 4 queries gives its 5 items one "
                       r"score"):  # fmt: skip
        retrieval_metrics(np.full((4, 5), 0.25), [0, 1, 2, 3], ties="optimistic")
    with pytest.raises(ScoreError, match="one score"):
        audio_to_text_metrics(np.zeros((2, 4)), [[0, 1], [2, 3]])
    # float32 cosines of embeddings that differ by 1e-9 (a random paper-size MobileNet whose
    # output no longer depends on its input): a rounding apart is one score, ...
    near = np.full((3, 2), 0.2987, dtype=np.float32)
    near[:, 1] = np.nextafter(near[:, 1], np.float32(1))
    with pytest.raises(ScoreError, match=r"within 8 roundings of float32"):
        retrieval_metrics(near, [0, 1, 0])
    near[0, 1] = np.float32(0.2987) + 8 * np.spacing(np.float32(0.2987))  # still within 8
    with pytest.raises(ScoreError, match="one score"):
        retrieval_metrics(near, [0, 1, 0])
    # ... nine roundings on one query are a ranking, and so is any gap in float64
    near[0, 1] = np.float32(0.2987) + 9 * np.spacing(np.float32(0.2987))
    assert retrieval_metrics(near, [1, 1, 1], ties="optimistic")["R@1"] == pytest.approx(1.0)
    exact = np.full((3, 2), 0.2987)
    exact[:, 1] += 1e-12
    assert retrieval_metrics(exact, [1, 1, 1])["R@1"] == 1.0
    # integers are one score only when equal
    assert retrieval_metrics(np.array([[3, 4], [4, 3]]), [1, 0])["R@1"] == 1.0


def test_weak_rankings_warn():
    rng = np.random.default_rng(0)
    with pytest.warns(ScoreWarning, match=r"R@5, R@10 count every query as a hit: only 4 items"):
        retrieval_metrics(rng.normal(size=(20, 4)), rng.integers(0, 4, 20))
    with pytest.warns(ScoreWarning, match=r"rest on 3 queries"):
        retrieval_metrics(rng.normal(size=(3, 40)), [0, 1, 2])
