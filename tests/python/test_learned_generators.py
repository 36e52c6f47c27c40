"""Gradients of built-ins' own parameters through grape.torch: GRAPE-M's rank-2 generator
(rank2_rotate_qk: dL/da, dL/db, dL/domega) and RoPE in a learned basis (basis_rotate_qk: dL/dB,
dL/d inv_freq), each against float64 autograd of the dense formula in PyTorch: the matrix
exponential exp(p * omega * (a b^T - b a^T)) and B R(p) B^T, which share no code with grape."""
import pytest
import torch

import grape
from grape.torch import basis_rotate_qk, rank2_rotate_qk

torch.manual_seed(20261205)


def rank2_reference(x, a, b, omega, positions):
    """x [tokens, heads, d] (float64) turned by exp(p * omega * (a b^T - b a^T)), p per token."""
    generator = omega * (torch.outer(a, b) - torch.outer(b, a))
    rho = torch.linalg.matrix_exp(positions.double()[:, None, None] * generator)  # [tokens, d, d]
    return torch.einsum("tij,thj->thi", rho, x)


def basis_reference(x, basis, inv_freq, positions):
    """x [tokens, heads, d] (float64): B R(p) B^T x, R turning planes (2j, 2j+1) by p * inv_freq[j]."""
    z = x @ basis
    angle = positions.double()[:, None, None] * inv_freq[None, None, :]
    even, odd = z[..., 0::2], z[..., 1::2]
    turned = torch.stack([even * torch.cos(angle) - odd * torch.sin(angle),
                          odd * torch.cos(angle) + even * torch.sin(angle)], dim=-1).flatten(-2)
    return turned @ basis.T


def weighted_loss(q_rot, k_rot, wq, wk):
    return (q_rot.double() * wq).sum() + (k_rot.double() * wk).sum()


def assert_grad_close(got, want, rel):
    scale = float(want.abs().max()) + 1e-30
    torch.testing.assert_close(got.double(), want, atol=rel * scale, rtol=0)


@pytest.mark.parametrize("omega_value, offsets", [(0.3, [0, 40]), (2e-5, [0, 100000])])
def test_rank2_gradients_match_float64_autograd_of_the_matrix_exponential(omega_value, offsets):
    d, seq = 8, 6
    a = (0.5 * torch.randn(d, dtype=torch.float64)).requires_grad_()
    b = (0.5 * torch.randn(d, dtype=torch.float64)).requires_grad_()
    omega = torch.tensor(omega_value, dtype=torch.float64, requires_grad=True)
    q = torch.randn(2, seq, 3, d, requires_grad=True)
    k = torch.randn(2, seq, 1, d, requires_grad=True)
    wq, wk = torch.randn(2, seq, 3, d, dtype=torch.float64), torch.randn(2, seq, 1, d, dtype=torch.float64)
    off = torch.tensor(offsets, dtype=torch.int64)
    q_rot, k_rot = rank2_rotate_qk(q, k, a, b, omega, offsets=off)
    weighted_loss(q_rot, k_rot, wq, wk).backward()

    positions = (off[:, None] + torch.arange(seq)[None, :]).reshape(-1)
    a64, b64, w64 = (t.detach().clone().requires_grad_() for t in (a, b, omega))
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    q_ref = rank2_reference(q64.reshape(-1, 3, d), a64, b64, w64, positions).reshape(q.shape)
    k_ref = rank2_reference(k64.reshape(-1, 1, d), a64, b64, w64, positions).reshape(k.shape)
    weighted_loss(q_ref, k_ref, wq, wk).backward()

    torch.testing.assert_close(q_rot.double(), q_ref.detach(), atol=2e-5, rtol=0)
    torch.testing.assert_close(k_rot.double(), k_ref.detach(), atol=2e-5, rtol=0)
    assert_grad_close(q.grad, q64.grad, 1e-5)
    assert_grad_close(k.grad, k64.grad, 1e-5)
    for got, want in ((a.grad, a64.grad), (b.grad, b64.grad), (omega.grad, w64.grad)):
        assert got.dtype == torch.float64 and got.shape == want.shape
        assert_grad_close(got, want, 1e-5)


def test_rank2_takes_explicit_positions_float32_parameters_and_a_python_omega():
    d = 6
    a, b = torch.randn(d, requires_grad=True), torch.randn(d, requires_grad=True)
    positions = torch.tensor([5, 0, 900, 17], dtype=torch.int64)
    q, k = torch.randn(4, 2, d), torch.randn(4, 2, d)
    q_rot, k_rot = rank2_rotate_qk(q, k, a, b, 0.01, positions=positions)
    (q_rot.square().sum() + (k_rot * q).sum()).backward()
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    q_ref = rank2_reference(q.double(), a64, b64, 0.01, positions)
    k_ref = rank2_reference(k.double(), a64, b64, 0.01, positions)
    (q_ref.square().sum() + (k_ref * q.double()).sum()).backward()
    assert a.grad.dtype == torch.float32
    # |R q|^2 does not depend on the generator: only the k term carries a and b.
    assert_grad_close(a.grad, a64.grad, 1e-5)
    assert_grad_close(b.grad, b64.grad, 1e-5)


