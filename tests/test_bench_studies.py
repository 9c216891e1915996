"""bench/study_digits_folder.py: the folder of spoken digits, each speaker through a recording
chain of their own, that the Reference's "Speakers recorded through different chains" table
was measured on."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
import soundfile as sf

from audiorepro.data.recordings import scan_folder, speakers_of
from conftest import REPO


def _study(name: str):
    """``bench/<name>.py`` as a module, imported as ``python bench/...`` runs it: beside its
    helpers."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(name, REPO / f"bench/{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "bench"))
    return module


def test_the_digits_folder_is_named_as_fsdd_and_made_again_byte_for_byte(tmp_path):
    study = _study("study_digits_folder")
    study.main([str(tmp_path / "a"), "--speakers", "2", "--takes", "1"])
    study.main([str(tmp_path / "b"), "--speakers", "2", "--takes", "1"])
    study.main([str(tmp_path / "c"), "--speakers", "2", "--takes", "1", "--clean"])
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert len(names) == 20 and names[0] == "0_S001_0.wav" and names[-1] == "9_S002_0.wav"
    wavs = scan_folder(tmp_path / "a").files
    assert sorted(set(speakers_of(wavs, "field:2", tmp_path / "a").values())) == ["S001", "S002"]
    for name in names:
        a, rate = sf.read(tmp_path / "a" / name)
        b, _ = sf.read(tmp_path / "b" / name)
        c, _ = sf.read(tmp_path / "c" / name)
        assert rate == 8000 and np.array_equal(a, b) and np.abs(a).max() > 0.01
        assert len(c) and not np.array_equal(a[: len(c)], c[: len(a)])  # --clean: no chain


def test_varied_takes_differ_beyond_rate_and_pitch_and_are_made_again_byte_for_byte(tmp_path):
    """--varied: each take its own intonation, timing, filter, level, noise and silences; the
    same seed writes the same files."""
    study = _study("study_digits_folder")
    for name in ("v", "w"):
        study.main([str(tmp_path / name), "--speakers", "1", "--takes", "2", "--varied"])
    study.main([str(tmp_path / "plain"), "--speakers", "1", "--takes", "2"])
    lengths = []
    for path in sorted((tmp_path / "v").iterdir()):
        v, rate = sf.read(path)
        assert rate == 8000 and np.array_equal(v, sf.read(tmp_path / "w" / path.name)[0])
        plain = sf.read(tmp_path / "plain" / path.name)[0]
        assert len(v) != len(plain) and np.abs(v).max() > 0.01
        lengths.append(len(v))
    assert len(set(lengths)) == len(lengths) == 20


def test_the_closest_stretch_is_found_where_it_was_put_and_never_in_silence():
    """bench/study_units_segments.py: a stretch of one file copied into another is found at
    both places, at distance 0; quiet frames (first coefficient below zero) count as far,
    so two silences never make the closest stretch."""
    study = _study("study_units_segments")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((60, 5))
    a[:, 0] = np.abs(a[:, 0]) + 0.1  # speech throughout
    b = rng.standard_normal((50, 5))
    b[:, 0] = np.abs(b[:, 0]) + 0.1
    b[12:22] = a[30:40]
    assert study.closest_stretch(a, b, 10) == (pytest.approx(0.0, abs=1e-7), 30, 12)
    quiet_a, quiet_b = a.copy(), b.copy()
    quiet_a[:10] = [-1.0, 0, 0, 0, 0]  # the same silent frames in both: distance 0 unmasked
    quiet_b[40:50] = [-1.0, 0, 0, 0, 0]
    cost, i, j = study.closest_stretch(quiet_a, quiet_b, 10)
    assert (i, j) == (30, 12) and cost == pytest.approx(0.0, abs=1e-7)
    assert study.closest_stretch(a, b[:5], 10)[0] == np.inf  # shorter than a stretch


