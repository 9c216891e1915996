"""Correspondence estimation: teacher stores (atomic, no pickle), the fused ensemble against
brute-force cosine loops, batch targets (also all-gathered over 2 processes), blockwise top
matches against the full matrix (ties included), ensembles of score matrices, bad input."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from audiorepro.distillation import (
    TeacherEmbeddings,
    TeacherEmbeddingsError,
    TeacherEnsemble,
    batch_targets,
    captions_for_clip,
    compute_teacher_embeddings,
    ensemble_scores,
    top_matches,
    top_matches_dense,
)
from audiorepro.metrics.retrieval import retrieval_metrics

PREP = "lower,strip_punctuation"


def make_teacher(name: str, n_audio=6, n_caption=9, dim=5, seed=0, prep=PREP) -> TeacherEmbeddings:
    gen = torch.Generator().manual_seed(seed)
    return TeacherEmbeddings(
        [f"clip{i}.wav" for i in range(n_audio)],
        [f"a caption number {j}" for j in range(n_caption)],
        torch.randn(n_audio, dim, generator=gen, dtype=torch.float64).float(),
        torch.randn(n_caption, dim, generator=gen, dtype=torch.float64).float(),
        {"teacher": name, "caption_preprocessing": prep},
    )


def brute_cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_store_round_trips_atomically_in_both_precisions(tmp_path):
    teacher = make_teacher("passt")
    json_path = teacher.save(tmp_path / "teachers" / "passt")
    assert sorted(p.name for p in (tmp_path / "teachers").iterdir()) == [
        "passt.json",
        "passt.safetensors",
    ]  # no temporaries left
    loaded = TeacherEmbeddings.load(json_path)
    assert loaded.audio_ids == teacher.audio_ids and loaded.captions == teacher.captions
    assert loaded.audio.equal(teacher.audio) and loaded.caption.equal(teacher.caption)
    assert loaded.metadata["caption_preprocessing"] == PREP
    assert loaded.metadata["source"] == str(json_path)

    odd = TeacherEmbeddings(
        ["ä/b c.wav"], ['A café, "quoted"\nline'], torch.ones(1, 2), torch.ones(1, 2)
    )
    assert TeacherEmbeddings.load(odd.save(tmp_path / "odd")).captions == odd.captions

    teacher.save(tmp_path / "half", dtype=torch.float16)
    half = TeacherEmbeddings.load(tmp_path / "half.safetensors")
    assert half.audio.dtype == torch.float16
    torch.testing.assert_close(half.audio.float(), teacher.audio, rtol=1e-3, atol=1e-3)


def test_corrupt_or_partial_stores_name_the_file(tmp_path):
    make_teacher("atst").save(tmp_path / "atst")
    (tmp_path / "atst.safetensors").unlink()
    with pytest.raises(TeacherEmbeddingsError, match=r"atst.safetensors is missing"):
        TeacherEmbeddings.load(tmp_path / "atst")
    with pytest.raises(TeacherEmbeddingsError, match="do not exist"):
        TeacherEmbeddings.load(tmp_path / "nothing")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TeacherEmbeddingsError, match=r"bad.json: not valid JSON"):
        TeacherEmbeddings.load(tmp_path / "bad")
    # JSON and tensors that disagree on the row count.
    teacher = make_teacher("mn")
    teacher.save(tmp_path / "mn")
    make_teacher("mn", n_audio=4).save(tmp_path / "other")
    os.replace(tmp_path / "other.safetensors", tmp_path / "mn.safetensors")
    with pytest.raises(TeacherEmbeddingsError, match=r"'audio' has shape \(4, 5\), the JSON"):
        TeacherEmbeddings.load(tmp_path / "mn")


def test_compute_embeds_each_distinct_item_once():
    calls: list[list[str]] = []

    def embed(keys: list[str]) -> torch.Tensor:
        calls.append(keys)
        return torch.tensor([[float(len(k)), float(k.count("a")), 1.0] for k in keys])

    audio_ids = ["x.wav", "y.wav", "x.wav", "zz.wav", "y.wav"]
    captions = ["a dog", "a cat barks", "a dog", "rain"]
    teacher = compute_teacher_embeddings(
        embed, embed, audio_ids, captions, batch_size=2, metadata={"teacher": "t"}
    )
    assert teacher.audio_ids == ["x.wav", "y.wav", "zz.wav"]
    assert teacher.captions == ["a dog", "a cat barks", "rain"]
    assert calls == [["x.wav", "y.wav"], ["zz.wav"], ["a dog", "a cat barks"], ["rain"]]
    assert teacher.caption[1].tolist() == [11.0, 3.0, 1.0]  # "a cat barks": 11 chars, 3 a
    with pytest.raises(TeacherEmbeddingsError, match=r"returned shape \(3,\) for 2 items"):
        compute_teacher_embeddings(lambda k: torch.ones(3), embed, audio_ids, captions, 2)


def test_fused_rows_give_the_mean_cosine_of_the_teachers():
    teachers = [make_teacher("passt", seed=1), make_teacher("atst", seed=2)]
    # The third teacher stores its rows in another order: the ensemble aligns them by key.
    third = make_teacher("mn", seed=3)
    perm_a, perm_c = [3, 0, 5, 1, 4, 2], [8, 1, 0, 7, 2, 6, 3, 5, 4]
    teachers.append(
        TeacherEmbeddings(
            [third.audio_ids[i] for i in perm_a],
            [third.captions[j] for j in perm_c],
            third.audio[perm_a],
            third.caption[perm_c],
            third.metadata,
        )
    )
    ensemble = TeacherEnsemble(teachers)
    full = ensemble.similarity(torch.arange(6), torch.arange(9))
    originals = [make_teacher("passt", seed=1), make_teacher("atst", seed=2), third]
    for i in range(6):
        for j in range(9):
            expected = (
                sum(brute_cosine(t.audio[i].tolist(), t.caption[j].tolist()) for t in originals)
                / 3
            )
            assert float(full[i, j]) == pytest.approx(expected, abs=1e-5)


def test_batch_targets_follow_the_pairs_with_repeated_audios():
    ensemble = TeacherEnsemble([make_teacher("passt", seed=1), make_teacher("mn", seed=4)])
    audio_ids = ["clip2.wav", "clip2.wav", "clip5.wav"]
    captions = ["a caption number 4", "a caption number 0", "a caption number 8"]
    out = batch_targets(ensemble, audio_ids, captions, tau=0.05)
    rows, cols = [2, 2, 5], [4, 0, 8]
    expected = ensemble.similarity(torch.tensor(rows), torch.tensor(cols))
    torch.testing.assert_close(out.similarity, expected)
    assert out.similarity[0].equal(out.similarity[1])  # the same audio twice: equal rows
    torch.testing.assert_close(out.p_audio, (expected / 0.05).softmax(0))
    torch.testing.assert_close(out.p_caption, (expected / 0.05).softmax(1))
    heat = ensemble.similarity_of(["clip5.wav", "clip2.wav"], captions)
    torch.testing.assert_close(heat, expected[[2, 0]])


def test_missing_items_are_listed_with_their_count():
    ensemble = TeacherEnsemble([make_teacher("passt")])
    wanted = [f"clip{i}.wav" for i in range(20)]
    with pytest.raises(TeacherEmbeddingsError) as err:
        ensemble.check(audio_ids=wanted)
    message = str(err.value)
    assert "lack 14 training audio ids" in message
    assert "'clip6.wav', 'clip7.wav'" in message and "... and 4 more" in message
    with pytest.raises(TeacherEmbeddingsError, match="lack 1 training captions: 'new caption'"):
        ensemble.check(captions=["a caption number 1", "new caption"])
    with pytest.raises(TeacherEmbeddingsError, match="lack 1 of the batch's audio ids"):
        batch_targets(ensemble, ["clip1.wav", "clip99.wav"], ["a caption number 1"] * 2)
    ensemble.check(audio_ids=wanted[:6], captions=["a caption number 3"], dim=5)


def test_projection_size_and_preprocessing_mismatches_name_what_differs(tmp_path):
    make_teacher("passt", dim=5).save(tmp_path / "passt")
    make_teacher("atst", dim=7).save(tmp_path / "atst")
    with pytest.raises(TeacherEmbeddingsError) as err:
        TeacherEnsemble.load([tmp_path / "passt", tmp_path / "atst"])
    assert "projection size 7" in str(err.value) and "atst.json" in str(err.value)
    ensemble = TeacherEnsemble.load([tmp_path / "passt"])
    with pytest.raises(TeacherEmbeddingsError, match="projection size 5, expected 1024"):
        ensemble.check(dim=1024)
    with pytest.raises(TeacherEmbeddingsError, match="caption projection size"):
        TeacherEmbeddings(["a"], ["b"], torch.zeros(1, 4), torch.zeros(1, 3), {"teacher": "x"})

    make_teacher("mn", prep="none").save(tmp_path / "mn")
    with pytest.raises(TeacherEmbeddingsError) as err:
        TeacherEnsemble.load([tmp_path / "passt", tmp_path / "mn"])
    assert "preprocessing 'none'" in str(err.value) and PREP in str(err.value)
    with pytest.raises(TeacherEmbeddingsError, match="this training run uses 'lower'"):
        ensemble.check(caption_preprocessing="lower")

    make_teacher("small", n_audio=5).save(tmp_path / "small")
    with pytest.raises(TeacherEmbeddingsError, match=r"1 missing from the second \('clip5.wav'\)"):
        TeacherEnsemble.load([tmp_path / "passt", tmp_path / "small"])
    with pytest.raises(TeacherEmbeddingsError, match="duplicate audio ids: 'a'"):
        TeacherEmbeddings(["a", "a"], ["b"], torch.zeros(2, 3), torch.zeros(1, 3))


def brute_top_k(matrix: list[list[float]], k: int) -> list[list[int]]:
    # Highest first; among equal scores the lower column first.
    return [sorted(range(len(row)), key=lambda j: (-row[j], j))[:k] for row in matrix]


def test_blockwise_top_matches_equal_the_full_matrix_with_ties():
    teachers = [make_teacher("p", 13, 29, 4, seed=5), make_teacher("a", 13, 29, 4, seed=6)]
    for t in teachers:  # captions 3, 11 and 20 identical, clip 0's best match: exact ties
        t.caption[3] = 2 * t.audio[0]
        t.caption[11] = t.caption[3]
        t.caption[20] = t.caption[3]
    ensemble = TeacherEnsemble(teachers)
    dense = top_matches_dense([t.audio for t in teachers], [t.caption for t in teachers], k=6)
    full = ensemble.similarity(torch.arange(13), torch.arange(29))
    for block in (1, 4, 7, 64):
        got = top_matches(ensemble, k=6, block_size=block)
        assert got.indices.tolist() == brute_top_k(full.tolist(), 6)
        assert got.indices.equal(dense.indices)
        torch.testing.assert_close(got.scores, dense.scores, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got.log_normaliser, dense.log_normaliser, rtol=1e-5, atol=1e-5)
    rows_with_tie = [i for i, row in enumerate(got.indices.tolist()) if 3 in row and 11 in row]
    assert 0 in rows_with_tie  # the tie case is exercised
    assert got.indices[0, :3].tolist() == [3, 11, 20]
    probs = got.probabilities
    torch.testing.assert_close(probs, (full / 0.05).softmax(1).gather(1, got.indices))

    by_caption = top_matches(ensemble, k=3, rows="caption", block_size=5)
    assert by_caption.indices.tolist() == brute_top_k(full.T.tolist(), 3)
    with pytest.raises(ValueError, match="k must lie"):
        top_matches(ensemble, k=30)


def test_captions_for_a_clip_skip_its_own():
    ensemble = TeacherEnsemble([make_teacher("p", seed=7)])
    full = ensemble.similarity(torch.tensor([2]), torch.arange(9))[0]
    order = full.sort(descending=True).indices.tolist()
    own = [ensemble.captions[order[0]]]
    found = captions_for_clip(ensemble, "clip2.wav", k=3, exclude=own)
    assert [c for c, _, _ in found] == [ensemble.captions[j] for j in order[1:4]]
    probs = (full / 0.05).softmax(0)
    assert found[0][2] == pytest.approx(float(probs[order[1]]), rel=1e-5)


def test_ensemble_scores_average_and_change_the_ranking():
    # Caption 0's audio is item 1. Model A ranks it second, model B first but barely.
    a = np.array([[0.9, 0.8, 0.0]])
    b = np.array([[0.1, 0.5, 0.4]])
    assert retrieval_metrics(a, [1])["R@1"] == 0.0
    mean = ensemble_scores([a, torch.tensor(b)])
    np.testing.assert_allclose(mean, [[0.5, 0.65, 0.2]])
    assert retrieval_metrics(mean, [1])["R@1"] == 1.0
    np.testing.assert_allclose(ensemble_scores([a, b], weights=[3, 1]), 0.75 * a + 0.25 * b)
    np.testing.assert_allclose(ensemble_scores([a]), a)
    with pytest.raises(ValueError, match=r"matrix 1 has shape \(1, 2\)"):
        ensemble_scores([a, a[:, :2]])
    with pytest.raises(ValueError, match="NaN"):
        ensemble_scores([a, np.array([[np.nan, 0.0, 0.0]])])
    with pytest.raises(ValueError, match="weights"):
        ensemble_scores([a, b], weights=[1, -1])


WORKER = textwrap.dedent(
    """
    import sys, torch, torch.distributed as dist
    from audiorepro.distillation import TeacherEnsemble, batch_targets
    rank, world, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method=f"file://{root}/rendezvous", rank=rank,
                            world_size=world)
    ensemble = TeacherEnsemble.load([f"{root}/passt", f"{root}/atst"])
    audio = [f"clip{i}.wav" for i in (4, 1, 1, 5, 0, 3)]
    captions = [f"a caption number {j}" for j in (2, 7, 0, 8, 5, 1)]
    shard = slice(0, 4) if rank == 0 else slice(4, 6)  # unequal shards, as a last batch
    out = batch_targets(ensemble, audio[shard], captions[shard])
    torch.save({"sim": out.similarity, "p_a": out.p_audio, "p_c": out.p_caption},
               f"{root}/rank{rank}.pt")
    dist.destroy_process_group()
    """
)


def test_two_processes_look_up_the_global_batch(tmp_path):
    make_teacher("passt", seed=8).save(tmp_path / "passt")
    make_teacher("atst", seed=9).save(tmp_path / "atst")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(rank), "2", str(tmp_path)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    ensemble = TeacherEnsemble.load([tmp_path / "passt", tmp_path / "atst"])
    single = batch_targets(
        ensemble,
        [f"clip{i}.wav" for i in (4, 1, 1, 5, 0, 3)],
        [f"a caption number {j}" for j in (2, 7, 0, 8, 5, 1)],
    )
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert got["sim"].shape == (6, 6)
        assert got["sim"].equal(single.similarity)
        assert got["p_a"].equal(single.p_audio) and got["p_c"].equal(single.p_caption)


def test_ties_at_the_kth_place_take_the_lowest_columns():
    # Cosines of clip 0 with the 5 captions: 0, 1, 1, 1, -1 (three tied best, k = 2).
    captions = torch.tensor([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [-1.0, 0.0]])
    teacher = TeacherEmbeddings(
        ["clip0.wav"], [f"c{j}" for j in range(5)], torch.tensor([[1.0, 0.0]]), captions
    )
    ensemble = TeacherEnsemble([teacher])
    for block in (1, 2, 3, 5):
        got = top_matches(ensemble, k=2, block_size=block)
        assert got.indices.tolist() == [[1, 2]]
        assert got.scores.tolist() == [[1.0, 1.0]]
    assert top_matches(ensemble, k=4, block_size=2).indices.tolist() == [[1, 2, 3, 0]]
