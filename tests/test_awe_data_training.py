"""AWE data selection on small files in the real Switchboard layout, batches, plateau schedule."""

from __future__ import annotations

import dataclasses
import importlib
import json

import numpy as np
import pytest
import torch

from audiorepro.config import ConfigError
from audiorepro.data.awe import MultiViewDataset, collate_multiview, prepare_split
from audiorepro.data.recipes.switchboard import SwitchboardFormatError
from audiorepro.training import TrainConfig, Trainer
from audiorepro.training.plateau import ReduceLROnPlateauWithReset
from conftest import KillAt, Killed

VOCAB = {
    "words_to_ids": {"absolutely": 1, "because": 2, "something": 3, "children": 4},
    "phones_to_ids": {p: i + 1 for i, p in enumerate(["AE", "B", "S", "K", "AH", "Z", "M"])},
    "word_to_phones": {
        "absolutely": [["AE", "B", "S"]],
        "because": [["B", "K", "AH", "Z"], ["B", "K", "Z"]],
        "something": [["S", "AH", "M"]],
    },
}


def write_corpus(root, keys, frames=None, dim=39, vocab=VOCAB):
    """``test.list``, ``swbd.test.npz`` (key -> (frames, dim)) and ``vocab.json``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "test.list").write_text("".join(k + "\n" for k in keys))
    rng = np.random.default_rng(0)
    arrays = {}
    for k in keys:
        start, end = (int(v) for v in k.rsplit("_", 1)[1].split("-"))
        n = (end - start) if frames is None else frames.get(k, end - start)
        arrays[k] = rng.normal(size=(n, dim)).astype(np.float32)
    np.savez(root / "swbd.test.npz", **arrays)
    (root / "vocab.json").write_text(json.dumps(vocab))
    return arrays


KEYS = [
    "absolutely_sw02001-A_000100-000160",
    "because_sw02001-A_000200-000201",  # one frame: dropped as short
    "because_sw02005-B_000300-000350",
    "elsewhere_sw02005-B_000400-000470",  # not in words_to_ids: out of vocabulary
    "something_sw02005-B_000500-000540",
    "because_sw02007-A_000010-000065",
]


def test_selection_drops_and_counts_short_and_out_of_vocabulary(tmp_path):
    arrays = write_corpus(tmp_path, KEYS)
    seg = prepare_split(tmp_path, "test")
    assert seg.dropped == {"short": 1, "out_of_vocabulary": 1}
    assert seg.words == ["absolutely", "because", "something", "because"]
    assert seg.keys[1] == "because_sw02005-B_000300-000350"
    np.testing.assert_array_equal(seg.feats[0], arrays[KEYS[0]])
    # First pronunciation, ids from phones_to_ids; the word table holds each word once.
    np.testing.assert_array_equal(seg.phones[1], [2, 4, 5, 6])
    assert seg.types == ["absolutely", "because", "something"]
    assert seg.num_phones == 7 and seg.feature_dim == 39
    # An explicit training vocabulary drops more.
    seg = prepare_split(tmp_path, "test", training_words={"because"})
    assert seg.words == ["because", "because"]
    assert seg.dropped == {"short": 1, "out_of_vocabulary": 3}


def test_word_without_pronunciation_is_an_error_or_the_unknown_symbol(tmp_path):
    write_corpus(tmp_path, KEYS + ["children_sw02009-A_000001-000030"])
    with pytest.raises(SwitchboardFormatError, match="children_sw02009-A_000001-000030"):
        prepare_split(tmp_path, "test")
    seg = prepare_split(tmp_path, "test", unknown_words="symbol")
    assert seg.num_phones == 8
    np.testing.assert_array_equal(seg.phones[-1], [8])


def test_malformed_key_and_wrong_dimension_name_the_place(tmp_path):
    write_corpus(tmp_path / "a", KEYS)
    (tmp_path / "a" / "test.list").write_text(KEYS[0] + "\nbecause_sw02001-A_12-30\n")
    with pytest.raises(SwitchboardFormatError, match=r"test\.list:2.*because_sw02001-A_12-30"):
        prepare_split(tmp_path / "a", "test")
    write_corpus(tmp_path / "b", KEYS, dim=36)
    with pytest.raises(SwitchboardFormatError, match=r"absolutely_sw02001-A_000100-000160.*39"):
        prepare_split(tmp_path / "b", "test", feature_dim=39)
    assert len(prepare_split(tmp_path / "b", "test", feature_dim=36)) == 4


def test_collate_deduplicates_words_and_pads(tmp_path):
    write_corpus(tmp_path, KEYS)
    ds = MultiViewDataset(prepare_split(tmp_path, "test"))
    batch = collate_multiview([ds[i] for i in range(4)])
    assert batch["feats"].shape == (4, 60, 39)
    assert batch["lengths"].tolist() == [60, 50, 40, 55]
    assert batch["phones"].tolist() == [[1, 2, 3, 0], [2, 4, 5, 6], [3, 5, 7, 0]]
    assert batch["phone_lengths"].tolist() == [3, 4, 3]
    assert batch["inverse"].tolist() == [0, 1, 2, 1]
    assert torch.all(batch["feats"][2, 40:] == 0)


class _Scripted:
    """eval_fn returning a fixed sequence of values, one per call."""

    def __init__(self, values):
        self.values, self.calls = list(values), 0

    def __call__(self, model):
        self.calls += 1
        return {"crossview_ap": self.values[self.calls - 1]}


class _Snapshot:
    """Records model weights, Adam state and lr after every evaluation (after the schedule)."""

    def __init__(self):
        self.weights, self.exp_avg, self.lrs = [], [], []

    def on_eval_end(self, trainer, step, metrics):
        model = trainer.unwrapped_model
        self.weights.append(model.weight.detach().clone())
        state = trainer.optimizer.state[model.weight]
        self.exp_avg.append(state["exp_avg"].clone())
        self.lrs.append(trainer.optimizer.param_groups[0]["lr"])


@pytest.mark.parametrize("on_disk", [False, True])
def test_plateau_reloads_best_model_and_optimizer_then_decays_and_stops(tmp_path, on_disk):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x = torch.randn(8, 3)
    data = [(x[i], x[i].sum()) for i in range(8)]

    def loss_fn(model, batch):
        inputs, target = batch
        return ((model(inputs).squeeze(1) - target) ** 2).mean()

    values = [0.5, 0.6] + [0.55] * 4 + [0.55] * 4 + [0.9] * 10
    schedule = ReduceLROnPlateauWithReset(
        "crossview_ap",
        patience=4,
        factor=0.1,
        min_lr=0.05e-2,
        directory=tmp_path / "best" if on_disk else None,
    )
    snap = _Snapshot()
    config = TrainConfig(num_epochs=20, batch_size=8, lr=1e-2, weight_decay=0.0, seed=0)
    trainer = Trainer(
        model,
        loss_fn,
        data,
        config,
        eval_fn=_Scripted(values),
        optimizer_factory=lambda m, c: torch.optim.Adam(m.parameters(), lr=c.lr),
        callbacks=[schedule, snap],
        progress="none",
    )
    result = trainer.fit()
    # Evaluation 2 was the best; evaluation 6 (4th without gain) reloads it and decays.
    assert schedule.history[:3] == [(1, "best"), (2, "best"), (6, "decay")]
    assert torch.equal(snap.weights[5], snap.weights[1])
    assert torch.equal(snap.exp_avg[5], snap.exp_avg[1])
    assert not torch.equal(snap.weights[4], snap.weights[1])
    assert snap.lrs[5] == pytest.approx(1e-3)
    # The steps after the decay train at the new rate (the LambdaLR base was decayed too).
    assert result.lrs[6] == pytest.approx(1e-3)
    # Evaluation 10 decays again, from evaluation 2's weights, to 1e-4 < min_lr: stop.
    assert schedule.history[3:] == [(10, "decay"), (10, "stop")]
    assert torch.equal(snap.weights[9], snap.weights[1])
    assert result.final_step == 10 and result.stopped_early
    assert schedule.decays == 2 and schedule.best == 0.6
    assert (tmp_path / "best" / "best.json").is_file() == on_disk


def write_hdf5(root, utterances, dim=39, vocab=VOCAB):
    """agwe-recipe's layout: fbank.test.hdf5 (utt -> frames) + align-small.test.hdf5."""
    import h5py

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    feats = {}
    with (
        h5py.File(root / "fbank.test.hdf5", "w") as ff,
        h5py.File(root / "align-small.test.hdf5", "w") as af,
    ):
        for utt, (frames, words) in utterances.items():
            feats[utt] = rng.normal(size=(frames, dim)).astype(np.float32)
            ff[utt] = feats[utt]
            g = af.create_group(utt)
            g["words"] = np.array([w.encode() for w, _, _ in words])
            g["starts"] = np.array([s for _, s, _ in words])
            g["ends"] = np.array([e for _, _, e in words])
    (root / "vocab.json").write_text(json.dumps(vocab))
    return feats