def test_learned_basis_gradients_match_float64_autograd_of_b_r_bt():
    d, tokens = 8, 7
    basis = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64))[0].requires_grad_()
    inv_freq = torch.tensor([1.0, 0.3, 0.05, 0.001], dtype=torch.float64, requires_grad=True)
    positions = torch.tensor([0, 1, 2, 50, 333, 4000, 65000], dtype=torch.int64)
    q = torch.randn(tokens, 4, d, requires_grad=True)
    k = torch.randn(tokens, 2, d, requires_grad=True)
    wq, wk = torch.randn(tokens, 4, d, dtype=torch.float64), torch.randn(tokens, 2, d, dtype=torch.float64)
    q_rot, k_rot = basis_rotate_qk(q, k, basis, inv_freq, positions=positions)
    weighted_loss(q_rot, k_rot, wq, wk).backward()

    b64, f64 = basis.detach().clone().requires_grad_(), inv_freq.detach().clone().requires_grad_()
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    q_ref, k_ref = basis_reference(q64, b64, f64, positions), basis_reference(k64, b64, f64, positions)
    weighted_loss(q_ref, k_ref, wq, wk).backward()

    torch.testing.assert_close(q_rot.double(), q_ref.detach(), atol=3e-5, rtol=0)
    assert_grad_close(q.grad, q64.grad, 1e-5)
    assert_grad_close(k.grad, k64.grad, 1e-5)
    assert_grad_close(basis.grad, b64.grad, 1e-5)
    assert_grad_close(inv_freq.grad, f64.grad, 1e-4)


def test_a_learned_basis_keeps_the_relative_law():
    """Scores depend on the offset only: <rho(m) q, rho(n) k> equals <q, rho(n - m) k>."""
    d = 8
    basis = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64))[0]
    inv_freq = torch.tensor([1.0, 0.3, 0.05, 0.001], dtype=torch.float64)
    q, k = torch.randn(1, 2, d), torch.randn(1, 2, d)
    q_m, _ = basis_rotate_qk(q, q, basis, inv_freq, positions=torch.tensor([1000]))
    _, k_n = basis_rotate_qk(k, k, basis, inv_freq, positions=torch.tensor([1037]))
    _, k_rel = basis_rotate_qk(k, k, basis, inv_freq, positions=torch.tensor([37]))
    torch.testing.assert_close((q_m * k_n).sum(-1), (q * k_rel).sum(-1), atol=2e-5, rtol=0)


def test_bad_parameters_get_one_line_errors():
    q = torch.randn(3, 1, 8)
    with pytest.raises(ValueError, match="grape: a: must hold head_dim = 8"):
        rank2_rotate_qk(q, q, torch.randn(7), torch.randn(8))
    with pytest.raises(ValueError, match="omega: must be one value"):
        rank2_rotate_qk(q, q, torch.randn(8), torch.randn(8), torch.ones(2))
    with pytest.raises(ValueError, match="a\\[2\\]: must be finite"):
        rank2_rotate_qk(q, q, torch.tensor([0, 1, float("nan"), 0, 0, 0, 0, 0.0]), torch.randn(8))
    with pytest.raises(ValueError, match="grape: basis: must be \\[head_dim, head_dim\\]"):
        basis_rotate_qk(q, q, torch.eye(6), torch.ones(4))
    with pytest.raises(ValueError, match="grape: inv_freq: must hold rotary_dim / 2 = 4 values"):
        basis_rotate_qk(q, q, torch.eye(8), torch.ones(3))


def test_grape_a_lift_gradients_match_float64_autograd_of_its_scores():
    """Scores through grape.torch.lift_qk (q_lifted . k_lifted, GQA 4:2) against q.k + slope_h (n - m)
    in float64 autograd: the values and dL/dq, dL/dk of a weighted sum of every score."""
    from conftest import alibi_paper_slopes
    from grape.torch import lift_qk
    enc = grape.encoding("grape_a", heads=4, head_dim=8)
    positions = torch.tensor([0, 2, 9, 40, 41, 300], dtype=torch.int64)
    q = torch.randn(6, 4, 8, requires_grad=True)
    k = torch.randn(6, 2, 8, requires_grad=True)
    w = torch.randn(4, 6, 6, dtype=torch.float64)
    q_l, k_l = lift_qk(q, k, enc, positions=positions)
    scores = torch.einsum("ihc,jhc->hij", q_l.double(), k_l.double())
    (w * scores).sum().backward()

    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    slopes = torch.tensor(alibi_paper_slopes(4), dtype=torch.float64)
    want = (torch.einsum("ihc,jhc->hij", q64, k64.repeat_interleave(2, dim=1))
            + slopes[:, None, None] * (positions[None, :] - positions[:, None]).double()[None])
    (w * want).sum().backward()
    torch.testing.assert_close(scores.detach(), want.detach(), atol=2e-4, rtol=1e-5)
    assert_grad_close(q.grad, q64.grad, 1e-5)
    assert_grad_close(k.grad, k64.grad, 1e-5)
