"""Chapter 03 experiment steps that need no training: segments, export, findings, tables."""

import importlib

import numpy as np
import pytest
import torch
import yaml

from audiorepro.data.recipes.zerospeech import AbxItem, write_filelist, write_item_file
from audiorepro.data.speech_segments import (
    SegmentDataset,
    collate_segments,
    features_key,
    load_features,
)
from audiorepro.experiments.zerospeech import plan
from audiorepro.experiments.zerospeech.config import Config, load_config
from audiorepro.experiments.zerospeech.evaluate import (
    code_segments,
    encode_files,
    length_batches,
    window_spans,
)
from audiorepro.experiments.zerospeech.findings import findings
from audiorepro.experiments.zerospeech.inverter import synthesis_targets
from audiorepro.experiments.zerospeech.submission import export_submission
from audiorepro.experiments.zerospeech.tables import ablation_rows
from audiorepro.features import save_audio
from audiorepro.metrics.abx import abx_error, read_submission_folder
from audiorepro.metrics.bitrate import bitrate, bitrate_from_submission
from audiorepro.models.inverter import CodebookInverter, InverterConfig
from audiorepro.models.vqvae import VQVAE, VQVAEConfig
from audiorepro.reporting import config_hash_of
from audiorepro.storage import ArrayFileError, RunStore

# the module (the package's ``evaluate`` is the function of that name)
zs_evaluate = importlib.import_module("audiorepro.experiments.zerospeech.evaluate")


def test_segments_tile_utterances_and_collate_pads():
    a, b = np.ones((10, 3), np.float32), np.zeros((4, 3), np.float32)
    ds = SegmentDataset([a, b], [0, 1], segment_frames=4, min_frames=2)
    assert [len(x) for x, _ in ds.items] == [4, 4, 2, 4]
    assert [s for _, s in ds.items] == [0, 0, 0, 1]
    feats, lengths, speakers = collate_segments([ds[2], ds[3]])
    assert feats.shape == (2, 4, 3) and lengths.tolist() == [2, 4] and speakers.tolist() == [0, 1]
    assert feats[0, 2:].abs().sum() == 0