def test_the_warped_stretch_is_found_at_another_speed_and_never_in_silence():
    """bench/study_units_segments.py --warped: a stretch of one file said 1.5 times slower in
    another is found by segmental DTW (a band of radius 10), inside what was copied, at
    distance 0 on a path of 20 steps; the diagonal search cannot find it; two silences never
    make the closest stretch."""
    study = _study("study_units_segments")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((80, 5))
    a[:, 0] = np.abs(a[:, 0]) + 0.1
    b = rng.standard_normal((70, 5))
    b[:, 0] = np.abs(b[:, 0]) + 0.1
    slow = np.round(np.linspace(30, 49, 30)).astype(int)  # a[30:50] said over 30 frames
    b[20:50] = a[slow]
    cost, a0, a1, b0, b1 = study.closest_warped_stretch(a, b, 20, radius=10)
    assert cost == pytest.approx(0.0, abs=1e-7)
    assert 30 <= a0 < a1 <= 50 and 20 <= b0 < b1 <= 50 and b1 - b0 > a1 - a0
    assert np.array_equal(b[b0:b1], a[slow][b0 - 20 : b1 - 20])
    assert study.closest_stretch(a, b, 20)[0] > 0.1  # one to one, no stretch of 20 matches
    quiet_a, quiet_b = a.copy(), b.copy()
    quiet_a[:20] = [-1.0, 0, 0, 0, 0]
    quiet_b[50:70] = [-1.0, 0, 0, 0, 0]
    cost, a0, a1, b0, b1 = study.closest_warped_stretch(quiet_a, quiet_b, 20, radius=10)
    assert cost == pytest.approx(0.0, abs=1e-7) and a0 >= 30 and b1 <= 50
    assert study.closest_warped_stretch(a, b[:5], 20, radius=10)[0] == np.inf


def test_the_centred_study_takes_each_input_speakers_running_mean_off_before_the_codebook():
    """bench/study_units_centred.py: the first batch of a speaker sets its mean, later ones
    move it by ``momentum``; the codebook reads the encoder output less the mean of the
    *input's* speaker; with momentum 0 the model quantises as the library's VQVAE does."""
    import torch

    from audiorepro.losses.vq import length_mask
    from audiorepro.models.vqvae import VQVAE, VQVAEConfig

    study = _study("study_units_centred")
    cfg = VQVAEConfig(input_dim=6, d_model=16, n_heads=2, ffn_dim=16, code_dim=4, codebook_size=8)
    torch.manual_seed(0)
    model = study.CentredVQVAE(cfg, n_speakers=2, momentum=0.5).train()
    feats, lengths = torch.randn(3, 12, 6), torch.tensor([12, 8, 12])
    model.sources = torch.tensor([1, 1, 0])
    _, z, _, e, code_lengths = model.quantize(feats, lengths)
    mask = length_mask(code_lengths, z.shape[1])
    raw = z + model.speaker_mean[model.sources][:, None, :]  # what the encoder gave
    first = raw[:2][mask[:2]].mean(0)
    assert torch.allclose(model.speaker_mean[1], first, atol=1e-6)
    assert torch.allclose(model.speaker_mean[0], raw[2][mask[2]].mean(0), atol=1e-6)
    assert torch.allclose(z[0], raw[0] - first, atol=1e-6)  # centred by its own speaker
    model.sources = torch.tensor([1, 0, 0])
    _, z2, _, _, _ = model.quantize(feats, lengths)
    second = (z2 + model.speaker_mean[model.sources][:, None, :])[:1][mask[:1]].mean(0)
    assert torch.allclose(model.speaker_mean[1], 0.5 * first + 0.5 * second, atol=1e-5)
    plain = study.CentredVQVAE(cfg, n_speakers=2, momentum=0.0).eval()
    library = VQVAE(cfg, n_speakers=2).eval()
    library.load_state_dict(plain.state_dict(), strict=False)
    plain.sources = torch.tensor([0, 1, 0])
    with torch.no_grad():
        ours, theirs = plain.quantize(feats, lengths), library.quantize(feats, lengths)
    assert torch.equal(ours[2], theirs[2]) and torch.equal(ours[3], theirs[3])


def test_the_awe_speakers_study_writes_the_tables_of_the_speakers_it_names(tmp_path):
    """bench/study_awe_speakers.py: the first N training speakers, one development speaker and
    every test speaker, times from 10 ms frames, each row's wav the side's."""
    study = _study("study_awe_speakers")
    corpus = tmp_path / "words"
    corpus.mkdir()
    lists = {
        "train": ["yes_S001-A_000100-000160", "no_S002-B_000200-000250", "yes_S003-A_1-9"],
        "dev": ["maybe_S025-A_000010-000090", "yes_S026-A_000010-000090"],
        "test": ["no_S033-A_000300-000345", "no_S034-B_000300-000345"],
    }
    for split, keys in lists.items():
        (corpus / f"{split}.list").write_text("".join(k + "\n" for k in keys))
    study.main([str(tmp_path / "out"), "--corpus", str(corpus), "--speakers", "2"])
    rows = {
        split: [
            line.split("\t")
            for line in (tmp_path / "out" / f"{split}.tsv").read_text().splitlines()[1:]
        ]
        for split in lists
    }
    assert [(r[1], r[2], r[3], r[4]) for r in rows["train"]] == [
        ("yes", "S001", "1.00", "1.60"),
        ("no", "S002", "2.00", "2.50"),
    ]
    assert rows["train"][1][0] == str((corpus / "audio" / "S002-B.wav").resolve())
    assert [r[2] for r in rows["dev"]] == ["S025"]
    assert [r[2] for r in rows["test"]] == ["S033", "S034"]


