"""GRAPE-AP's path-integral bias: the GRAPE paper's authors' v1 formula (llama-mha-grape-ap-v1.py,
transcribed in shared/reference/grape-paper-code.md) against grape's kernel (grape.torch.grape_ap_bias,
the grape_ap_relative built-in).

grape's built-in rotates both sides (each term depends on l - i), the authors' v1 only the key side
p^_l, by its absolute index l (grape's checker finds it is not translation invariant:
docs/grape-paper.md). So the transcription below is the authors' code twice: as written, and with the
row side p_i turned by i the same way. grape must equal the second, in the bias, the attention output
and the gradients; and it must differ from the first by exactly what turning the row side changes,
a difference of the expected size, asserted, not skipped. Float64 PyTorch reference, float32 grape
path; B = 2, T in {1, 7, 64, 300}, H in {1, 4, 6}, P = D in {16, 64, 128}."""
import math

import pytest
import torch
import torch.nn.functional as F

import grape
from conftest import alibi_paper_slopes, assert_close
from grape.torch import grape_ap_bias

NORM_EPS = 1e-6


def authors_rotate(x, angle):
    """The file's rotary with base 1, its sign: y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos; every
    plane of token t turned by angle[t]. x [B, H, T, P]."""
    half = x.shape[-1] // 2
    c, s = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c + x2 * s, -x1 * s + x2 * c], dim=-1)


def authors_bias(p, rotate_rows):
    """bias[b, h, i, j] = sum_{l=j+1..i} slope_h log sigmoid(<p_i, rot(p^_l, l)> / P), -inf for j > i:
    the row sum minus the inclusive cumulative sum, as the file computes it. rotate_rows: the row side
    turned by i too (grape's relative variant)."""
    _, heads, t, dim = p.shape
    idx = torch.arange(t, dtype=p.dtype)
    p_hat = p * torch.rsqrt(p.pow(2).mean(-1, keepdim=True) + NORM_EPS)
    keys = authors_rotate(p_hat, idx)
    rows = authors_rotate(p, idx) if rotate_rows else p
    slopes = torch.tensor(alibi_paper_slopes(heads), dtype=p.dtype)[:, None, None]
    term = slopes * F.logsigmoid(torch.einsum("bhip,bhlp->bhil", rows, keys) / dim)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    term = term.masked_fill(~causal, 0.0)                      # l <= i
    cum = torch.cumsum(term, dim=-1)                           # sum_{l<=j}
    bias = cum[..., -1:] - cum                                 # sum_{j<l<=i} (the row sum is the last)
    return bias.masked_fill(~causal, float("-inf"))


def attention(q, k, v, bias):
    s = torch.einsum("bmhd,bnhd->bhmn", q, k) / math.sqrt(q.shape[-1]) + bias
    return torch.einsum("bhmn,bnhd->bmhd", torch.softmax(s, dim=-1), v)


def make_case(seq, heads, dim, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)
    return dict(q=r(2, seq, heads, dim), k=r(2, seq, heads, dim), v=r(2, seq, heads, dim),
                p=r(2, heads, seq, dim), upstream=r(2, seq, heads, dim))


def run(case, dtype, bias_of):
    t = {n: x.detach().to(dtype).requires_grad_(n != "upstream") for n, x in case.items()}
    bias = bias_of(t["p"])
    out = attention(t["q"], t["k"], t["v"], bias)
    (out * t["upstream"]).sum().backward()
    return t, bias.detach(), out.detach()


@pytest.mark.parametrize("dim", [16, 64, 128])
@pytest.mark.parametrize("heads", [1, 4, 6])
@pytest.mark.parametrize("seq", [1, 7, 64, 300])
def test_matches_the_authors_formula_with_both_sides_rotated(seq, heads, dim):
    case = make_case(seq, heads, dim, seed=seq * 1000 + heads * 10 + dim)
    ref, ref_bias, ref_out = run(case, torch.float64, lambda p: authors_bias(p, rotate_rows=True))
    ours, bias, out = run(case, torch.float32, lambda p: grape_ap_bias(p, norm_eps=NORM_EPS))
    assert_close(bias, ref_bias, 2e-6, "bias")
    assert_close(out, ref_out, 2e-5, "attention output")
    for name in ("q", "k", "v", "p"):
        assert_close(ours[name].grad, ref[name].grad, 2e-4, "dL/d" + name, floor=1e-9)

    # The authors' v1 as written differs by what turning the row side changes, and by nothing else.
    v1 = authors_bias(case["p"], rotate_rows=False)
    gap = (bias.double() - v1)[torch.isfinite(v1)].abs().max().item()
    want_gap = (ref_bias - v1)[torch.isfinite(v1)].abs().max().item()
    assert abs(gap - want_gap) <= 2e-6 * max(1.0, ref_bias[torch.isfinite(ref_bias)].abs().max().item())
    if seq >= 7:
        assert want_gap > 1e-3, "the row rotation changes the bias (the two formulas are different functions)"
    else:
        assert want_gap == 0.0  # one token: every bias is 0 (the diagonal), in both


def test_bad_arguments_raise_one_line():
    with pytest.raises(grape.GrapeError, match="projections: shape must be"):
        grape.grape_ap_bias(torch.zeros(4, 8).numpy())
    with pytest.raises(grape.GrapeError, match="p_dim: must be even"):
        grape.grape_ap_bias(torch.ones(2, 5, 3).numpy())
    with pytest.raises(grape.GrapeError, match=r"projections\[7\]: must be finite"):
        p = torch.ones(1, 4, 4)
        p.view(-1)[7] = float("nan")
        grape.grape_ap_bias(p.numpy())
    g = torch.zeros(2, 5, 5)
    g[1, 3, 2] = float("inf")
    with pytest.raises(grape.GrapeError, match=r"grad_tile\[1\]\[3\]\[2\]: must be finite"):
        grape.grape_ap_bias_grad(torch.ones(2, 5, 4).numpy(), g.numpy())
    g[1, 3, 2] = 0
    g[1, 2, 3] = float("inf")  # above the diagonal: a masked logit's gradient is not read
    assert grape.grape_ap_bias_grad(torch.ones(2, 5, 4).numpy(), g.numpy()).shape == (2, 5, 4)
