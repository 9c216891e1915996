"""NT-Xent: brute-force reference, multi-positive mask, temperature, and the 2-process gather."""

from __future__ import annotations

import math
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from audiorepro.losses.contrastive import NTXentLoss, gather_with_grad, nt_xent, positive_mask


def reference_loss(a, t, ids, tau):
    """Loops over every entry: -1/2 (mean over positives of row log-softmax + column ...)."""
    a = a / a.norm(dim=1, keepdim=True)
    t = t / t.norm(dim=1, keepdim=True)
    n = a.shape[0]
    c = [[float(a[i] @ t[j]) / tau for j in range(n)] for i in range(n)]
    rows, cols = [], []
    for i in range(n):
        for j in range(n):
            if ids[i] != ids[j]:
                continue
            row_norm = math.log(sum(math.exp(c[i][k]) for k in range(n)))
            col_norm = math.log(sum(math.exp(c[k][j]) for k in range(n)))
            rows.append(c[i][j] - row_norm)
            cols.append(c[i][j] - col_norm)
    return -0.5 * (sum(rows) / len(rows) + sum(cols) / len(cols))


def test_nt_xent_matches_brute_force_with_shared_audio():
    g = torch.Generator().manual_seed(0)
    a, t = torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)
    ids = torch.tensor([0, 1, 1, 2, 3, 1])
    got = nt_xent(a, t, ids, tau=0.05)
    assert got.item() == pytest.approx(reference_loss(a, t, ids.tolist(), 0.05), rel=1e-5)
    distinct = nt_xent(a, t, None, tau=0.3)
    assert distinct.item() == pytest.approx(reference_loss(a, t, list(range(6)), 0.3), rel=1e-5)


def test_hand_computed_two_items():
    # orthonormal, matching pairs: C = I / tau; row loss = -log(e^(1/tau) / (e^(1/tau) + 1))
    a = torch.eye(2)
    tau = 0.5
    expected = -math.log(math.exp(2) / (math.exp(2) + 1))
    assert nt_xent(a, a.clone(), None, tau).item() == pytest.approx(expected, rel=1e-6)


def test_positive_mask_and_shape_errors():
    assert positive_mask(torch.tensor([3, 3, 1])).tolist() == [
        [True, True, False],
        [True, True, False],
        [False, False, True],
    ]
    with pytest.raises(ValueError, match=r"\(B, D\)"):
        nt_xent(torch.zeros(3, 4), torch.zeros(2, 4))


def test_fixed_and_learnable_temperature():
    fixed = NTXentLoss(0.05)
    assert not fixed.log_tau.requires_grad and fixed.tau.item() == pytest.approx(0.05)
    learn = NTXentLoss(0.05, learnable_tau=True)
    a, t = torch.randn(4, 3), torch.randn(4, 3)
    learn(a, t).backward()
    assert learn.log_tau.grad is not None and learn.log_tau.grad.abs() > 0
    with pytest.raises(ValueError, match="tau must be > 0"):
        NTXentLoss(0.0)


def single_process_reference(model_state, x_audio, x_text, ids):
    model = torch.nn.Linear(4, 3)
    model.load_state_dict(model_state)
    loss = NTXentLoss(0.1)(model(x_audio), model(x_text) * 2, ids)
    loss.backward()
    return loss.item(), model.weight.grad.clone(), model.bias.grad.clone()


def _worker(rank, world, port, model_state, x_audio, x_text, ids, splits, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = torch.nn.Linear(4, 3)
        model.load_state_dict(model_state)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        lo, hi = splits[rank], splits[rank + 1]
        loss = NTXentLoss(0.1)(ddp(x_audio[lo:hi]), ddp(x_text[lo:hi]) * 2, ids[lo:hi])
        loss.backward()  # DDP averages gradients over the processes
        gathered = gather_with_grad(torch.arange(lo, hi))
        out[rank] = (loss.item(), model.weight.grad.clone(), model.bias.grad.clone(), gathered)
    finally:
        torch.distributed.destroy_process_group()


def test_two_processes_equal_one_process_on_the_global_batch():
    torch.manual_seed(0)
    model_state = torch.nn.Linear(4, 3).state_dict()
    x_audio, x_text = torch.randn(7, 4), torch.randn(7, 4)
    ids = torch.tensor([0, 1, 2, 2, 3, 4, 0])  # shared audio across the two shards
    splits = [0, 4, 7]  # unequal shards: 4 + 3
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(
        _worker,
        args=(2, port, model_state, x_audio, x_text, ids, splits, out),
        nprocs=2,
        join=True,
    )
    ref_loss, ref_w, ref_b = single_process_reference(model_state, x_audio, x_text, ids)
    for rank in (0, 1):
        loss, w, b, gathered = out[rank]
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        torch.testing.assert_close(w, ref_w, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(b, ref_b, rtol=1e-4, atol=1e-6)
        assert gathered.tolist() == list(range(7))