UTTERANCES = {
    "sw02001-A_000100-000300": (200, [("absolutely", 10, 60), ("because", 70, 70)]),
    "sw02005-B_000050-000250": (200, [("something", 0, 40), ("because", 100, 101)]),
}


def test_hdf5_utterances_with_alignments_give_list_layout_keys(tmp_path):
    feats = write_hdf5(tmp_path, UTTERANCES)
    seg = prepare_split(tmp_path, "test", source="hdf5")
    # Frames are side-relative: utterance start + offset; [start:end) as agwe slices.
    assert seg.keys == ["absolutely_sw02001-A_000110-000160", "something_sw02005-B_000050-000090"]
    np.testing.assert_array_equal(seg.feats[0], feats["sw02001-A_000100-000300"][10:60])
    # One zero-length word and one 1-frame word are short.
    assert seg.dropped == {"short": 2, "out_of_vocabulary": 0}


@pytest.mark.parametrize(
    "utterances,dim,message",
    [
        ({"sw02001A_000100-000300": (50, [("because", 0, 20)])}, 39, "sw02001A_000100-000300"),
        ({"sw02001-A_000100-000300": (50, [("because", 0, 20)])}, 36, r"\(frames, 39\)"),
        ({"sw02001-A_000100-000300": (50, [("because", 10, 80)])}, 39, "because_sw02001-A"),
        ({"sw02001-A_000100-000300": (50, [("because", 30, 20)])}, 39, "before it starts"),
    ],
)
def test_hdf5_bad_input_names_utterance_or_key(tmp_path, utterances, dim, message):
    write_hdf5(tmp_path, utterances, dim=dim)
    with pytest.raises(SwitchboardFormatError, match=message):
        prepare_split(tmp_path, "test", source="hdf5")


