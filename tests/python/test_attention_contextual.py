"""The GRAPE paper's content-dependent encodings inside grape's fused attention: GRAPE-AP's
path-integral bias (grape_ap=) and contextual GRAPE-M (grape_m=), forward and backward, against
float64 PyTorch attention with the encoding written from its formula (softmax materialized,
autograd for every gradient): q, k, v, GRAPE-AP's projections, GRAPE-M's frequencies and phases
(and the per-token rates the phases are summed from)."""
import numpy as np
import pytest
import torch

import grape
from grape.torch import attention as torch_attention

torch.manual_seed(20261206)


def path_integral_bias64(p, slopes, eps=1e-6):
    """GRAPE-AP's bias [H, m, n] = sum over n < l <= m of slope_h * log sigmoid(<p_m, R(l - m) p^_l> / P)
    (grape_ap_relative; R the authors' half-split rotation: R(phi)y = (y1 c + y2 s, -y1 s + y2 c)),
    -inf for n > m; p [H, T, P], p^ = p / sqrt(mean(p^2) + eps)."""
    T, P = p.shape[1], p.shape[2]
    y = p / torch.sqrt((p * p).mean(-1, keepdim=True) + eps)
    x1, x2, y1, y2 = p[..., :P // 2], p[..., P // 2:], y[..., :P // 2], y[..., P // 2:]
    a = x1 @ y1.transpose(1, 2) + x2 @ y2.transpose(1, 2)               # [H, m, l]
    b = x1 @ y2.transpose(1, 2) - x2 @ y1.transpose(1, 2)
    phi = (torch.arange(T)[None, :] - torch.arange(T)[:, None]).double()  # l - m
    t = slopes[:, None, None] * torch.nn.functional.logsigmoid((torch.cos(phi) * a + torch.sin(phi) * b) / P)
    t = t.masked_fill(phi > 0, 0.0)                                      # only l <= m is on a path
    prefix = t.cumsum(-1)                                                # [H, m, j] = sum over l <= j
    bias = prefix.diagonal(dim1=1, dim2=2)[..., :, None] - prefix        # sum over j < l <= m
    return bias.masked_fill(phi[None] > 0, float("-inf"))


def phase_rotate64(x, freqs, phases):
    """x [B, T, H, d] turned by phases[b, row(h), t] * freqs[row(h), j] on half-split planes
    (y0 = x0 cos - x1 sin); freqs [rows, d/2], phases [B, rows, T], a row shared or one per head."""
    angle = phases.permute(0, 2, 1)[..., None] * freqs[None, None]     # [B, T, rows, d/2]
    half = freqs.shape[-1]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * torch.cos(angle) - b * torch.sin(angle), b * torch.cos(angle) + a * torch.sin(angle)], -1)


def softmax_attention64(q, k, v, bias=None):
    """softmax(QK^T/sqrt(d) + bias + causal mask) V in float64, q, k, v [B, T, H, d], bias [B, H, T, T]."""
    logits = torch.einsum("bihd,bjhd->bhij", q / q.shape[-1] ** 0.5, k)
    if bias is not None:
        logits = logits + bias
    T = q.shape[1]
    logits = logits.masked_fill(torch.arange(T)[None, :] > torch.arange(T)[:, None], float("-inf"))
    return torch.einsum("bhij,bjhd->bihd", torch.softmax(logits, -1), v)


def _grads(out, params, weight):
    return torch.autograd.grad((out.double() * weight).sum(), params)


def _close(got, want, names):
    for name, g, w in zip(names, got, want):
        assert (g.double() - w).abs().max().item() <= 1e-4 * w.abs().max().item() + 1e-6, name


