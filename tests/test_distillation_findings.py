"""Chapter 02's findings and mechanism checks on hand-made ledger records: each verdict
(reproduces, contradicts, inconclusive within the spread, inconclusive below 3 × chance), the
Table 2 analogue with the stage-1 ensemble and the training-caption top-1."""

from __future__ import annotations

import math

import pytest

from audiorepro.experiments.distillation.config import CHAPTER, Config
from audiorepro.experiments.distillation.findings import findings, mechanisms, table2
from audiorepro.reporting import config_hash_of

CHANCE = {"mAP@10": 0.01, "R@1": 0.002, "R@5": 0.01, "R@10": 0.02, "train_top1": 0.005}
"""3 × chance mAP@10 = 3 %: a compared run must beat it."""


def rec(tags: dict, seed: int, map10: float, **metrics: float) -> dict:
    return {
        "chapter": CHAPTER, "page": "04_evaluate", "preset": "smoke", "seed": seed,
        "config_hash": config_hash_of(Config()),
        "tags": tags, "metrics": {"mAP@10": map10, "R@1": map10 / 2, "R@5": map10,
                                  "R@10": 2 * map10, **metrics},
    }  # fmt: skip


def runs(tags: dict, values: list[float], **metrics: float) -> list[dict]:
    return [rec(tags, seed, v, **metrics) for seed, v in enumerate(values)]


def stage1(name: str) -> dict:
    return {"model": name, "stage": "stage1"}


def distilled(name: str, lam: float = 1.0) -> dict:
    return {"model": name, "stage": "distilled", "lam": lam}


def ledger() -> list[dict]:
    records = [
        # passt: distillation helps beyond the spread; λ = 0 runs never beat 3 × chance
        *runs(stage1("passt"), [0.20, 0.21, 0.22], train_top1=0.30),
        *runs(distilled("passt"), [0.30, 0.31, 0.32]),
        *runs(distilled("passt", 0.0), [0.020, 0.021, 0.022]),
        # atst: distillation hurts beyond the spread
        *runs(stage1("atst"), [0.25, 0.26, 0.27], train_top1=0.40),
        *runs(distilled("atst"), [0.15, 0.16, 0.17]),
        # mobilenet: within the spread
        *runs(stage1("mobilenet"), [0.10, 0.20, 0.30], train_top1=0.20),
        *runs(distilled("mobilenet"), [0.12, 0.19, 0.31]),
        # the stage-1 ensemble beats passt and mobilenet but not atst on the evaluation split
        *runs(stage1("ensemble"), [0.24, 0.25, 0.26], train_top1=0.35),
        # the distilled ensemble falls short of the best member (passt)
        *runs({"model": "ensemble", "stage": "distilled", "lam": 1.0}, [0.27, 0.28, 0.29]),
        # page 02's measured targets
        {"chapter": CHAPTER, "page": "02_correspondences", "preset": "smoke", "seed": 0,
         "config_hash": config_hash_of(Config()),
         "tags": {"analysis": "beliefs"},
         "metrics": {"offpair_audio": 0.01, "offpair_caption": 0.02, "offpair_uniform": 0.9,
                     "batch_size": 16.0}},
    ]  # fmt: skip
    return records


def test_each_claim_gets_its_verdict():
    config = Config(sweep_models=("passt",))
    table = findings(ledger(), config, "smoke", CHANCE).set_index("metric")["finding"]
    assert table["passt, distilled"].startswith(
        "distillation fine-tuning improves passt: reproduces, mAP@10 31.00 ± 1.00 vs 21.00"
    )
    assert table["atst, distilled"].startswith(
        "distillation fine-tuning improves atst: contradicts"
    )
    assert table["mobilenet, distilled"].startswith(
        "distillation fine-tuning improves mobilenet: inconclusive (the difference is within "
        "the seed spread)"
    )
    assert table["passt, distilled (λ = 1) vs λ = 0"].startswith(
        "λ = 1 beats λ = 0 (plain fine-tuning) for passt: inconclusive (the compared setting "
        "does not reach the chance floor 3.00)"
    )
    assert table["ensemble of the distilled models"].startswith(
        "the ensemble beats the best single distilled model (passt): contradicts"
    )
    ours = findings(ledger(), config, "smoke", CHANCE).set_index("metric")["ours"]
    assert ours["ensemble of the stage-1 models"] == "25.00 ± 1.00"


def test_nothing_learned_is_inconclusive_whatever_the_difference():
    config = Config(teachers=("passt",), sweep_models=())
    records = [
        *runs(stage1("passt"), [0.010, 0.011, 0.012]),
        *runs(distilled("passt"), [0.020, 0.021, 0.022]),  # better, but below 3 %
    ]
    records = [r | {"config_hash": config_hash_of(config)} for r in records]
    table = findings(records, config, "smoke", CHANCE).set_index("metric")["finding"]
    assert (
        "inconclusive (neither compared run reaches the chance floor 3.00)"
        in table["passt, distilled"]
    )
    assert (
        findings(records, config, "smoke", {**CHANCE, "mAP@10": 0.001})
        .set_index("metric")["finding"]["passt, distilled"]
        .startswith("distillation fine-tuning improves passt: reproduces")
    )