def _records(xv, heads, chosen, dtw, cfg):
    """Ledger records of two seeds per setting (second seed: value - 0.001)."""
    from audiorepro.reporting import config_hash_of

    out = []

    def add(seed, metrics, tags):
        rec = {"chapter": "04_awe", "page": "03_evaluate", "preset": "smoke", "seed": seed}
        rec["config_hash"] = config_hash_of(cfg)
        out.append(rec | {"metrics": metrics, "tags": tags})

    for seed, shift in ((0, 0.0), (1, 0.001)):
        for (n, p), v in xv.items():
            add(seed, {"crossview_ap": v - shift}, {"table": "1", "N": n, "pooling": p})
        for h, v in heads.items():
            add(seed, {"acoustic_ap": v - shift}, {"table": "2", "h": h})
        add(seed, {k: v - shift for k, v in chosen.items()}, {"model": "chosen"})
    add(0, {"acoustic_ap": dtw}, {"model": "mfcc-dtw"})
    return out


def test_findings_check_each_claim_on_ledger_records():
    from audiorepro.config import CorpusSpec
    from audiorepro.experiments.awe import PAPER, Config, findings

    cfg = Config(corpus=CorpusSpec("smoke"), sweep_layers=(1, 4, 8), sweep_heads=(1, 16, 32))
    xv = {(1, "avg"): 0.3, (1, "rep"): 0.1, (4, "avg"): 0.4, (4, "rep"): 0.2}
    xv.update({(8, "avg"): 0.01, (8, "rep"): 0.0})
    heads = {1: 0.3, 16: 0.5, 32: 0.4}
    good = {"acoustic_ap": 0.6, "crossview_ap": 0.5}
    table = findings(_records(xv, heads, good, 0.2, cfg), cfg, "smoke", on_dtw_pairs=[0.5, 0.55])
    claims = [f for f in table["finding"] if "seeds)" in f]
    # 3 x Avg beats Rep, 2 x middle depth, 2 x h = 16, DTW, acoustic above cross-view.
    assert len(claims) == 9 and all(": reproduces" in f for f in claims), claims
    assert table["paper"][0] == f"{PAPER['Table 1'][(1, 'avg')]:.3f}"
    assert table["ours"][0] == "0.299 ± 0.001" and table["seeds"][0] == "0, 1"
    # Flip every finding.
    xv[(1, "rep")], xv[(4, "rep")], xv[(8, "rep")] = 0.65, 0.9, 0.75
    xv[(1, "avg")], xv[(8, "avg")] = 0.6, 0.7
    heads[16] = 0.1
    bad = {"acoustic_ap": 0.4, "crossview_ap": 0.5}
    table = findings(_records(xv, heads, bad, 0.6, cfg), cfg, "smoke", on_dtw_pairs=[0.5, 0.52])
    claims = [f for f in table["finding"] if "seeds)" in f]
    assert len(claims) == 9 and all(": contradicts" in f for f in claims), claims
    # One seed per sweep setting: no spread, so inconclusive.
    one_seed = [
        r for r in _records(xv, heads, bad, 0.6, cfg) if r["seed"] == 0 or "model" in r["tags"]
    ]
    table = findings(one_seed, cfg, "smoke")
    assert "inconclusive" in table["finding"][1]


def _sweep_records(cfg, xv, heads):
    """Ledger records of Tables 1 and 2, one per seed of the given per-seed values."""
    from audiorepro.reporting import config_hash_of

    out = []
    for tags, metric, per_seed in [
        *(({"table": "1", "N": n, "pooling": p}, "crossview_ap", v) for (n, p), v in xv.items()),
        *(({"table": "2", "h": h}, "acoustic_ap", v) for h, v in heads.items()),
    ]:
        for seed, value in zip(cfg.seeds, per_seed, strict=True):
            out.append(
                {
                    "chapter": "04_awe",
                    "page": "03_evaluate",
                    "preset": "smoke",
                    "seed": seed,
                    "config_hash": config_hash_of(cfg),
                    "metrics": {metric: value},
                    "tags": tags,
                }
            )
    return out


