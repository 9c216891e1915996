from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from audiorepro.repro import environment_snapshot, seed_everything


def draw():
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_same_seed_same_numbers_other_seed_other_numbers():
    seed_everything(7)
    a = draw()
    seed_everything(7)
    b = draw()
    seed_everything(8)
    c = draw()
    assert a == b
    assert all(x != y for x, y in zip(a, c, strict=True))


def test_returned_generator_is_seeded():
    g1, g2 = seed_everything(3), seed_everything(3)
    assert torch.equal(torch.rand(4, generator=g1), torch.rand(4, generator=g2))


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        seed_everything(bad)


def test_environment_snapshot_has_versions_sha_and_device():
    snap = environment_snapshot()
    assert snap["packages"]["torch"] == torch.__version__.split("+")[0] or snap["packages"][
        "torch"
    ].startswith(torch.__version__.split("+")[0])
    assert snap["device"].startswith(("cpu", "cuda", "mps"))
    assert snap["python"].startswith("3.")
    assert "git_sha" in snap