@pytest.mark.parametrize("per_sequence", [False, True])
def test_grape_ap_output_and_gradients_match_float64(per_sequence):
    batch, seq, heads, d, P = 2, 70, 4, 16, 8
    q, k, v = (torch.randn(batch, seq, heads, d).requires_grad_() for _ in range(3))
    p = torch.randn(*((batch,) if per_sequence else ()), heads, seq, P).requires_grad_()
    weight = torch.randn(batch, seq, heads, d, dtype=torch.float64)
    out = torch_attention(q, k, v, grape_ap=p)
    got = _grads(out, [q, k, v, p], weight)

    q64, k64, v64, p64 = (x.detach().double().requires_grad_() for x in (q, k, v, p))
    slopes = torch.tensor(grape.alibi(heads=heads).slopes, dtype=torch.float64)
    bias = torch.stack([path_integral_bias64(p64[b] if per_sequence else p64, slopes) for b in range(batch)])
    expect = softmax_attention64(q64, k64, v64, bias)
    torch.testing.assert_close(out.double(), expect.detach(), atol=2e-5, rtol=0)
    _close(got, _grads(expect, [q64, k64, v64, p64], weight), ["q", "k", "v", "projections"])


def test_grape_ap_numpy_call_and_norm_eps():
    """NumPy in and out; (projections, norm_eps) sets the RMS normalisation's eps (a large one moves
    the output, so it is not ignored)."""
    seq, heads, d, P = 40, 2, 8, 4
    q, k, v = (np.random.default_rng(s).standard_normal((1, seq, heads, d)).astype(np.float32) for s in range(3))
    p = np.random.default_rng(3).standard_normal((heads, seq, P))
    slopes = torch.tensor(grape.alibi(heads=heads).slopes, dtype=torch.float64)
    for eps in (1e-6, 4.0):
        out = grape.attention(q, k, v, grape_ap=(p, eps))
        bias = path_integral_bias64(torch.tensor(p), slopes, eps)[None]
        expect = softmax_attention64(*(torch.tensor(x).double() for x in (q, k, v)), bias)
        np.testing.assert_allclose(out, expect.numpy(), atol=2e-5, rtol=0)


@pytest.mark.parametrize("rows,per_sequence,start", [("shared", False, 0.0), ("per head", False, 0.0),
                                                     ("per head", True, 0.0), ("per head", True, 1e4)])