def test_sweep_verdicts_have_three_outcomes_with_the_seed_spread_and_chance():
    from audiorepro.config import CorpusSpec
    from audiorepro.experiments.awe import Config, findings

    cfg = Config(corpus=CorpusSpec("smoke"), sweep_layers=(1, 4, 8), sweep_heads=(1, 4, 8, 16, 32))
    chance = {"crossview_ap": 0.01, "acoustic_ap": 0.02}  # floors 0.03 and 0.06
    xv = {
        (1, "avg"): [0.31, 0.29, 0.30],
        (1, "rep"): [0.010, 0.011, 0.012],  # at chance: Avg beats Rep, as in the paper
        (4, "avg"): [0.25, 0.35, 0.30],  # N = 4 vs N = 1: within the spread
        (4, "rep"): [0.50, 0.51, 0.52],  # Rep beats Avg: contradicts
        (8, "avg"): [0.010, 0.012, 0.011],  # fails, as in the paper
        (8, "rep"): [0.012, 0.010, 0.011],  # both at chance: nothing to compare
    }
    heads = {
        1: [0.30, 0.31, 0.32],
        4: [0.03, 0.04, 0.05],  # below the floor
        8: [0.48, 0.52, 0.50],
        16: [0.49, 0.50, 0.51],
        32: [0.60, 0.61, 0.62],
    }
    table = findings(_sweep_records(cfg, xv, heads), cfg, "smoke", chance=chance)
    said = dict(zip(table["metric"], table["finding"], strict=True))
    t1 = "Table 1 cross-view AP, N = {} {}"
    assert said[t1.format(1, "Rep")].startswith("Avg beats Rep at N = 1: reproduces")
    assert said[t1.format(1, "Avg")].startswith(
        "N = 4 beats N = 1 (Avg): inconclusive (the difference is within the seed spread)"
    )
    assert said[t1.format(4, "Rep")].startswith("Avg beats Rep at N = 4: contradicts")
    assert said[t1.format(4, "Avg")] == ""
    assert said[t1.format(8, "Avg")].startswith("N = 4 beats N = 8 (Avg): reproduces")
    assert "N = 8 fails (Avg): reproduces" in said[t1.format(8, "Avg")]
    assert said[t1.format(8, "Rep")].startswith(
        "Avg beats Rep at N = 8: inconclusive (neither compared run reaches the chance floor"
    )
    assert "N = 8 fails (Rep): reproduces" in said[t1.format(8, "Rep")]
    t2 = "Table 2 acoustic AP, h = {}"
    assert said[t2.format(1)].startswith("h = 16 beats h = 1: reproduces")
    assert said[t2.format(8)].startswith("h = 16 beats h = 8: inconclusive (the difference is")
    assert said[t2.format(32)].startswith("h = 16 beats h = 32: contradicts")
    assert said[t2.format(4)].startswith(
        "h = 16 beats h = 4: inconclusive (the compared setting does not reach the chance floor"
    )
    assert said[t2.format(16)] == "Highest mean acoustic AP here: h = 32 (0.610)."
    assert "3/3 seeds" in said[t2.format(1)]
    # A deepest encoder that learned contradicts "N = 8 fails".
    xv[(8, "avg")] = [0.20, 0.21, 0.22]
    table = findings(_sweep_records(cfg, xv, heads), cfg, "smoke", chance=chance)
    said = dict(zip(table["metric"], table["finding"], strict=True))
    assert "N = 8 fails (Avg): contradicts" in said[t1.format(8, "Avg")]


