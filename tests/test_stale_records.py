"""Every chapter's tables and findings read only the ledger records of the page's resolved
configuration and seed list: a newer record of another configuration (an older preset, another
setting) or of a seed outside the list changes nothing, while a newer record of the same
configuration and seed does (so the records really are what the tables read)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest

from audiorepro import reporting
from audiorepro.config import CorpusSpec
from audiorepro.experiments import awe, distillation, retrieval, zerospeech

NEWER = "2099-01-01T00:00:00+00:00"


def _record(chapter: str, config, seed: int, tags: dict, metrics: dict) -> dict:
    return {
        "chapter": chapter, "page": "evaluate", "preset": "smoke", "seed": seed,
        "config_hash": reporting.config_hash_of(config), "tags": tags, "metrics": metrics,
        "time": "2024-01-01T00:00:00+00:00",
    }  # fmt: skip


def _changed(rec: dict, **fields) -> dict:
    """A newer copy of ``rec`` with other metric values and ``fields`` replaced."""
    metrics = {k: 0.5 * v + 0.123 for k, v in rec["metrics"].items()}
    return rec | {"metrics": metrics, "time": NEWER} | fields


def _check(records: list[dict], table: Callable[[list[dict]], pd.DataFrame]) -> None:
    before = table(records)
    other_config = [_changed(r, config_hash="0" * 16) for r in records]
    other_seed = [_changed(r, seed=99) for r in records]
    pd.testing.assert_frame_equal(table(records + other_config + other_seed), before)
    same = [_changed(r) for r in records]
    assert not table(records + same).equals(before)


def _retrieval_records(config) -> list[dict]:
    out = []
    for i, seed in enumerate(config.seeds):
        for j, tags in enumerate(
            [{"stage": "pretrain"}, {"stage": "finetune"}, {"stage": "finetune-aug"},
             {"ablation": "audio_encoder", "setting": "passt"},
             {"ablation": "audio_encoder", "setting": "cnn14"}]
        ):  # fmt: skip
            v = 0.2 + 0.05 * j + 0.01 * i
            metrics = {"mAP@10": v, "R@1": v / 2, "R@5": v, "R@10": 2 * v}
            out.append(_record(retrieval.CHAPTER, config, seed, tags, metrics))
    return out


@pytest.mark.parametrize("which", ["findings", "stage_table", "ablation_table"])
def test_retrieval_tables_ignore_stale_records(which):
    config = retrieval.load_config("smoke")
    tables = {
        "findings": lambda r: retrieval.findings(r, config, "smoke", must_beat=1.0),
        "stage_table": lambda r: retrieval.stage_table(r, config, "smoke"),
        "ablation_table": lambda r: retrieval.ablation_table(r, config, "smoke", "audio_encoder"),
    }
    _check(_retrieval_records(config), tables[which])


CHANCE = {"mAP@10": 0.01, "R@1": 0.002, "R@5": 0.01, "R@10": 0.02, "train_top1": 0.005}


@pytest.mark.parametrize("which", ["findings", "table2", "lambda_sweep", "gains"])
def test_distillation_tables_ignore_stale_records(which):
    config = distillation.Config()
    out = []
    for i, seed in enumerate(config.seeds):
        for j, name in enumerate([*config.teachers, "ensemble"]):
            for tags in (
                {"model": name, "stage": "stage1"},
                {"model": name, "stage": "distilled", "lam": config.lam},
                {"model": name, "stage": "distilled", "lam": 0.0},
            ):
                v = 0.2 + 0.03 * j + 0.01 * i + (0.05 if tags["stage"] == "distilled" else 0)
                metrics = {"mAP@10": v, "R@1": v / 2, "R@5": v, "R@10": 2 * v, "train_top1": v}
                out.append(_record(distillation.CHAPTER, config, seed, tags, metrics))
    tables = {
        "findings": lambda r: distillation.findings(r, config, "smoke", CHANCE),
        "table2": lambda r: distillation.table2(r, config, "smoke", chance=CHANCE),
        "lambda_sweep": lambda r: distillation.lambda_sweep(r, config, "smoke"),
        "gains": lambda r: distillation.gains(r, config, "smoke"),
    }
    _check(out, tables[which])


@pytest.mark.parametrize("which", ["findings", "summarize"])
def test_zerospeech_tables_ignore_stale_records(which):
    config = zerospeech.Config()
    out = []
    for row in zerospeech.ablation_rows(config):
        for i, seed in enumerate(config.main_seeds):
            metrics = {"abx_across": 30.0 + i + len(row.key), "bitrate": 100.0 + 3 * i,
                       "codes_used": 50.0 + i, "perplexity": 40.0 + i}  # fmt: skip
            tags = {"row": row.key, "language": "english"}
            out.append(_record(zerospeech.CHAPTER, config, seed, tags, metrics))
    tables = {
        "findings": lambda r: zerospeech.findings(r, config, "smoke"),
        "summarize": lambda r: zerospeech.summarize(r, config, "smoke"),
    }
    _check(out, tables[which])


def test_awe_findings_ignore_stale_records():
    config = awe.Config(corpus=CorpusSpec("smoke"), sweep_layers=(1, 4), sweep_heads=(1, 16))
    out = []
    for i, seed in enumerate(config.seeds):
        metrics = {"acoustic_ap": 0.6 + 0.01 * i, "crossview_ap": 0.5 + 0.01 * i}
        out.append(_record(awe.CHAPTER, config, seed, {"model": "chosen"}, metrics))
    for n in config.sweep_layers:
        for p in ("avg", "rep"):
            tags = {"table": "1", "N": n, "pooling": p}
            metrics = {"crossview_ap": 0.3 + 0.1 * n + (0.1 if p == "avg" else 0.0)}
            out.append(_record(awe.CHAPTER, config, config.seed, tags, metrics))
    for h in config.sweep_heads:
        out.append(
            _record(awe.CHAPTER, config, config.seed, {"table": "2", "h": h}, {"acoustic_ap": h})
        )
    out.append(
        _record(awe.CHAPTER, config, config.seed, {"model": "mfcc-dtw"}, {"acoustic_ap": 0.2})
    )
    _check(out, lambda r: awe.findings(r, config, "smoke"))


def test_config_hash_of_a_dataclass_is_the_hash_its_record_carries(tmp_path):
    from audiorepro.config import to_dict

    config = zerospeech.Config()
    record = reporting.record_result(
        "c", "p", {"x": 1.0}, preset="smoke", seed=0, config=config, path=tmp_path / "l.jsonl"
    )
    assert record["config_hash"] == reporting.config_hash_of(config)
    assert record["config_hash"] == reporting.config_hash_of(to_dict(config))
    assert record["config"] == to_dict(config)
    other = reporting.config_hash_of(zerospeech.Config(seed=1))
    assert other != record["config_hash"]
    assert reporting.current_records([record], config, [1]) == []
    assert reporting.current_records([record], zerospeech.Config(seed=1), [0]) == []
    assert reporting.current_records([record], config, [0]) == [record]
    with pytest.raises(TypeError, match="configuration dataclass"):
        reporting.config_hash_of(3)
