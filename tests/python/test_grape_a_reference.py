"""GRAPE-A's gated biases as the GRAPE paper's authors train them (llama-mha-grape-a-keygated.py
and llama-mha-grape-a-querykeygated.py, transcribed in shared/reference/grape-paper-code.md)
against grape's bias kernel (grape.torch.grape_a_bias) and ALiBi slopes (grape.alibi_slopes).

The reference re-implements nothing of grape: the authors' formulas in PyTorch, float64, with the
ALiBi paper's get_slopes. grape's path is the same model step in float32 with grape's slopes and
bias tile: q, k after the QK RMSNorm, gates softplus(u.k/sqrt(D)) (and softplus(v.q/sqrt(D))),
omega = softplus(omega~) * slope, the bias added to the causal attention logits. Compared on the
same random inputs for B = 2, T in {1, 7, 64, 300}, H in {1, 4, 6}, D in {16, 64, 128}: the bias,
the attention output, and the gradients of a loss on it with respect to q, k, v, the norm weights,
u, v_gate and omega~."""
import math

import pytest
import torch
import torch.nn.functional as F

import grape
from conftest import alibi_paper_slopes, assert_close
from grape.torch import grape_a_bias


# ---- the authors' formulas -------------------------------------------------------------------

def rms_norm(x, weight, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def gate(x, u):
    """softplus(u_h . x_{t,h} / sqrt(D)) with u_h L2-normalised (eps 1e-6): [B, H, T]."""
    u = F.normalize(u, dim=-1, eps=1e-6)
    return F.softplus(torch.einsum("bthd,hd->bht", x, u) / math.sqrt(x.shape[-1]))


def authors_bias(omega, gate_k, gate_q):
    """-max(i - j, 0) * omega_h * (gate_k[j] (+ gate_q[i])), -inf above the diagonal: [B, H, T, T]."""
    t = gate_k.shape[-1]
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    rate = gate_k[..., None, :] + (0 if gate_q is None else gate_q[..., :, None])
    bias = -(i - j).clamp(min=0).to(omega.dtype) * omega[:, None, None] * rate
    return bias.masked_fill(j > i, float("-inf"))


def attention(q, k, v, bias):
    """softmax(q k^T / sqrt(D) + bias) v, [B, T, H, D] in and out, bias [B, H, T, T]."""
    s = torch.einsum("bmhd,bnhd->bhmn", q, k) / math.sqrt(q.shape[-1]) + bias
    return torch.einsum("bhmn,bnhd->bmhd", torch.softmax(s, dim=-1), v)


# ---- both paths on one case --------------------------------------------------------------------

def make_case(seq, heads, dim, query_gated, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape, s=1.0: s * torch.randn(*shape, generator=g, dtype=torch.float64)
    case = dict(q=r(2, seq, heads, dim), k=r(2, seq, heads, dim), v=r(2, seq, heads, dim),
                upstream=r(2, seq, heads, dim), wq=1 + r(dim, s=0.1), wk=1 + r(dim, s=0.1),
                u=r(heads, dim, s=1 / math.sqrt(dim)),
                omega_tilde=math.log(math.e - 1) + r(heads, s=0.3))  # softplus near 1, as initialised
    if query_gated:
        case["vg"] = r(heads, dim, s=1 / math.sqrt(dim))
    return case


def leaves(case, dtype):
    return {n: t.detach().to(dtype).requires_grad_(n != "upstream") for n, t in case.items()}


def step(t, bias_of):
    q, k = rms_norm(t["q"], t["wq"]), rms_norm(t["k"], t["wk"])
    gate_k = gate(k, t["u"])
    gate_q = gate(q, t["vg"]) if "vg" in t else None
    bias = bias_of(F.softplus(t["omega_tilde"]), gate_k, gate_q)
    out = attention(q, k, t["v"], bias)
    (out * t["upstream"]).sum().backward()
    return bias.detach(), out.detach()


def reference_path(case):
    t = leaves(case, torch.float64)
    slopes = torch.tensor(alibi_paper_slopes(t["q"].shape[2]), dtype=torch.float64)
    bias, out = step(t, lambda sp, gk, gq: authors_bias(sp * slopes, gk, gq))
    return t, bias, out


def grape_path(case):
    t = leaves(case, torch.float32)
    slopes = torch.tensor(grape.alibi_slopes(t["q"].shape[2]), dtype=torch.float32)
    bias, out = step(t, lambda sp, gk, gq: grape_a_bias(sp * slopes, gk, gq))
    return t, bias, out


@pytest.mark.parametrize("query_gated", [False, True], ids=["key-gated", "query-key-gated"])
@pytest.mark.parametrize("dim", [16, 64, 128])
@pytest.mark.parametrize("heads", [1, 4, 6])
@pytest.mark.parametrize("seq", [1, 7, 64, 300])
def test_matches_the_authors_formulas(seq, heads, dim, query_gated):
    case = make_case(seq, heads, dim, query_gated, seed=seq * 1000 + heads * 10 + dim + query_gated)
    ref, ref_bias, ref_out = reference_path(case)
    ours, bias, out = grape_path(case)
    assert_close(bias, ref_bias, 2e-6, "bias")
    assert_close(out, ref_out, 2e-5, "attention output")
    names = ["q", "k", "v", "wq", "wk", "u", "omega_tilde"] + (["vg"] if query_gated else [])
    for name in names:
        assert_close(ours[name].grad, ref[name].grad, 2e-4, "dL/d" + name, floor=1e-9)


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 6, 8, 12, 16, 24, 32, 40, 64, 96])
def test_grape_slopes_are_the_alibi_papers(heads):
    """The kernels' float32 slopes: the ALiBi paper's values rounded to float32 once."""
    want = torch.tensor(alibi_paper_slopes(heads), dtype=torch.float64).float().tolist()
    assert grape.alibi_slopes(heads) == want