def test_runs_whose_late_loss_stayed_high_are_judged_by_their_map():
    """Above 3 x chance with a late NT-Xent loss near ln(batch): the verdict goes by mAP@10,
    in the table and in the mechanism checks alike; a run at chance is inconclusive."""
    config = Config(teachers=("passt", "mobilenet"), sweep_models=(), mobilenet_batch_size=8)
    high = math.log(config.retrieval.train.batch_size)  # a model that tells nothing apart
    records = [
        *runs(stage1("passt"), [0.20, 0.21, 0.22], late_loss=high - 1.0),
        *runs(distilled("passt"), [0.30, 0.31, 0.32], late_loss=high),
        *runs(stage1("mobilenet"), [0.20, 0.21, 0.22], late_loss=high),
        *runs(distilled("mobilenet"), [0.02, 0.02, 0.02], late_loss=1.0),  # at chance
        *runs({"model": "ensemble", "stage": "distilled", "lam": 1.0}, [0.40, 0.41, 0.42]),
    ]
    records = [r | {"config_hash": config_hash_of(config)} for r in records]
    table = findings(records, config, "smoke", CHANCE).set_index("metric")["finding"]
    assert table["passt, distilled"].startswith(
        "distillation fine-tuning improves passt: reproduces, mAP@10 31.00"
    )
    assert "mobilenet: inconclusive (the paper's better setting does not reach the chance " \
        "floor 3.00)" in table["mobilenet, distilled"]  # fmt: skip
    checks = mechanisms(records, config, "smoke", CHANCE).set_index("claim")
    assert "distillation fine-tuning improves passt" not in checks.index  # it reproduces
    assert checks.loc["distillation fine-tuning improves mobilenet", "verdict"].startswith(
        "inconclusive (the paper's better setting does not reach the chance floor"
    )


def test_mechanism_checks_for_the_claims_that_do_not_reproduce():
    config = Config(sweep_models=("passt",))
    checks = mechanisms(ledger(), config, "smoke", CHANCE).set_index("claim")
    assert "distillation fine-tuning improves passt" not in checks.index  # it reproduces
    atst = checks.loc["distillation fine-tuning improves atst"]
    assert atst["verdict"] == "contradicts"
    assert "stage-1 ensemble 25.00, atst 26.00" in atst["measured"]
    assert "ensemble 35.0 %, atst 40.0 % (chance 0.5 %)" in atst["measured"]
    assert "not better than atst on both counts" in atst["reading"]
    mobilenet = checks.loc["distillation fine-tuning improves mobilenet"]
    assert "the mechanism is there" in mobilenet["reading"]
    lam = checks.loc["λ = 1 beats λ = 0 (plain fine-tuning) for passt"]
    assert lam["verdict"].startswith("inconclusive (the compared setting does not reach")
    assert "p̂_a moves 0.010 and p̂_c 0.020" in lam["measured"]
    assert "nearly one-hot" in lam["reading"]
    ens = checks.loc["the ensemble beats the best single distilled model (passt)"]
    assert "passt 31.00, atst 16.00, mobilenet 20.67; ensemble 28.00" in ens["measured"]
    assert ens["reading"] == (
        "averaging beats the members' mean (22.56) but not the best member, which leads the "
        "next by 10.33 points"
    )


def test_table_2_shows_the_stage_1_ensemble_top1_and_chance():
    out = table2(ledger(), Config(), "smoke", chance=CHANCE).set_index("setting")
    assert out.loc["ensemble of the stage-1 models", "training top-1"] == "35.00 ± 0.00"
    assert out.loc["atst, stage 1", "training top-1"] == "40.00 ± 0.00"
    assert out.loc["passt, distilled (λ = 1)", "training top-1"] == "—"
    assert out.loc["ensemble of the stage-1 models", "mAP@10"] == "25.00 ± 1.00"
    chance = out.loc["chance (random ranking)"]
    assert (chance["mAP@10"], chance["training top-1"]) == ("1.00", "0.50")
    assert list(out.columns) == ["seeds", "mAP@10", "R@1", "R@5", "R@10", "training top-1"]


@pytest.mark.parametrize("missing", ["stage1", "beliefs"])
def test_mechanisms_say_what_was_not_measured(missing):
    records = [
        r for r in ledger()
        if not (missing == "stage1" and r["tags"].get("model") == "ensemble"
                and r["tags"].get("stage") == "stage1")
        and not (missing == "beliefs" and r["tags"].get("analysis"))
    ]  # fmt: skip
    config = Config(sweep_models=("passt",))
    records = [r | {"config_hash": config_hash_of(config)} for r in records]
    checks = mechanisms(records, config, "smoke", CHANCE)
    text = " ".join(checks["measured"]) + " ".join(checks["reading"])
    assert ("run page 01" if missing == "stage1" else "run page 02") in text