def test_export_round_trips_through_abx_and_bitrate(tmp_path):
    rng = np.random.default_rng(0)
    k = 8
    codebook = rng.normal(size=(k, 4)).astype(np.float32)
    codes = {
        f"S{s}_{i}": rng.integers(0, k, size=int(rng.integers(2, 6)))
        for s in (1, 2)
        for i in range(6)
    }
    vectors = {n: codebook[c] for n, c in codes.items()}
    items = [
        AbxItem(n, 0.0, 1.0, "ab"[i % 2], "x", "yz"[i // 3 % 2], f"S{n[1]}")
        for n in codes
        for i in [int(n.split("_")[1])]
    ]
    item_file = write_item_file(tmp_path / "t.item", items)
    for name, kwargs in {"vec": {"vectors": vectors}, "hot": {"codebook_size": k}}.items():
        out = export_submission(tmp_path / name, "english", codes, **kwargs)
        test = out / "2019/english/test"
        lines = (test / "S1_0.txt").read_text().splitlines()
        assert len(lines) == len(codes["S1_0"])
        assert all(len(line.split()) == (4 if name == "vec" else k) for line in lines)
        read = read_submission_folder(test)
        if name == "vec":
            for n in codes:  # the float32 vectors come back exactly
                np.testing.assert_array_equal(read[n], vectors[n].astype(np.float64))
            assert abx_error(test, item_file) == abx_error(vectors, item_file)
        else:
            np.testing.assert_array_equal(read["S2_3"].argmax(1), codes["S2_3"])
        meta = yaml.safe_load((out / "2019/metadata.yaml").read_text())
        assert meta["abx distance"] == "dtw_cosine" and meta["using parallel train"] is False
        assert yaml.safe_load((out / "metadata.yaml").read_text())["open source"] is True
        durations = [(f"{n}.txt", 0.5) for n in codes]
        filelist = write_filelist(tmp_path / f"{name}.list", durations)
        assert bitrate_from_submission(test, filelist) == pytest.approx(
            bitrate(list(codes.values()), 0.5 * len(codes))
        )
    with pytest.raises(ValueError, match="codebook vectors or the codebook size"):
        export_submission(tmp_path / "x", "english", codes)


def test_export_writes_wavs(tmp_path):
    out = export_submission(
        tmp_path,
        "english",
        {"S1_0": np.array([0])},
        codebook_size=2,
        wavs={"V001_0": np.zeros(1600, np.float32)},
    )
    assert (out / "2019/english/test/V001_0.wav").is_file()


def test_synthesis_targets_name_outputs_by_voice(tmp_path):
    (tmp_path / "synthesis.txt").write_text("test/S025_0008 V001\ntest/S026_0011 V002\n")
    assert synthesis_targets(tmp_path, "V001") == [("S025_0008", "V001_0008")]


def test_encode_files_returns_unpadded_codes_and_codebook_vectors():
    torch.manual_seed(0)
    model = VQVAE(
        VQVAEConfig(
            input_dim=5,
            d_model=16,
            ffn_dim=16,
            code_dim=4,
            codebook_size=8,
            decoder_channels=8,
            speaker_dim=4,
        ),
        n_speakers=1,
    )
    feats = {
        "a": np.random.rand(9, 5).astype(np.float32),
        "b": np.random.rand(20, 5).astype(np.float32),
    }
    codes, vectors = encode_files(model, feats, batch_size=2)
    assert len(codes["a"]) == 3 and len(codes["b"]) == 5
    np.testing.assert_array_equal(vectors["b"], model.quantizer.codebook[codes["b"]].numpy())


def test_window_spans_tile_the_file_within_the_size_and_align_to_the_stride():
    assert window_spans(10, 20, 4, 4) == [(0, 10, 0, 10)]  # short: whole
    assert window_spans(20, 20, 4, 4) == [(0, 20, 0, 20)]
    for length in (21, 100, 101, 977):
        spans = window_spans(length, 40, 8, 4)
        assert spans[0][2] == 0 and spans[-1][3] == length
        for (start, end, keep, stop), nxt in zip(spans, spans[1:] + [None], strict=True):
            assert 0 <= start <= keep < stop <= end <= length and end - start <= 40
            assert keep - start <= 8 and start % 4 == 0 and keep % 4 == 0
            assert end == min(length, stop + 8)  # the context after, where the file goes on
            if nxt is not None:
                assert nxt[2] == stop  # kept parts tile the file in order
    for size, context in ((40, 6), (42, 8), (16, 8)):
        with pytest.raises(ValueError, match="window_spans"):
            window_spans(100, size, context, 4)


@pytest.mark.parametrize("stride", [2, 4])
def test_a_long_file_is_encoded_window_by_window_and_a_short_one_whole(stride, monkeypatch):
    """Attention over a whole long file takes memory in the square of its frames: past
    WINDOW_FRAMES, encode_files encodes windows and joins the units of their kept parts."""
    evaluate = importlib.import_module("audiorepro.experiments.zerospeech.evaluate")
    torch.manual_seed(0)
    model = VQVAE(
        VQVAEConfig(
            input_dim=5, d_model=16, ffn_dim=16, code_dim=4, codebook_size=8,
            decoder_channels=8, speaker_dim=4, stride=stride,
        ),
        n_speakers=1,
    ).eval()  # fmt: skip
    rng = np.random.default_rng(0)
    feats = {"long": rng.random((101, 5), dtype=np.float32), "short": rng.random((37, 5))}
    whole, _ = encode_files(model, feats)
    monkeypatch.setattr(evaluate, "WINDOW_FRAMES", 40)
    monkeypatch.setattr(evaluate, "WINDOW_CONTEXT", 8)
    codes, vectors = encode_files(model, feats)
    np.testing.assert_array_equal(codes["short"], whole["short"])  # within a window: whole
    assert len(codes["long"]) == len(whole["long"]) == -(-101 // stride)
    np.testing.assert_array_equal(vectors["long"], model.quantizer.codebook[codes["long"]].numpy())
    # each window's kept code frames are those of that window encoded on its own
    inputs = evaluate.model_inputs(feats, model.cfg.feature_norm, None)["long"]
    for start, end, keep, stop in window_spans(101, 40, 8, stride):
        alone, _ = encode_files(model, {"w": inputs[start:end]})
        lo, hi = keep // stride, -(-stop // stride)
        part = alone["w"][(keep - start) // stride : (keep - start) // stride + hi - lo]
        np.testing.assert_array_equal(codes["long"][lo:hi], part)


def test_a_long_file_is_inverted_window_by_window_to_its_length(monkeypatch):
    from audiorepro.experiments.zerospeech import inverter as inv_module

    torch.manual_seed(0)
    inv = CodebookInverter(
        InverterConfig(code_dim=8, n_bins=17, repeat=4, d_model=16, ffn_dim=32)
    ).eval()
    vectors = np.random.default_rng(0).standard_normal((23, 8)).astype(np.float32)

    def inverted(v):
        with torch.no_grad():
            return inv(torch.from_numpy(v)[None], torch.tensor([len(v)]))[0].numpy()

    np.testing.assert_array_equal(inv_module.invert_windows(inv, vectors), inverted(vectors))
    monkeypatch.setattr(inv_module, "WINDOW_FRAMES", 32)  # 8 code frames at r = 4
    monkeypatch.setattr(inv_module, "WINDOW_CONTEXT", 8)
    mags = inv_module.invert_windows(inv, vectors)
    assert mags.shape == (23 * 4, 17)
    for start, end, keep, stop in window_spans(23, 8, 2):
        alone = inverted(vectors[start:end])
        np.testing.assert_array_equal(
            mags[keep * 4 : stop * 4], alone[(keep - start) * 4 : (stop - start) * 4]
        )


def test_length_batches_bound_the_attention_of_long_files():
    # lengths 10, 3, 40, 5, 41 frames; 2 heads, budget 2 * 2 * 10**2 = 400 scores
    batches = length_batches([10, 3, 40, 5, 41], batch_size=3, heads=2, budget=400)
    # by length 3, 5, 10, 40, 41: 3 and 5 share a batch (2 * 2 * 5**2 = 100); adding the 10
    # would make 3 * 2 * 10**2 = 600 > 400, and each longer file is over the budget with any other
    assert batches == [[1, 3], [0], [2], [4]]
    assert length_batches([10, 3, 40, 5, 41], batch_size=3, heads=1, budget=10**9) == [
        [1, 3, 0],
        [2, 4],
    ]
    assert sorted(i for b in length_batches(list(range(1, 50)), 4, 2, 300) for i in b) == list(
        range(49)
    )


@pytest.mark.parametrize("encoder", ["transformer", "conv"])
def test_a_files_units_do_not_depend_on_the_files_batched_with_it(monkeypatch, encoder):
    """Padding frames are zeroed before every convolution: a short file batched with a long one
    gets the units it gets alone (before, its last code frames changed)."""
    torch.manual_seed(0)
    cfg = VQVAEConfig(
        input_dim=5, d_model=16, ffn_dim=16, code_dim=4, codebook_size=8, decoder_channels=8,
        speaker_dim=4, encoder=encoder,
    )  # fmt: skip
    model = VQVAE(cfg, n_speakers=1)
    rng = np.random.default_rng(0)
    feats = {f"f{i}": rng.random((n, 5)).astype(np.float32) for i, n in enumerate((7, 30, 90))}
    codes, vectors = encode_files(model, feats)
    monkeypatch.setattr(zs_evaluate, "ATTENTION_BUDGET", 1)  # every file alone
    alone, _ = encode_files(model, feats)
    for name in feats:
        np.testing.assert_array_equal(codes[name], alone[name])
    x = torch.zeros(2, 90, 5)
    x[0, :7], x[1] = torch.from_numpy(feats["f0"]), torch.from_numpy(feats["f2"])
    with torch.no_grad():
        _, z_alone, *_ = model.quantize(x[:1, :7], torch.tensor([7]))
        _, z_batch, *_ = model.quantize(x, torch.tensor([7, 90]))
    torch.testing.assert_close(z_batch[0, :2], z_alone[0], rtol=0, atol=1e-5)


def _record(row, seed, abx, rate, language="english"):
    return {
        "chapter": "03_zerospeech",
        "page": "03_abx_bitrate",
        "preset": "smoke",
        "seed": seed,
        "config_hash": config_hash_of(Config()),
        "metrics": {"abx_across": abx, "bitrate": rate},
        "tags": {"row": row, "language": language},
    }


def test_ablation_rows_and_findings():
    cfg = Config()
    rows = {r.key: r for r in ablation_rows(cfg)}
    assert {"base", "logmel", "conv", "K64", "K256", "K512", "smooth0.01", "jitter0.05"} <= set(
        rows
    )
    assert rows["base"].paper.abx_across == 21.91 and rows["conv"].paper.bitrate == 184.32
    assert rows["logmel"].model.input_dim == 80 and rows["base"].model.input_dim == 39
    assert rows["conv"].model.encoder == "conv" and rows["K64"].model.codebook_size == 64
    assert rows["combo0.005_0.05"].model.smoothing == 5e-3
    assert rows["combo0.005_0.05"].model.jitter == 0.05
    records = [
        *(_record("base", s, 30.0 + 0.1 * s, 100.0 + s) for s in (0, 1, 2)),
        *(_record("logmel", s, 35.0 + 0.1 * s, 100.0) for s in (0, 1, 2)),
        *(_record("conv", s, 29.0 + 0.1 * s, 100.0) for s in (0, 1, 2)),
        *(_record("K64", s, 31.0, 90.0 + s) for s in (0, 1, 2)),
        *(_record("K256", s, 31.0, 80.0 + s) for s in (0, 1, 2)),
        *(_record("K512", s, 31.0, 100.0 + 3 * s) for s in (0, 1, 2)),
        *(_record("combo0.005_0.05", s, 28.0 + 0.1 * s, 100.0) for s in (0, 1, 2)),
        *(_record("combo0.001_0.05", s, 28.0 + 3 * s, 100.0) for s in (0, 1, 2)),
        _record("smooth0.01", 0, 32.0, 100.0),
    ]
    table = findings(records, cfg, "smoke").set_index("metric")["finding"]
    k = cfg.model.codebook_size
    assert "reproduces" in table[f"TrfVQVAE log-Mel K={k}: ABX %"]
    assert "contradicts" in table["Conv VQVAE K=256: ABX %"]
    # every K row has the three seeds: the bitrate finding has a spread to judge against
    assert "reproduces" in table["TrfVQVAE K=64: bitrate"]
    assert "contradicts" in table["TrfVQVAE K=256: bitrate"]
    assert "within the seed spread" in table["TrfVQVAE K=512: bitrate"]
    assert "3/3 seeds" in table["TrfVQVAE K=64: bitrate"]
    assert "reproduces" in table["+ smooth λ=0.005 + jitter p=0.05: ABX %"]
    assert "within the seed spread" in table["+ smooth λ=0.001 + jitter p=0.05: ABX %"]
    assert "fewer than 2 seeds" in table["+ temp smooth λ=0.01: ABX %"]
    assert table[f"TrfVQVAE MFCC K={k}: ABX %"] == ""
    assert table["Indonesian, main model: ABX %"].startswith("Leaderboard")


def _fake_run_row(calls):
    """A stand-in for :func:`run_row` that records its (row, seed) and returns metrics."""

    def run_row(config, row, seed, language="english", code_stats=None):
        calls.append((row.key, seed, language))
        return None, {"abx_across": 30.0 + seed, "bitrate": 100.0}

    return run_row


@pytest.mark.parametrize(
    "config",
    [
        load_config("smoke"),
        load_config("embedded"),
        load_config("paper"),
        Config(main_seeds=(3, 4)),
    ],
    ids=["smoke", "embedded", "paper", "two-seeds"],
)
def test_every_row_of_tables_1_to_3_runs_every_seed(monkeypatch, config):
    calls, tasks = [], []

    def serial(fn, items, *, shared, workers):
        tasks.extend(items)
        return [fn(shared, item) for item in items]

    monkeypatch.setattr(plan, "run_row", _fake_run_row(calls))
    monkeypatch.setattr(plan, "map_processes", serial)
    rows = ablation_rows(config)
    done = plan.run_rows(config, rows, workers=2)
    wanted = {(r.key, s) for r in rows for s in config.main_seeds}
    assert set(done) == wanted and len(calls) == len(wanted)
    assert all(done[k, s].seed == s and done[k, s].metrics["bitrate"] == 100.0 for k, s in done)
    # the rows of one task share one k-means baseline (fitted once in its process)
    for jobs, language in tasks:
        assert language == "english"
        assert len({plan._baseline_of(row, seed) for row, seed in jobs}) == 1
    assert sum(len(jobs) for jobs, _ in tasks) == len(wanted)


@pytest.mark.parametrize("preset", ["smoke", "embedded", "paper"])
def test_presets_load(preset):
    cfg = load_config(preset)
    rows = ablation_rows(cfg)
    assert rows[0].key == "base" and len({r.key for r in rows}) == len(rows)
    assert rows[0].model == cfg.model and cfg.model.input_dim == 39


def test_feature_cache_is_keyed_on_content(tmp_path):
    rng = np.random.default_rng(0)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        for name in ("S1_0", "S2_0"):
            wav = rng.normal(scale=0.1, size=1600).astype(np.float32) if folder == "a" else None
            if folder == "a":
                save_audio(tmp_path / folder / f"{name}.wav", wav, 16000)
            else:
                (tmp_path / "b" / f"{name}.wav").write_bytes(
                    (tmp_path / "a" / f"{name}.wav").read_bytes()
                )
    assert features_key(tmp_path / "a", "mfcc") == features_key(tmp_path / "b", "mfcc")
    assert features_key(tmp_path / "a", "mfcc") != features_key(tmp_path / "a", "logmel")
    store = RunStore("03_zerospeech", root=tmp_path / "runs")
    first = load_features(tmp_path / "a", "mfcc", store)
    assert first["S1_0"].shape[1] == 39 and len(store.runs("features")) == 1
    again = load_features(tmp_path / "b", "mfcc", store)  # same content: the same run
    np.testing.assert_array_equal(first["S2_0"], again["S2_0"])
    assert len(store.runs("features")) == 1
    save_audio(tmp_path / "b" / "S1_0.wav", np.zeros(1600, np.float32), 16000)
    assert features_key(tmp_path / "a", "mfcc") != features_key(tmp_path / "b", "mfcc")
    # A truncated cache is an error naming the file and what it should hold, not a BadZipFile.
    cache = store.runs("features")[0].file("features.npz")
    cache.write_bytes(cache.read_bytes()[:-100])
    with pytest.raises(ArrayFileError, match=rf"{cache}: .*expected mfcc features of "):
        load_features(tmp_path / "a", "mfcc", store)


def test_loaded_features_are_read_once_per_process_until_their_cache_changes(
    tmp_path, monkeypatch
):
    import audiorepro.data.speech_segments as segments

    rng = np.random.default_rng(1)
    (tmp_path / "a").mkdir()
    for name in ("S1_0", "S2_0"):
        save_audio(tmp_path / "a" / f"{name}.wav", rng.normal(0, 0.1, 1600), 16000)
    store = RunStore("03_zerospeech", root=tmp_path / "runs")
    first = load_features(tmp_path / "a", "mfcc", store)  # computed and written
    reads = []
    real_load = segments.load_npz
    monkeypatch.setattr(
        segments, "load_npz", lambda *a, **k: reads.append(1) or real_load(*a, **k)
    )
    again = load_features(tmp_path / "a", "mfcc", store)
    assert reads == [] and again.keys() == first.keys()
    assert all(np.array_equal(again[k], first[k]) for k in first)
    again["S1_0"] += 1.0  # a caller's copy: the next call still gets the features
    assert np.array_equal(load_features(tmp_path / "a", "mfcc", store)["S1_0"], first["S1_0"])
    # a cache rewritten since (here: the same bytes, a new file) is read again
    cache = store.runs("features")[0].file("features.npz")
    data = cache.read_bytes()
    cache.unlink()
    cache.write_bytes(data)
    third = load_features(tmp_path / "a", "mfcc", store)
    assert reads == [1] and all(np.array_equal(third[k], first[k]) for k in first)


def test_code_segments_merge_runs():
    assert code_segments(np.array([3, 3, 5, 3]), 0.04) == [
        ("3", 0.0, 0.08),
        ("5", 0.08, 0.12),
        ("3", 0.12, 0.16),
    ]
