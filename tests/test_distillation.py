"""Correspondence estimation: teacher stores (atomic, no pickle), the fused ensemble against
brute-force cosine loops, batch targets (also all-gathered over 2 processes), blockwise top
matches against the full matrix (ties included), ensembles of score matrices, bad input; the
training-caption top-1 of a model and of the ensemble, the targets' departure from one-hot,
and captions that describe several clips."""

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
    caption_top1,
    captions_for_clip,
    compute_teacher_embeddings,
    ensemble_scores,
    target_departure,
    top_matches,
    top_matches_dense,
)
from audiorepro.metrics.retrieval import retrieval_metrics
from conftest import subprocess_timeout

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
        _, err = proc.communicate(timeout=subprocess_timeout(120))
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


# ------------------------------------------------------------------ training-caption top-1

CLIPS = ["clip0", "clip1", "clip2"]
# pairs as stage 2 holds them: c3 was written word for word for two clips
PAIRS = [
    ("clip0", "c0"), ("clip2", "c1"), ("clip2", "c2"), ("clip0", "c3"), ("clip1", "c3"),
]  # fmt: skip


def hand_teacher(name: str, audio: list, caption: dict) -> TeacherEmbeddings:
    texts = ["c0", "c1", "c2", "c3"]
    return TeacherEmbeddings(
        CLIPS, texts, torch.tensor(audio), torch.tensor([caption[t] for t in texts]),
        {"teacher": name, "caption_preprocessing": PREP},
    )  # fmt: skip


def brute_top1(teachers: list[TeacherEmbeddings]) -> float:
    """Mean cosine over teachers for every (caption, clip), the best clip by loops."""
    hits = 0
    for _, caption in PAIRS:
        j = teachers[0].captions.index(caption)
        scores = [
            sum(brute_cosine(t.audio[i].tolist(), t.caption[j].tolist()) for t in teachers)
            / len(teachers)
            for i in range(len(CLIPS))
        ]
        best = CLIPS[max(range(len(CLIPS)), key=lambda i: (scores[i], -i))]
        hits += best in {a for a, c in PAIRS if c == caption}
    return hits / len(PAIRS)


def test_training_caption_top1_of_a_model_and_of_the_ensemble():
    eye = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    # teacher a: c0 -> clip0 (own), c1 -> clip1 (written for clip2: wrong), c2 -> clip2 (own),
    # c3 -> clip1 (one of its two clips: right for both of its pairs) => 4 of 5
    a = hand_teacher("a", eye, {
        "c0": [1.0, 0.1, 0.0], "c1": [0.0, 1.0, 0.6], "c2": [0.0, 0.2, 1.0],
        "c3": [0.3, 1.0, 0.0],
    })  # fmt: skip
    # teacher b puts c1 firmly on clip2 and c0 on clip2 => c0 wrong, c1 right
    b = hand_teacher("b", eye, {
        "c0": [0.2, 0.0, 1.0], "c1": [0.0, 0.1, 1.0], "c2": [0.0, 0.0, 1.0],
        "c3": [0.0, 1.0, 0.1],
    })  # fmt: skip
    ids, captions = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    assert caption_top1(TeacherEnsemble([a]), ids, captions) == pytest.approx(4 / 5)
    assert caption_top1(TeacherEnsemble([b]), ids, captions) == pytest.approx(4 / 5)
    # the mean cosine: c0 -> clip0 (0.995 + 0.196 vs 0 + 0.981), c1 -> clip2 => 5 of 5
    both = caption_top1(TeacherEnsemble([a, b]), ids, captions, block_size=2)
    assert both == pytest.approx(1.0) == brute_top1([a, b])
    for teacher in (a, b):
        assert caption_top1(TeacherEnsemble([teacher]), ids, captions) == brute_top1([teacher])
    with pytest.raises(TeacherEmbeddingsError, match="lack 1 training captions"):
        caption_top1(TeacherEnsemble([a]), ["clip0"], ["a caption nobody embedded"])