def test_contextual_grape_m_output_and_gradients_match_float64(rows, per_sequence, start):
    """Phases as the authors' model makes them, an exclusive cumulative sum of rates omega >= 0, so
    the phases' gradient flows on to the rates through the caller's autograd. From a start far from
    0 every one stays as close: float64 phases, and theta's gradient sum_t (Phi_t - Phi_first) * g_t
    (the g_t add up to 0, so sum_t Phi_t * g_t would lose the ratio Phi / (spread of Phi) to their
    float32 rounding: docs/precision.md)."""
    batch, seq, heads, d = 2, 60, 4, 16
    n_rows = 1 if rows == "shared" else heads
    q, k, v = (torch.randn(batch, seq, heads, d).requires_grad_() for _ in range(3))
    freqs = (torch.rand(n_rows, d // 2) * 0.5 + 0.01).requires_grad_()
    z = torch.randn(*((batch,) if per_sequence else ()), n_rows, seq, dtype=torch.float64).requires_grad_()

    def phases_of(z):
        rates = torch.sigmoid(z) / 16
        return start + torch.nn.functional.pad(rates.cumsum(-1)[..., :-1], (1, 0))

    weight = torch.randn(batch, seq, heads, d, dtype=torch.float64)
    out = torch_attention(q, k, v, grape_m=(freqs, phases_of(z)))
    got = _grads(out, [q, k, v, freqs, z], weight)

    q64, k64, v64, f64, z64 = (x.detach().double().requires_grad_() for x in (q, k, v, freqs, z))
    phases = phases_of(z64)
    phases = phases if per_sequence else phases[None].expand(batch, -1, -1)
    expect = softmax_attention64(phase_rotate64(q64, f64, phases), phase_rotate64(k64, f64, phases), v64)
    torch.testing.assert_close(out.double(), expect.detach(), atol=2e-5, rtol=0)
    want = _grads(expect, [q64, k64, v64, f64, z64], weight)
    _close(got[:3] + got[4:], want[:3] + want[4:], ["q", "k", "v", "rates' logits"])
    theta_error = (got[3].double() - want[3]).abs().max().item() / want[3].abs().max().item()
    print(f"phases from {start:g}: dL/dtheta relative error {theta_error:.1e}")
    assert theta_error <= 1e-4


def test_contextual_grape_m_positions_pick_the_phases():
    """Packed sequences read the phases at their positions: position ids into one phase sequence
    equal separate calls on the two slices."""
    heads, d = 2, 8
    q, k, v = (torch.randn(30, heads, d) for _ in range(3))
    freqs = torch.rand(d // 2, dtype=torch.float64)
    phases = torch.rand(1, 30, dtype=torch.float64).cumsum(-1)
    cu = torch.tensor([0, 12, 30])
    packed = grape.attention(q, k, v, grape_m=(freqs.numpy(), phases.numpy()), cu_seqlens=cu,
                             positions=torch.arange(30))
    for lo, hi in ((0, 12), (12, 30)):
        alone = grape.attention(q[lo:hi], k[lo:hi], v[lo:hi], grape_m=(freqs.numpy(), phases[:, lo:hi].numpy()))
        torch.testing.assert_close(packed[lo:hi], alone, atol=1e-6, rtol=0)


def test_bad_input_is_one_clear_error():
    q, k, v = (torch.randn(1, 8, 4, 16) for _ in range(3))
    with pytest.raises(grape.GrapeError, match="encoding, grape_ap: give one"):
        grape.attention(q, k, v, grape.rope(head_dim=16), grape_ap=np.ones((4, 8, 4)))
    with pytest.raises(grape.GrapeError, match="log_forget, grape_a, grape_ap, grape_m: give one"):
        grape.attention(q, k, v, grape_ap=np.ones((4, 8, 4)), grape_m=(np.ones(8), np.zeros((1, 8))))
    with pytest.raises(grape.GrapeError, match="projections: shape must be \\[heads, seq_len, p_dim\\]"):
        grape.attention(q, k, v, grape_ap=np.ones((8, 4)))
    with pytest.raises(grape.GrapeError, match="^grape: projections: must match q's 4 heads \\(got 3 heads\\)$"):
        grape.attention(q, k, v, grape_ap=np.ones((3, 8, 4)))
    with pytest.raises(grape.GrapeError, match="projections\\[1\\]: must be finite"):
        grape.attention(q, k, v, grape_ap=np.array([[[1.0, np.nan, 1.0, 1.0]] * 8] * 4))
    with pytest.raises(grape.GrapeError, match="freqs: must hold head_dim/2 = 8 or heads x head_dim/2"):
        grape.attention(q, k, v, grape_m=(np.ones(5), np.zeros((1, 8))))
    with pytest.raises(grape.GrapeError, match="phases\\[2\\]: must be finite"):
        grape.attention(q, k, v, grape_m=(np.ones(8), np.array([[0.0, 1.0, np.inf] + [0.0] * 5])))
    with pytest.raises(grape.GrapeError, match="^grape: phases: must be \\[rows, length\\] with length >= 8"):
        grape.attention(q, k, v, grape_m=(np.ones(8), np.zeros((1, 5))))
    with pytest.raises(grape.GrapeError, match="k.heads: this phase rotation has a row per head"):
        grape.attention(q, k[:, :, :2], v[:, :, :2], grape_m=(np.ones((4, 8)), np.zeros((1, 8))))
    with pytest.raises(grape.GrapeError, match="^grape: grape_m: must be \\(freqs, phases\\)$"):
        torch_attention(q, k, v, grape_m=torch.ones(8))
    with pytest.raises(grape.GrapeError, match="^grape: grape_ap: must be projections or \\(projections, norm_eps\\)$"):
        torch_attention(q, k, v, grape_ap=(torch.ones(4, 8, 4), 1e-6, 0))
