"""L = L_sup + λ L_dist (paper (b) §3): brute-force loops, hand-computed cases, modes, salsa's
convention, and the axes of the targets."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from audiorepro.distillation import soft_targets
from audiorepro.losses.distillation import (
    distillation_loss,
    distillation_objective,
    soft_cross_entropy,
)


def brute_force_l_dist(s: list, p_a: list, p_c: list) -> float:
    """Paper (b) §3 written out with loops: mean over captions of H(p̂_a, q_a) plus mean over
    audios of H(p̂_c, q_c)."""
    n_a, n_c = len(s), len(s[0])
    h_a = 0.0
    for j in range(n_c):
        norm = math.log(sum(math.exp(s[i2][j]) for i2 in range(n_a)))
        h_a += -sum(p_a[i][j] * (s[i][j] - norm) for i in range(n_a))
    h_c = 0.0
    for i in range(n_a):
        norm = math.log(sum(math.exp(s[i][j2]) for j2 in range(n_c)))
        h_c += -sum(p_c[i][j] * (s[i][j] - norm) for j in range(n_c))
    return float(h_a / n_c + h_c / n_a)


def test_matches_a_brute_force_loop_on_random_batches():
    gen = torch.Generator().manual_seed(0)
    for size in (1, 3, 6):
        s = torch.randn(size, size, generator=gen, dtype=torch.float64) * 4
        c_hat = torch.rand(size, size, generator=gen, dtype=torch.float64) * 2 - 1
        p_a, p_c = soft_targets(c_hat, tau=0.05)
        got = distillation_loss(s, p_a, p_c, average_directions=False)
        assert float(got) == pytest.approx(
            brute_force_l_dist(s.tolist(), p_a.tolist(), p_c.tolist()), rel=1e-5
        )


def test_hand_computed_cases():
    # Uniform student: each direction costs log 2 whatever the targets.
    p = torch.tensor([[0.9, 0.3], [0.1, 0.7]])
    paper = dict(average_directions=False)
    assert float(distillation_loss(torch.zeros(2, 2), p, p.T.softmax(1), **paper)) == (
        pytest.approx(2 * math.log(2))
    )
    # One-hot targets on the diagonal, S = I: each term is log(1 + e^-1).
    eye = torch.eye(2)
    assert float(distillation_loss(eye, eye, eye, **paper)) == pytest.approx(
        2 * math.log(1 + math.e**-1)
    )
    # The default halves the sum (salsa, chapter 01's NT-Xent).
    assert float(distillation_loss(eye, eye, eye)) == pytest.approx(math.log(1 + math.e**-1))
    # Ties in the targets: two identical audios share a caption's probability equally.
    s = torch.tensor([[2.0, 0.0], [2.0, 0.0]])
    p_a = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    p_c = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    expected = math.log(2) + math.log(1 + math.exp(-2.0))
    assert float(distillation_loss(s, p_a, p_c, **paper)) == pytest.approx(expected, rel=1e-6)


def test_targets_run_over_the_right_axes():
    # Rows audios, columns captions.
    c_hat = torch.tensor([[1.0, 0.0, 0.2], [0.5, 0.5, 0.1]])
    p_a, p_c = soft_targets(c_hat, tau=0.05)
    torch.testing.assert_close(p_a.sum(0), torch.ones(3))  # per caption, over audios
    torch.testing.assert_close(p_c.sum(1), torch.ones(2))  # per audio, over captions
    assert float(p_c[0, 0]) == pytest.approx(1 / (1 + math.exp(-20) + math.exp(-16)))
    assert float(p_a[1, 1]) == pytest.approx(1 / (1 + math.exp(-10)))
    with pytest.raises(ValueError, match="tau"):
        soft_targets(c_hat, tau=0.0)


def test_teacher_equal_to_student_is_a_stationary_point():
    s = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)
    p_a, p_c = s.detach().softmax(0), s.detach().softmax(1)
    distillation_loss(s, p_a, p_c).backward()
    assert float(s.grad.abs().max()) < 1e-12


def test_salsa_convention_is_half_the_paper_sum():
    s = torch.randn(4, 4)
    p_a, p_c = soft_targets(torch.rand(4, 4))
    salsa = 0.5 * (F.cross_entropy(s, p_c) + F.cross_entropy(s.T, p_a.T))
    torch.testing.assert_close(distillation_loss(s, p_a, p_c), salsa)
    torch.testing.assert_close(distillation_loss(s, p_a, p_c, average_directions=False), 2 * salsa)


def test_modes_lambda_zero_one_two_and_dist_only():
    s = torch.randn(4, 4, requires_grad=True)
    p_a, p_c = soft_targets(torch.rand(4, 4))
    dist = distillation_loss(s, p_a, p_c)
    sup = -torch.log_softmax(s, dim=1).diagonal().mean()

    out = distillation_objective(s, p_a, p_c, supervised=lambda x: x.diagonal().mean() * 0 + sup)
    torch.testing.assert_close(out["loss"], sup + dist)
    out2 = distillation_objective(s, p_a, p_c, supervised=sup, lam=2.0)
    torch.testing.assert_close(out2["loss"], sup + 2 * dist)
    assert not out2["loss_dist"].requires_grad

    only_sup = distillation_objective(s, p_a, p_c, supervised=sup, lam=0.0)
    torch.testing.assert_close(only_sup["loss"], sup)
    torch.testing.assert_close(only_sup["loss_dist"], dist.detach())
    (grad_sup,) = torch.autograd.grad(only_sup["loss"], s, retain_graph=True)
    (expected,) = torch.autograd.grad(sup, s, retain_graph=True)
    torch.testing.assert_close(grad_sup, expected)

    no_teacher = distillation_objective(s, None, None, supervised=sup, lam=0.0)
    assert set(no_teacher) == {"loss", "loss_sup"}  # plain fine-tuning: no target to log
    torch.testing.assert_close(no_teacher["loss"], only_sup["loss"])
    for lam, dist_only in ((1.0, False), (0.0, True), (1e-6, False)):
        with pytest.raises(ValueError, match="L_dist needs the targets"):
            distillation_objective(s, None, None, supervised=sup, lam=lam, dist_only=dist_only)

    only_dist = distillation_objective(s, p_a, p_c, dist_only=True)
    torch.testing.assert_close(only_dist["loss"], dist)
    assert "loss_sup" not in only_dist

    with pytest.raises(ValueError, match="supervised"):
        distillation_objective(s, p_a, p_c)
    with pytest.raises(ValueError, match="lam"):
        distillation_objective(s, p_a, p_c, supervised=sup, lam=-1.0)
    with pytest.raises(TypeError, match="scalar"):
        distillation_objective(s, p_a, p_c, supervised=torch.ones(2))


def test_zero_target_mass_where_the_student_underflows():
    s = torch.tensor([[0.0, -1e4], [-1e4, 0.0]])
    eye = torch.eye(2)
    assert torch.isfinite(soft_cross_entropy(s, eye, dim=1))
    with pytest.raises(ValueError, match="equal 2-D"):
        soft_cross_entropy(s, torch.eye(3), dim=1)