def test_target_departure_from_one_hot():
    ids = [f"clip{i}.wav" for i in range(6)]
    captions = [f"a caption number {j}" for j in range(6)]
    gen = torch.Generator().manual_seed(0)
    audio = torch.randn(6, 8, generator=gen, dtype=torch.float64).float()
    sharp = TeacherEmbeddings(ids, captions, audio, audio.clone(), {"teacher": "sharp"})
    flat = TeacherEmbeddings(ids, captions, torch.ones(6, 8), torch.ones(6, 8), {"teacher": "f"})
    kwargs = dict(batch_size=3, num_batches=4, seed=1)
    got = target_departure(TeacherEnsemble([flat]), ids, captions, **kwargs)
    # uniform targets over 3 distinct clips: 2/3 of each column's mass off its pair
    assert got["offpair_uniform"] == pytest.approx(2 / 3)
    assert got["offpair_audio"] == pytest.approx(2 / 3) == got["offpair_caption"]
    got = target_departure(TeacherEnsemble([sharp]), ids, captions, tau=0.01, **kwargs)
    assert got["offpair_audio"] < 1e-3 and got["offpair_caption"] < 1e-3
    # a repeated clip in the batch is a positive, as in L_sup: one clip, two captions
    twice = target_departure(TeacherEnsemble([flat]), ids[:1] * 2, captions[:2], batch_size=2)
    assert twice["offpair_uniform"] == 0.0 == twice["offpair_audio"]


# ------------------------------------------------------------------ captions of several clips


def test_captions_shared_word_for_word_and_generic(tmp_path):
    from audiorepro.data.retrieval import (
        CaptionItem,
        RetrievalDataError,
        caption_sharing,
        generic_flags,
    )

    def item(clip: str, caption: str) -> CaptionItem:
        return CaptionItem("clotho", clip, f"/corpus/clotho/dev/{clip}.wav", caption)

    # three clips, two captions each; "water flows" is written for a and b, "sounds happen"
    # is generic (flagged by the generator) and shared by b and c
    items = [
        item("a", "water flows"), item("a", "a dog barks"),
        item("b", "water flows"), item("b", "sounds happen"),
        item("c", "sounds happen"), item("c", "a bell rings twice"),
    ]  # fmt: skip
    scenes = tmp_path / "clotho" / "embedded_scenes_development.jsonl"
    scenes.parent.mkdir()
    scenes.write_text(
        '{"file_name": "a.wav", "generic": [false, false]}\n'
        '{"file_name": "b.wav", "generic": [false, true]}\n'
        '{"file_name": "c.wav", "generic": [true, false]}\n'
    )
    flags = generic_flags(tmp_path, "development", items)
    assert flags == [False, False, False, True, True, False]
    got = caption_sharing(items, flags)
    assert got["shared"] == pytest.approx(4 / 6)  # both "water flows", both "sounds happen"
    assert got["generic"] == pytest.approx(2 / 6)
    assert got["shared_or_generic"] == pytest.approx(4 / 6)
    assert (got["captions"], got["clips"], got["shared_texts"]) == (6, 3, 2)
    assert got["clips_per_shared_text"] == 2
    # on a subset the shares follow what the subset holds
    assert caption_sharing(items[:2])["shared"] == 0 and math.isnan(
        caption_sharing(items)["generic"]
    )
    assert generic_flags(tmp_path / "nowhere", "development", items) is None  # real corpus
    with pytest.raises(RetrievalDataError, match="no generic flag for caption 3 of 'a.wav'"):
        generic_flags(tmp_path, "development", [*items, item("a", "a third caption")])


def test_non_finite_teacher_embeddings_are_refused_when_built_written_or_loaded(tmp_path):
    good = make_teacher("passt")
    audio = good.audio.clone()
    audio[2, 1] = float("nan")
    with pytest.raises(TeacherEmbeddingsError, match=r"NaN or infinite .*audio ids 'clip2.wav'"):
        TeacherEmbeddings(good.audio_ids, good.captions, audio, good.caption, good.metadata)
    caption = good.caption.clone()
    caption[4, 0] = float("inf")
    with pytest.raises(TeacherEmbeddingsError, match="'a caption number 4'"):
        TeacherEmbeddings(good.audio_ids, good.captions, good.audio, caption, good.metadata)
    # A store whose tensors were damaged after writing is refused on loading, naming the file.
    from safetensors.torch import load_file, save_file

    json_path = good.save(tmp_path / "passt")
    tensors_path = tmp_path / "passt.safetensors"
    tensors = load_file(str(tensors_path))
    tensors["caption"][7, 3] = float("nan")
    save_file(tensors, str(tensors_path))
    with pytest.raises(TeacherEmbeddingsError, match=r"passt\.safetensors: NaN .*number 7"):
        TeacherEmbeddings.load(json_path)