def test_the_within_speaker_study_scores_each_speakers_own_pairs(tmp_path, capsys):
    """bench/study_awe_within.py: per speaker, the embeddings' AP and MFCC + DTW's on that
    speaker's rows alone, each equal to the score computed on its own; a speaker of one word
    (no pair to rank apart) is left out."""
    from audiorepro.data.recordings import read_segments
    from audiorepro.experiments.awe.recordings import rows_dtw_ap
    from audiorepro.metrics.average_precision import same_different_ap

    study = _study("study_awe_within")
    rng = np.random.default_rng(0)
    t = np.arange(4000) / 8000
    lines = ["path\tword\tspeaker\tstart\tend"]
    for speaker, f0 in (("A", 120), ("B", 200), ("C", 160)):
        words = ("lo", "hi") if speaker != "C" else ("lo",)
        for word in words:
            for take in range(2):
                tone = np.sin(2 * np.pi * (f0 * (3 if word == "hi" else 1) + 7 * take) * t)
                wav = (0.3 * tone + 0.01 * rng.standard_normal(t.size)).astype(np.float32)
                name = tmp_path / f"{speaker}_{word}_{take}.wav"
                sf.write(name, wav, 8000, subtype="PCM_16")
                lines.append(f"{name.name}\t{word}\t{speaker}\t\t")
    table = tmp_path / "t.tsv"
    table.write_text("\n".join(lines) + "\n")
    rows = read_segments(table)
    emb = rng.standard_normal((len(rows), 4)).astype(np.float32)
    np.savez(
        tmp_path / "e.npz",
        embeddings=emb,
        labels=np.array([r.word for r in rows]),
        speakers=np.array([r.speaker for r in rows]),
        rows=np.array([r.line for r in rows]),
        segments=np.array(str(table.resolve())),
        feature_norm=np.array("file"),
    )
    (found,) = study.main([str(tmp_path / "e.npz")])
    assert [f[:2] for f in found] == [("A", 4), ("B", 4)]  # C says one word
    for speaker, _, ap, dtw in found:
        idx = [i for i, r in enumerate(rows) if r.speaker == speaker]
        words = [rows[i].word for i in idx]
        assert ap == pytest.approx(same_different_ap(emb[idx], words))
        assert dtw == pytest.approx(rows_dtw_ap([rows[i] for i in idx], words)["ap"])
    assert "mean over 2 speakers" in capsys.readouterr().out


def test_the_seeds_study_sets_unit_vectors_side_by_side(tmp_path, capsys):
    """bench/study_units_seeds.py: each folder's lines at unit length, side by side, over the
    square root of their number (a cosine is the mean of the folders'); files of other lengths
    are refused."""
    study = _study("study_units_seeds")
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, rows in ((a, [[3.0, 4.0], [0.0, 2.0]]), (b, [[1.0, 0.0], [0.0, -1.0]])):
        (folder / "spk").mkdir(parents=True)
        np.savetxt(folder / "spk" / "f.txt", np.array(rows))
    study.main([str(tmp_path / "out"), str(a), str(b)])
    got = np.loadtxt(tmp_path / "out" / "spk" / "f.txt", ndmin=2)
    s = 1 / np.sqrt(2)
    assert got == pytest.approx(np.array([[0.6 * s, 0.8 * s, s, 0], [0, s, 0, -s]]), abs=1e-6)
    cos = got[0] @ got[1] / (np.linalg.norm(got[0]) * np.linalg.norm(got[1]))
    assert cos == pytest.approx((0.8 + 0.0) / 2)  # the mean of the folders' cosines
    np.savetxt(b / "spk" / "f.txt", np.ones((3, 2)))
    with pytest.raises(ValueError, match="f.txt: \\[2, 3\\] lines in the folders"):
        study.main([str(tmp_path / "out2"), str(a), str(b)])