@pytest.mark.processes
def test_sweeps_run_every_seed_once_per_run_and_workers_do_not_change_them(tmp_path):
    from audiorepro.config import replace
    from audiorepro.experiments.awe.findings import sweep_curves, sweep_table
    from audiorepro.experiments.awe.plan import sweeps, table1_configs, table2_configs
    from audiorepro.storage import RunStore

    cfg, data = _tiny_run(tmp_path)
    cfg = replace(
        cfg, seeds=(5, 6), sweep_layers=(1, 2), sweep_heads=(1, 2), table1_heads=2, sweep_epochs=2
    )
    # every setting of both tables, once per seed
    assert [(c.model.phone_layers, c.model.phone_pooling, c.seed) for c in table1_configs(cfg)][
        :4
    ] == [(1, "avg", 5), (1, "avg", 6), (1, "rep", 5), (1, "rep", 6)]
    assert len(table1_configs(cfg)) == 8 and len(table2_configs(cfg)) == 4
    assert {c.train.num_epochs for c in table1_configs(cfg) + table2_configs(cfg)} == {2}
    store = RunStore("04_awe", tmp_path / "runs")
    serial = sweeps(cfg, data, workers=1, store=store)
    # Table 2's h = 2 is Table 1's N = 1 Avg, and the chosen model is that run too.
    assert len(store.runs("model")) == 8 + 2
    assert serial["chosen"] == serial["2"][2:] == serial["1"][:2]
    assert [r["seed"] for r in serial["1"]] == [5, 6] * 4
    assert all(len(r["dev_curve"]) == 2 for r in serial["1"])
    parallel = sweeps(cfg, data, workers=2, store=RunStore("04_awe", tmp_path / "other"))

    def without_time(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    for table in ("1", "2", "chosen"):
        assert without_time(parallel[table]) == without_time(serial[table])
    summary = sweep_table(serial["1"], "1")
    assert list(summary.index) == ["N = 1 Avg", "N = 1 Rep", "N = 2 Avg", "N = 2 Rep"]
    assert summary.loc["N = 1 Avg", "seeds"] == "5, 6" and " ± " in summary.iloc[0, 1]
    curves = sweep_curves(serial["2"], "2")
    mean = [(a + b) / 2 for a, b in zip(*(r["dev_curve"] for r in serial["2"][:2]), strict=True)]
    assert curves["h = 1"] == pytest.approx(mean)


@pytest.mark.processes
def test_train_ahead_trains_each_run_of_the_chapter_once_and_the_pages_then_only_load(
    tmp_path, monkeypatch
):
    from audiorepro.config import replace
    from audiorepro.experiments import awe
    from audiorepro.experiments.awe import plan
    from audiorepro.storage import RunStore

    cfg, data = _tiny_run(tmp_path)
    cfg = replace(
        cfg, seeds=(5, 6), sweep_layers=(1, 2), sweep_heads=(1, 2), table1_heads=2, sweep_epochs=2
    )
    squared = awe.squared_config(cfg)
    assert (squared.distance, squared.train.num_epochs, squared.seed) == ("cos2", 2, 5)
    assert len(plan.chapter_configs(cfg)) == 8 + 4 + 2 + 1
    store = RunStore("04_awe", tmp_path / "runs")
    # Table 1: 8 runs; Table 2's h = 1 at N = 1: 2 more; the chosen model is Table 2's h = 2
    # (= Table 1's N = 1 Avg) as sweep_epochs = num_epochs; the 1 - cos² run: 1.
    assert awe.train_ahead(cfg, data, workers=2, store=store) == 8 + 2 + 1
    assert len(store.runs("model")) == 11
    assert awe.train_ahead(cfg, data, workers=2, store=store) == 0

    def no_training(*args, **kwargs):
        raise AssertionError("a page trained a run train_ahead should have trained")

    monkeypatch.setattr(
        importlib.import_module("audiorepro.experiments.awe.train"), "fit", no_training
    )
    ahead = awe.sweeps(cfg, data, workers=1, store=store)
    awe.train(squared, data, store=store)
    monkeypatch.undo()
    alone = awe.sweeps(cfg, data, workers=1, store=RunStore("04_awe", tmp_path / "alone"))

    def without_time(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    for table in ("1", "2", "chosen"):
        assert without_time(ahead[table]) == without_time(alone[table])


def test_curve_ends_say_which_settings_levelled_off_within_their_seed_spread():
    from audiorepro.experiments.awe import curve_ends, sweep_curves, sweep_spreads

    def row(h, seed, curve):
        return {"phone_layers": 4, "phone_pooling": "avg", "phone_heads": h, "seed": seed,
                "dev_curve": curve}  # fmt: skip

    rows = [
        row(1, 0, [0.1, 0.5, 0.6]),  # mean 0.1, 0.45, 0.6: last gain 0.15
        row(1, 1, [0.1, 0.4, 0.6]),  # last values 0.6, 0.6: spread 0
        row(4, 0, [0.2, 0.60, 0.60]),  # mean 0.2, 0.6, 0.63: last gain 0.03
        row(4, 1, [0.2, 0.60, 0.66]),  # last values 0.60, 0.66: spread 0.06 / sqrt(2) = 0.042
    ]
    spreads = sweep_spreads(rows, "2")
    assert spreads == pytest.approx({"h = 1": 0.0, "h = 4": 0.06 / np.sqrt(2)})
    ends = curve_ends(sweep_curves(rows, "2"), spreads)
    assert ends.loc["h = 1", "last-epoch gain"] == pytest.approx(0.15)
    assert ends.loc["h = 1", "share of the rise"] == pytest.approx(0.15 / 0.5)
    assert ends.loc["h = 4", "last-epoch gain"] == pytest.approx(0.03)
    assert ends["levelled off"].tolist() == [False, True]  # 0.15 >= 0; 0.03 < 0.042
    one_seed = sweep_spreads(rows[:1], "2")
    assert np.isnan(one_seed["h = 1"])
    assert not curve_ends(sweep_curves(rows[:1], "2"), one_seed)["levelled off"].any()
    assert "levelled off" not in curve_ends(sweep_curves(rows, "2")).columns


def _tiny_run(tmp_path):
    """A tiny configuration (3 steps per epoch, 2 epochs) and its train/dev/test data."""
    from audiorepro.config import CorpusSpec
    from audiorepro.experiments.awe import Config
    from audiorepro.models.awe import AWEModelConfig
    from audiorepro.training.plateau import PlateauTrainConfig

    words = ["absolutely", "because", "something"]
    data = {}
    for split in ("train", "dev", "test"):
        keys = [
            f"{words[i % 3]}_sw0200{i}-A_{10 * i:06d}-{10 * i + 12 + i % 5:06d}" for i in range(12)
        ]
        root = tmp_path / split
        write_corpus(root, keys, dim=6)
        (root / f"{split}.list").write_text((root / "test.list").read_text())
        (root / f"swbd.{split}.npz").write_bytes((root / "swbd.test.npz").read_bytes())
        data[split] = prepare_split(root, split, feature_dim=6)
    model = AWEModelConfig(
        feature_dim=6,
        d_model=8,
        acoustic_layers=1,
        acoustic_heads=2,
        acoustic_ff=16,
        phone_layers=1,
        phone_heads=2,
        phone_ff=16,
    )
    cfg = Config(
        corpus=CorpusSpec("smoke"),
        model=model,
        train=PlateauTrainConfig(
            batch_size=4, lr=1e-3, num_epochs=2, device="cpu", torch_threads=1
        ),
        distance="cos",
        loss_k=2,
        seed=5,
    )
    return cfg, data


def test_train_is_reproducible_reuses_its_run_and_evaluates_both_views(tmp_path):
    from audiorepro.config import replace
    from audiorepro.experiments.awe import evaluate, train
    from audiorepro.storage import RunStore

    cfg, data = _tiny_run(tmp_path)
    store = RunStore("04_awe", tmp_path / "runs")
    first = train(cfg, data, store=store)
    second = train(cfg, data, store=RunStore("04_awe", tmp_path / "other"))
    assert first.history.eval_metrics == second.history.eval_metrics
    assert len(first.history.eval_metrics) == 2 and first.history.final_step == 6
    for a, b in zip(first.model.parameters(), second.model.parameters(), strict=True):
        assert torch.equal(a, b)
    scores = evaluate(first.model, data["test"])
    assert set(scores) == {"acoustic_ap", "crossview_ap"}
    assert all(0.0 < v <= 1.0 for v in scores.values())
    # The same configuration again is loaded from the store; chapter-level fields do not count.
    again = train(replace(cfg, dtw_tokens=7, sweep_epochs=3), data, store=store)
    assert again.path == first.path and len(store.runs("model")) == 1
    assert evaluate(again.model, data["test"]) == scores
    other = train(replace(cfg, seed=6), data, store=store)
    assert other.path != first.path and len(store.runs("model")) == 2
    # the run keeps the best dev state (evaluated at select: best) and the final one
    from audiorepro.training.checkpoint import load_model_weights

    assert first.selected == "best" and (first.path / "final.safetensors").is_file()
    final = train(replace(cfg, select="final"), data, store=store)
    assert final.path == first.path and final.selected == "final"
    for name, run in (("model.safetensors", first), ("final.safetensors", final)):
        saved = type(run.model)(run.model_config)
        load_model_weights(saved, run.path / name)
        for a, b in zip(saved.parameters(), run.model.parameters(), strict=True):
            assert torch.equal(a, b), name
    best_epoch = max(range(2), key=lambda e: first.history.eval_metrics[e]["crossview_ap"])
    assert first.best_dev == first.history.eval_metrics[best_epoch]["crossview_ap"]
    with pytest.raises(ConfigError, match="Config.select"):
        replace(cfg, select="last")


@pytest.mark.parametrize("kind", ["smoke", "embedded", "paper"])
def test_corpus_root_is_honoured_for_every_kind(tmp_path, monkeypatch, kind):
    import audiorepro.data.embedded.generate as generate
    import audiorepro.data.embedded.word_corpus as word_corpus
    from audiorepro.config import CorpusSpec
    from audiorepro.experiments.awe import Config, corpus_root

    made = []
    monkeypatch.setattr(word_corpus, "generate_word_corpus", lambda *a: made.append(a))
    monkeypatch.setattr(generate, "ensure_corpora", lambda *a, **k: pytest.fail("default place"))
    cfg = Config(corpus=CorpusSpec(kind, root=str(tmp_path / "words"), seed=3))
    assert corpus_root(cfg) == tmp_path / "words"
    # A generated corpus is generated (or reused) there; a paper corpus is only read.
    assert made == ([] if kind == "paper" else [(tmp_path / "words", kind, 3)])


def test_a_killed_run_resumes_from_its_last_checkpoint_bit_for_bit(tmp_path):
    from audiorepro.config import replace
    from audiorepro.experiments.awe import train
    from audiorepro.experiments.awe.train import run_config
    from audiorepro.storage import RunStore

    cfg, data = _tiny_run(tmp_path)  # 3 steps per epoch, 2 epochs
    whole = train(cfg, data, store=RunStore("04_awe", tmp_path / "whole"))
    store = RunStore("04_awe", tmp_path / "runs")
    with pytest.raises(Killed):
        train(cfg, data, store=store, callbacks=[KillAt(5)])
    staging = store.staging(store.run("model", run_config(cfg, data)))
    assert store.runs("model") == [] and (staging / "checkpoints").is_dir()
    # Another configuration has its own staging folder and starts from step 0.
    other = KillAt()
    train(replace(cfg, seed=6), data, store=store, callbacks=[other])
    assert other.steps == [1, 2, 3, 4, 5, 6] and (staging / "checkpoints").is_dir()
    # The same configuration continues from the step-3 checkpoint (end of epoch 1).
    again = KillAt()
    resumed = train(cfg, data, store=store, callbacks=[again])
    assert again.steps == [4, 5, 6]
    assert resumed.history.resumed_from is not None and resumed.history.final_step == 6
    assert resumed.history.eval_metrics == whole.history.eval_metrics
    for a, b in zip(whole.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not staging.exists()  # published: the checkpoints are gone


def test_the_corpus_as_a_segments_table_gives_the_chapters_tokens_exactly(tmp_path):
    """The `audiorepro awe` path (a segments table of wavs, read_segments, segments_data) cuts
    the same frames as the chapter's Switchboard-layout loader, token for token."""
    from audiorepro.config import CorpusSpec, replace
    from audiorepro.data.recipes.switchboard import load_vocab
    from audiorepro.data.recordings import read_segments
    from audiorepro.experiments import awe

    cfg = awe.load_config("smoke")
    data = awe.load_data(cfg)
    vocab = load_vocab(awe.corpus_root(cfg) / "vocab.json")
    for split in ("train", "test"):
        table = awe.corpus_segments_table(cfg, data[split], tmp_path / f"{split}.tsv")
        header, first = table.read_text().splitlines()[:2]
        assert header.split("\t") == ["path", "word", "speaker", "start", "end"]
        assert first.split("\t")[0].endswith(".wav")
        rows = read_segments(table)
        pron = {r.word: vocab.pronunciation(r.word) for r in rows}
        seg = awe.segments_data(
            rows, pron, vocab.phones_to_ids, split=split, feature_dim=cfg.model.feature_dim
        )
        assert awe.compare_segments(data[split], seg) == {
            "tokens": (len(data[split]), len(data[split])),
            "same_words": True, "same_speakers": True, "same_phones": True,
            "same_frame_counts": True, "max_abs_feature_diff": 0.0,
        }  # fmt: skip
    # one token cut a frame short is seen
    shorter = replace(seg, feats=[f[:-1] for f in seg.feats])
    assert awe.compare_segments(data["test"], shorter)["same_frame_counts"] is False
    shifted = replace(seg, feats=[f + 0.5 for f in seg.feats])
    assert awe.compare_segments(data["test"], shifted)["max_abs_feature_diff"] == pytest.approx(
        0.5
    )
    # a corpus without audio (the real Switchboard word lists) cannot be cut
    no_audio = replace(cfg, corpus=CorpusSpec("paper", root=str(tmp_path / "swbd")))
    with pytest.raises(FileNotFoundError, match="no audio"):
        awe.corpus_segments_table(no_audio, data["test"], tmp_path / "x.tsv")


def test_written_word_geometry_counts_first_phone_neighbours_and_the_mean_cosine(monkeypatch):
    from audiorepro.experiments import awe

    evaluation = importlib.import_module("audiorepro.experiments.awe.evaluate")
    phones = {w: np.array(p) for w, p in
              {"a": [1, 2], "b": [1, 3], "c": [2, 1], "d": [2, 2]}.items()}  # fmt: skip
    vectors = {"a": [1.0, 0.0], "b": [0.9, 0.1], "c": [0.0, 1.0], "d": [0.1, 0.9]}

    def fake_embed_words(model, word_phones, batch_size=512):
        words = sorted(word_phones)
        return words, np.array([vectors[w] for w in words], dtype=np.float32)

    monkeypatch.setattr(evaluation, "embed_words", fake_embed_words)
    # a <-> b and c <-> d are nearest: all four share their neighbour's first phone; each word
    # has 1 of 3 others with its first phone.
    unit = {w: np.array(v) / np.linalg.norm(v) for w, v in vectors.items()}
    pairs = [unit[a] @ unit[b] for a in unit for b in unit if a != b]
    assert awe.written_word_geometry(None, phones) == pytest.approx(
        {"first_phone_share": 1.0, "chance": 1 / 3, "mean_cosine": np.mean(pairs)}
    )
    # Now a points away from all (nearest: d, cos -0.994), b and d nearly coincide (cos
    # 0.99998) and c's nearest is b (0.995 against 0.994): every neighbour starts otherwise.
    vectors.update(a=[0.0, -1.0], b=[0.1, 1.0])
    assert awe.written_word_geometry(None, phones)["first_phone_share"] == 0.0
    with pytest.raises(ValueError, match="two written words"):
        awe.written_word_geometry(None, {"a": phones["a"]})
    vectors.update(a=[1.0, 0.0], b=[2.0, 0.0], c=[3.0, 0.0], d=[0.5, 0.0])  # collapsed
    assert awe.written_word_geometry(None, phones)["mean_cosine"] == pytest.approx(1.0)


def test_anchor_check_ranks_other_speakers_tokens_against_centroids_and_written_words(
    monkeypatch,
):
    from audiorepro.data.awe import WordSegments
    from audiorepro.experiments import awe
    from audiorepro.metrics.average_precision import cross_view_ap, same_different_ap

    evaluation = importlib.import_module("audiorepro.experiments.awe.evaluate")
    rng = np.random.default_rng(0)
    # speakers s1, s3 form the first half (sorted, alternately), s2, s4 the second; "z" has
    # tokens in the second half only and is left out.
    tokens = [("x", "s1"), ("x", "s3"), ("y", "s1"), ("x", "s2"), ("y", "s2"), ("x", "s4"),
              ("y", "s4"), ("z", "s2"), ("y", "s3")]  # fmt: skip
    words, speakers = [t[0] for t in tokens], [t[1] for t in tokens]
    segments = WordSegments(
        split="test", keys=[f"k{i}" for i in range(len(tokens))], words=words,
        speakers=speakers, feats=[np.zeros((3, 2), np.float32)] * len(tokens),
        phones=[np.array([1])] * len(tokens),
        word_phones={"x": np.array([1]), "y": np.array([2]), "z": np.array([3])},
        num_phones=3, dropped={},
    )  # fmt: skip
    emb = rng.normal(size=(len(tokens), 4)).astype(np.float32)
    written = {"x": rng.normal(size=4), "y": rng.normal(size=4), "z": rng.normal(size=4)}
    monkeypatch.setattr(evaluation, "embed_segments", lambda model, seg, batch_size=512: emb)
    monkeypatch.setattr(
        evaluation,
        "embed_words",
        lambda model, wp, batch_size=512: (
            sorted(wp),
            np.array([written[w] for w in sorted(wp)], np.float32),
        ),
    )
    got = awe.anchor_check(None, segments)
    test = [3, 4, 5, 6]  # second-half tokens of x and y
    labels = [words[i] for i in test]
    centroids = np.stack([emb[[0, 1]].mean(0), emb[[2, 8]].mean(0)])  # x: s1, s3; y: s1, s3
    assert got["tokens"] == 4 and got["words"] == 2
    assert got["acoustic_ap"] == pytest.approx(same_different_ap(emb[test], labels))
    assert got["centroid_ap"] == pytest.approx(
        cross_view_ap(emb[test], labels, centroids, ["x", "y"])
    )
    assert got["crossview_ap"] == pytest.approx(
        cross_view_ap(emb[test], labels, np.stack([written["x"], written["y"]]), ["x", "y"])
    )
    lonely = WordSegments(**{**segments.__dict__, "speakers": ["s1"] * len(tokens)})
    with pytest.raises(ValueError, match="fewer than two words"):
        awe.anchor_check(None, lonely)


def test_pronunciation_variation_counts_dictionary_matches_and_each_words_realisations(
    tmp_path, monkeypatch
):
    from audiorepro.data.embedded.word_corpus import MANIFEST_DIR
    from audiorepro.data.manifests import AlignmentItem, Supervision, write_manifest
    from audiorepro.experiments import awe

    evaluation = importlib.import_module("audiorepro.experiments.awe.evaluate")
    dictionary = {"better": ["B", "EH", "T", "ER"], "camera": ["K", "AE", "M", "ER", "AH"]}
    realised = [
        ["B", "EH", "T", "ER"],  # the dictionary's
        ["B", "EH", "T", "ER", "R"],  # one insertion: 1 / 4
        ["B", "EH", "T", "ER"],
        ["K", "AE", "M", "AH", "R", "AH"],  # ER -> AH, R inserted: 2 / 5
        ["K", "AE", "M", "AH", "R", "AH"],
        ["B", "EH", "D", "ER"],  # one substitution: 1 / 4
    ]
    words = ["better", "better", "better", "camera", "camera", "better"]
    got = evaluation.pronunciation_variation(realised, words, dictionary)
    assert got["dictionary_match"] == pytest.approx(2 / 6)
    assert got["phone_error_rate"] == pytest.approx((0 + 0.25 + 0 + 0.4 + 0.4 + 0.25) / 6)
    # better: 2 of 4 tokens in its usual form; camera: 2 of 2
    assert got["usual_realisation"] == pytest.approx(4 / 6)
    assert got["words_with_variants"] == pytest.approx(1 / 2)
    assert (got["tokens"], got["words"]) == (6, 2)
    with pytest.raises(ValueError, match="no dictionary entry for \\['cat'\\]"):
        evaluation.pronunciation_variation([["K"]], ["cat"], dictionary)
    with pytest.raises(ValueError, match="no word has two or more tokens"):
        evaluation.pronunciation_variation(realised[3:5], ["camera", "better"], dictionary)

    # the same from a corpus's supervision manifest, in the layout the word corpus writes
    sups = [
        Supervision(
            id=f"t{i}",
            recording_id="S001-A",
            start=float(i),
            duration=0.5,
            text=w,
            speaker="S001",
            custom={"pronunciation": dictionary[w]},
            alignment={
                "phone": tuple(AlignmentItem(p, i + 0.08 * k, 0.08) for k, p in enumerate(phones))
            },
        )  # fmt: skip
        for i, (w, phones) in enumerate(zip(words, realised, strict=True))
    ]
    write_manifest(tmp_path / MANIFEST_DIR / "test_supervisions.jsonl.gz", sups)
    monkeypatch.setattr(evaluation, "corpus_root", lambda config: tmp_path)
    assert awe.corpus_pronunciation_variation(awe.load_config("smoke")) == got
    # a corpus without phone alignments (Switchboard's list + npz layout): nothing to say
    assert awe.corpus_pronunciation_variation(awe.load_config("smoke"), "dev") is None
    # a token without its alignment is an error naming it, not a silent mismatch
    bare = dataclasses.replace(sups[2], alignment=None)
    write_manifest(tmp_path / MANIFEST_DIR / "dev_supervisions.jsonl.gz", [*sups[:2], bare])
    with pytest.raises(ValueError, match="supervision 't2' lacks its phone alignment"):
        awe.corpus_pronunciation_variation(awe.load_config("smoke"), "dev")
