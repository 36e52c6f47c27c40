"""grape.attention and grape.torch.attention against an independent float64 PyTorch attention
(softmax materialized, RoPE / ALiBi / T5 buckets / FoX written from their formulas, RoPE + ALiBi
together): outputs, the log-sum-exp, and the gradients for q, k, v and each learnable parameter
(ALiBi slopes, rotary frequencies, the T5 table, FoX log forget gates, GRAPE-A's omega and gates
and the logits behind them) against float64 autograd.
Then packed sequences, the paged-cache decode and bad input."""
import os

import numpy as np
import pytest
import torch

import grape
from grape.torch import attention as torch_attention
from test_bias import t5_bucket

torch.manual_seed(20261205)
CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "configs")


def rope64(x, inv_freq, pos):
    """Half-split RoPE in float64; x [B, T, H, d], pos [B, T]."""
    angle = pos.double()[..., None, None] * inv_freq.double()  # [B, T, 1, d/2]
    half = inv_freq.numel()
    a, b = x[..., :half], x[..., half:2 * half]
    return torch.cat([a * torch.cos(angle) - b * torch.sin(angle), a * torch.sin(angle) + b * torch.cos(angle),
                      x[..., 2 * half:]], dim=-1)


def t5_bias64(table, pos, max_distance=128, bidirectional=True):
    """T5's bias [B, H, i, j] = table[bucket(pos_j - pos_i), h] (transformers' bucket function)."""
    rel = pos[:, None, :] - pos[:, :, None]                                     # [B, i, j]: key - query
    buckets = torch.tensor([[[t5_bucket(int(r), bidirectional, table.shape[0], max_distance) for r in row]
                             for row in b] for b in rel])
    return table.double()[buckets].permute(0, 3, 1, 2)


def attention64(q, k, v, pos, *, causal, window=0, inv_freq=None, slopes=None, log_forget=None, t5_table=None):
    """softmax(QK^T/sqrt(d) + bias + mask) V in float64; q [B, T, H, d], k and v [B, T, Hk, d]."""
    q, k, v = q.double(), k.double(), v.double()
    if inv_freq is not None:
        q, k = rope64(q, inv_freq, pos), rope64(k, inv_freq, pos)
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    logits = torch.einsum("bihd,bjhd->bhij", q / q.shape[-1] ** 0.5, k)
    idx = torch.arange(q.shape[1])
    if slopes is not None:
        dist = (pos[:, :, None] - pos[:, None, :]).abs().double()           # [B, i, j]
        logits = logits - slopes.double()[None, :, None, None] * dist[:, None]
    if t5_table is not None:
        logits = logits + t5_bias64(t5_table, pos)
    if log_forget is not None:  # [H, length]: sum of log f over (j, i] by position
        prefix = torch.nn.functional.pad(log_forget.double().cumsum(-1), (1, 0))  # F[l + 1]
        fi, fj = prefix[:, pos + 1], prefix[:, pos + 1]                      # [H, B, T]
        logits = logits + (fi[..., :, None] - fj[..., None, :]).permute(1, 0, 2, 3)
    seen = torch.ones(q.shape[1], q.shape[1], dtype=torch.bool)
    if causal:
        seen &= idx[None, :] <= idx[:, None]
    if window:
        seen &= (idx[:, None] - idx[None, :]).abs() < window
    logits = logits.masked_fill(~seen, float("-inf"))
    lse = torch.logsumexp(logits, -1)                                        # [B, H, T]
    return torch.einsum("bhij,bjhd->bihd", torch.softmax(logits, -1), v), lse


CASES = [  # (name, heads, kv_heads, d, causal, window)
    ("mha causal", 4, 4, 32, True, 0),
    ("gqa full", 6, 2, 64, False, 0),
    ("window", 4, 1, 16, True, 37),
]


def operands(batch, seq, heads, kv_heads, d, dtype=torch.float32):
    return (torch.randn(batch, seq, heads, d, dtype=dtype), torch.randn(batch, seq, kv_heads, d, dtype=dtype),
            torch.randn(batch, seq, kv_heads, d, dtype=dtype))


@pytest.mark.parametrize("name,heads,kv_heads,d,causal,window", CASES)
@pytest.mark.parametrize("encoding", ["none", "rope", "alibi", "t5", "rope+alibi", "fox"])
def test_output_and_lse_match_float64(encoding, name, heads, kv_heads, d, causal, window):
    q, k, v = operands(2, 150, heads, kv_heads, d)
    offsets = torch.tensor([0, 900]) if encoding != "fox" else None
    pos = torch.arange(150)[None, :] + (offsets[:, None] if offsets is not None else 0)
    enc, extra, ref = None, {}, {}
    if encoding == "rope":
        enc = grape.rope(head_dim=d)
        ref["inv_freq"] = torch.tensor(enc.inv_freq)
    elif encoding == "alibi":
        enc = grape.alibi(heads=heads)
        ref["slopes"] = torch.tensor(enc.slopes)
    elif encoding == "t5":
        ref["t5_table"] = torch.randn(32, heads)
        enc = grape.t5(ref["t5_table"])
    elif encoding == "rope+alibi":
        enc = (grape.rope(head_dim=d, base=1000.0), grape.alibi(heads=heads))
        ref["inv_freq"], ref["slopes"] = torch.tensor(enc[0].inv_freq), torch.tensor(enc[1].slopes)
    elif encoding == "fox":
        lf = torch.nn.functional.logsigmoid(torch.randn(heads, 150) + 2)
        extra["log_forget"], ref["log_forget"] = lf.numpy(), lf
        causal = True
    out, lse = grape.attention(q, k, v, enc, causal=causal, window=window, offsets=offsets, return_lse=True, **extra)
    expect, expect_lse = attention64(q, k, v, pos, causal=causal, window=window, **ref)
    torch.testing.assert_close(out.double(), expect, atol=2e-5, rtol=0)
    torch.testing.assert_close(lse.double().reshape(heads, 2, 150), expect_lse.permute(1, 0, 2), atol=1e-4, rtol=0)


def test_numpy_and_bfloat16_inputs():
    q, k, v = operands(1, 70, 2, 2, 32)
    expect, _ = attention64(q, k, v, torch.arange(70)[None], causal=True)
    out = grape.attention(q.numpy(), k.numpy(), v.numpy())
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, expect.numpy(), atol=2e-5, rtol=0)
    out16 = grape.attention(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert out16.dtype == torch.bfloat16
    torch.testing.assert_close(out16.double(), expect, atol=3e-2, rtol=0)


def test_packed_sequences_equal_separate_calls():
    enc = grape.rope(head_dim=16)
    lens = [5, 130, 64]
    q, k, v = operands(1, sum(lens), 4, 2, 16)
    q, k, v = q[0], k[0], v[0]
    cu = torch.tensor([0, 5, 135, 199])
    packed = grape.attention(q, k, v, enc, cu_seqlens=cu)
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        alone = grape.attention(q[a:b], k[a:b], v[a:b], enc)
        torch.testing.assert_close(packed[a:b], alone, atol=0, rtol=0)


def _grads(out, params, weight):
    loss = (out.double() * weight).sum()
    return torch.autograd.grad(loss, params)


@pytest.mark.parametrize("kind", ["none", "slopes", "inv_freq", "t5_table", "slopes+rope", "inv_freq+alibi",
                                  "log_forget"])
def test_gradients_match_float64_autograd(kind):
    heads, kv_heads, d, seq = 4, 2, 32, 100
    q, k, v = (x.requires_grad_() for x in operands(2, seq, heads, kv_heads, d))
    weight = torch.randn(2, seq, heads, d, dtype=torch.float64)
    pos = torch.arange(seq)[None, :].expand(2, seq)
    enc, param, kwargs, causal = None, None, {}, kind != "none"
    if kind == "slopes":
        param = torch.tensor(grape.alibi(heads=heads).slopes, dtype=torch.float32) * (1 + torch.rand(heads))
    elif kind == "inv_freq":
        enc = grape.rope(head_dim=d, base=100.0)
        param = torch.tensor(enc.inv_freq, dtype=torch.float32) * (1 + 0.1 * torch.rand(d // 2))
    elif kind == "log_forget":
        param = torch.nn.functional.logsigmoid(torch.randn(2, heads, seq) + 2)
    elif kind == "t5_table":
        enc, param = grape.t5(np.zeros((32, heads)), bidirectional=True), torch.randn(32, heads)
    elif kind == "slopes+rope":  # learned slopes composed with a fixed rotation
        enc = grape.rope(head_dim=d, base=100.0)
        param = torch.tensor(grape.alibi(heads=heads).slopes, dtype=torch.float32) * (1 + torch.rand(heads))
    elif kind == "inv_freq+alibi":  # learned frequencies composed with fixed slopes
        enc = (grape.rope(head_dim=d, base=100.0), grape.alibi(heads=heads))
        param = torch.tensor(enc[0].inv_freq, dtype=torch.float32) * (1 + 0.1 * torch.rand(d // 2))
    if param is not None:
        param.requires_grad_()
        kwargs[kind.split("+")[0]] = param
    out = torch_attention(q, k, v, enc, causal=causal, **kwargs)
    inputs = [q, k, v] + ([param] if param is not None else [])
    got = _grads(out, inputs, weight)

    inputs64 = [x.detach().double().requires_grad_() for x in inputs]
    ref = {}
    if kind in ("slopes", "inv_freq", "t5_table"):
        ref[kind] = inputs64[3]
    elif kind == "slopes+rope":
        ref["slopes"], ref["inv_freq"] = inputs64[3], torch.tensor(enc.inv_freq)
    elif kind == "inv_freq+alibi":
        ref["inv_freq"], ref["slopes"] = inputs64[3], torch.tensor(enc[1].slopes)
    if kind == "log_forget":  # one gate sequence per batch element
        expect = torch.cat([attention64(*(x[b:b + 1] for x in inputs64[:3]), pos[:1], causal=True,
                                        log_forget=inputs64[3][b])[0] for b in range(2)])
    else:
        expect = attention64(*inputs64[:3], pos, causal=causal, **ref)[0]
    torch.testing.assert_close(out.double(), expect.detach(), atol=2e-5, rtol=0)
    want = _grads(expect, inputs64, weight)
    for name, g, w in zip(["q", "k", "v", kind], got, want):
        scale = w.abs().max().item()
        assert (g.double() - w).abs().max().item() <= 1e-4 * scale + 1e-6, name


def grape_a_bias64(omega, key_gate, query_gate, pos):
    """GRAPE-A's gated bias [B, H, i, j] = -(p_i - p_j) * omega[h] * (kg[h, p_j] + qg[h, p_i]) for
    p_j <= p_i (0 above: the causal mask hides it), from the formula in float64."""
    dist = (pos[:, :, None] - pos[:, None, :]).double()                     # [B, i, j]
    rate = key_gate.double()[:, pos].permute(1, 0, 2)[:, :, None, :]         # [B, H, 1, j]
    if query_gate is not None:
        rate = rate + query_gate.double()[:, pos].permute(1, 0, 2)[:, :, :, None]
    return -(dist.clamp(min=0)[:, None] * omega.double()[None, :, None, None] * rate)


@pytest.mark.parametrize("gated", ["key", "query+key"])
@pytest.mark.parametrize("per_sequence", [False, True])
def test_grape_a_gradients_reach_the_logits(gated, per_sequence):
    """The gated bias inside the fused attention: the output and the gradients for q, k, v and the
    logits w, z_k, z_q behind omega = softplus(w) * slope and the gates = softplus(z) (through the
    caller's autograd) against float64 autograd of the dense formula."""
    heads, d, seq = 4, 16, 90
    q, k, v = (x.requires_grad_() for x in operands(2, seq, heads, heads, d))
    weight = torch.randn(2, seq, heads, d, dtype=torch.float64)
    slopes = torch.tensor(grape.alibi(heads=heads).slopes, dtype=torch.float64)
    gate_shape = (2, heads, seq) if per_sequence else (heads, seq)
    leaves = [torch.randn(heads), torch.randn(gate_shape)] + ([torch.randn(gate_shape)] if gated != "key" else [])
    leaves = [x.requires_grad_() for x in leaves]

    def gated_args(w, zk, zq=None, dtype=torch.float32):
        sp = torch.nn.functional.softplus
        return (sp(w) * slopes.to(dtype), sp(zk), None if zq is None else sp(zq))

    out = torch_attention(q, k, v, grape_a=gated_args(*leaves))
    got = _grads(out, [q, k, v, *leaves], weight)
    inputs64 = [x.detach().double().requires_grad_() for x in [q, k, v, *leaves]]
    omega, kg, qg = gated_args(*inputs64[3:], dtype=torch.float64)
    pos = torch.arange(seq)[None, :]
    expect = []
    for b in range(2):
        gates = [g if g is None or not per_sequence else g[b] for g in (kg, qg)]
        bias = grape_a_bias64(omega, gates[0], gates[1], pos)
        logits = torch.einsum("bihd,bjhd->bhij", inputs64[0][b:b + 1] / d ** 0.5, inputs64[1][b:b + 1]) + bias
        logits = logits.masked_fill(pos[0][None, :] > pos[0][:, None], float("-inf"))
        expect.append(torch.einsum("bhij,bjhd->bihd", torch.softmax(logits, -1), inputs64[2][b:b + 1]))
    expect = torch.cat(expect)
    torch.testing.assert_close(out.double(), expect.detach(), atol=2e-5, rtol=0)
    want = _grads(expect, inputs64, weight)
    for name, g, w in zip(["q", "k", "v", "w", "z_k", "z_q"], got, want):
        assert (g.double() - w).abs().max().item() <= 1e-4 * w.abs().max().item() + 1e-6, name


def test_bad_input_is_one_clear_error():
    q, k, v = operands(1, 8, 4, 2, 16)
    with pytest.raises(grape.GrapeError, match="v: batch and sequence extents must match"):
        grape.attention(q, k, v[:, :5])
    with pytest.raises(grape.GrapeError, match="must be a multiple of k.heads"):
        grape.attention(q, torch.randn(1, 8, 3, 16), torch.randn(1, 8, 3, 16))
    with pytest.raises(grape.GrapeError, match="encoding, log_forget: give one"):
        grape.attention(q, k, v, grape.rope(head_dim=16), log_forget=np.zeros((4, 8)))
    with pytest.raises(grape.GrapeError, match="encoding, grape_a: give one"):
        grape.attention(q, k, v, grape.rope(head_dim=16), grape_a=(np.ones(4, np.float32), np.ones((4, 8), np.float32)))
    with pytest.raises(grape.GrapeError, match="key_gate: must have omega's 4 heads"):
        grape.attention(q, k, v, grape_a=(np.ones(4, np.float32), np.ones((3, 8), np.float32)))
    with pytest.raises(grape.GrapeError, match="key_gate\\[1\\]: must be finite"):
        grape.attention(q, k, v, grape_a=(np.ones(4, np.float32), np.array([[0, np.nan] * 4] * 4, np.float32)))
    with pytest.raises(grape.GrapeError, match="head_dim 32"):
        grape.attention(q, k, v, grape.rope(head_dim=32))
    with pytest.raises(grape.GrapeError, match="slopes: must match q's 4 heads"):
        grape.attention(q, k, v, grape.alibi(heads=3))
    with pytest.raises(grape.GrapeError, match="log_forget: must be \\[heads, length\\] with length >= 8"):
        grape.attention(q, k, v, log_forget=np.zeros((4, 4)))
    with pytest.raises(grape.GrapeError, match="log_forget\\[0, 1\\]: must be finite"):
        grape.attention(q, k, v, log_forget=np.array([[0.0, np.nan]] * 4))
    with pytest.raises(grape.GrapeError, match="slopes\\[1\\]: must be finite"):
        grape.alibi(slopes=[1.0, float("inf")])
    with pytest.raises(grape.GrapeError, match="give at most one of"):
        torch_attention(q, k, v, slopes=torch.ones(4), inv_freq=torch.ones(8))
    with pytest.raises(grape.GrapeError, match="has no table"):
        grape.attention(q, k, v, grape.from_config(CONFIGS + "/t5-small/config.json"))
    with pytest.raises(grape.GrapeError, match="table: must hold num_buckets \\* heads"):
        grape.t5(np.zeros((32, 4))).with_table([0.0] * 10, 4)
    with pytest.raises(grape.GrapeError, match="max_distance: must be >= 32"):
        grape.t5(np.zeros((32, 4)), max_distance=16)
    with pytest.raises(grape.GrapeError, match="table\\[5\\]: must be finite"):
        grape.t5([[0.0] * 4, [0.0, float("nan"), 0.0, 0.0], [0.0] * 4, [0.0] * 4])
    with pytest.raises(grape.GrapeError, match="a \\(RotaryEncoding, AlibiEncoding\\) pair"):
        grape.attention(q, k, v, (grape.alibi(heads=4), grape.rope(head_dim=16)))
    with pytest.raises(grape.GrapeError, match="t5_table .* fills a T5Encoding"):
        torch_attention(q, k, v, None, t5_table=torch.zeros(32, 4))
    with pytest.raises(grape.GrapeError, match="^grape: encoding: attention takes None, a RotaryEncoding"):
        torch_attention(q, k, v, (grape.rope(head_dim=16), grape.t5(np.zeros((32, 4)))))


def test_plain_values_give_the_objects_attention():
    """grape.torch.plain(encoding), the form torch.compile traces, gives the same output bits as the
    encoding object it was made from; what it cannot take is one clear error."""
    q, k, v = operands(1, 50, 4, 2, 16)
    table = np.random.default_rng(4).normal(size=(32, 4))
    encodings = [grape.rope(head_dim=16, base=500.0), grape.alibi(heads=4), grape.t5(table, max_distance=64),
                 (grape.rope(head_dim=16), grape.alibi(heads=4)), grape.encoding("xpos", head_dim=16),
                 grape.mrope(16, [2, 3, 3])]
    for enc in encodings:
        assert torch.equal(torch_attention(q, k, v, grape.torch.plain(enc)), torch_attention(q, k, v, enc)), enc
    assert grape.torch.plain(None) is None
    with pytest.raises(grape.GrapeError, match="^grape: plain: takes a grape encoding \\(got str\\)$"):
        grape.torch.plain("rope")
    with pytest.raises(grape.GrapeError, match="these T5 buckets have no table"):
        torch_attention(q, k, v, grape.torch.plain(grape.from_config(CONFIGS + "/t5-small/config.json")))


def test_a_frequency_table_holds_rotary_dim_over_two_values_on_every_path():
    """A learned table of another length than the encoding's rotary_dim / 2 is one error, the same from
    rotate_qk (custom op or autograd.Function), attention (alone or with ALiBi) and the plain values;
    a partial rotary is what the encoding's rotary_dim asks for, checked against float64 RoPE."""
    q, k, v = operands(2, 6, 4, 2, 16)
    enc, short = grape.rope(head_dim=16), torch.ones(3, dtype=torch.float64)
    message = r"^grape: inv_freq: must hold rotary_dim / 2 = 8 values \(got 3\)$"
    for e in (enc, grape.torch.RotaryTable.of(enc)):
        with pytest.raises(grape.GrapeError, match=message):
            grape.torch.rotate_qk(q, k, e, inv_freq=short)
        with pytest.raises(grape.GrapeError, match=message):
            torch_attention(q, k, v, e, inv_freq=short)
    with pytest.raises(grape.GrapeError, match=message):
        torch_attention(q, k, v, (enc, grape.alibi(heads=4)), inv_freq=short)
    with pytest.raises(grape.GrapeError, match=message):
        grape.rotary(short.tolist(), head_dim=16)
    with pytest.raises(grape.GrapeError, match=r"^grape: inv_freq: must be a 1-D tensor of rotary_dim / 2 "
                                               r"frequencies \(got shape \[1, 8\]\)$"):
        grape.torch.rotate_qk(q, k, enc, inv_freq=torch.ones(1, 8))

    partial = grape.rope(head_dim=16, rotary_dim=6)     # channels 6..15 pass through
    theta = torch.tensor([1.0, 0.1, 0.01], dtype=torch.float64)
    assert grape.rotary(theta.tolist(), head_dim=16, rotary_dim=6).rotary_dim == 6
    pos = torch.arange(6)[None].expand(2, 6)
    for e in (partial, grape.torch.RotaryTable.of(partial)):
        q_rot, k_rot = grape.torch.rotate_qk(q, k, e, inv_freq=theta)
        torch.testing.assert_close(q_rot.double(), rope64(q.double(), theta, pos), atol=1e-5, rtol=0)
        torch.testing.assert_close(k_rot.double(), rope64(k.double(), theta, pos), atol=1e-5, rtol=0)
        out = torch_attention(q, k, v, e, inv_freq=theta)
        want, _ = attention64(q, k, v, pos, causal=True, inv_freq=theta)
        torch.testing.assert_close(out.double(), want, atol=2e-5, rtol=0)


@pytest.mark.parametrize("layout,with_alibi", [("NHD", False), ("HND", False), ("NHD", True)])
def test_decode_after_prefill_through_the_paged_cache(layout, with_alibi):
    """The serving loop: prefill writes rotated K and V into a paged cache (rotate_qk's KV write),
    the next token's K and V are written the same way, and attention_decode's output for its query
    equals the last row of float64 attention over the whole sequence (RoPE, or RoPE + ALiBi)."""
    enc = grape.rope(head_dim=32, base=500000.0)
    heads, kv_heads, d, block = 4, 2, 32, 16
    alibi = grape.alibi(heads=heads) if with_alibi else None
    ref = {"slopes": torch.tensor(alibi.slopes)} if with_alibi else {}
    lens = [37, 70]
    blocks = 12
    shape = (blocks, block, kv_heads, d) if layout == "NHD" else (blocks, kv_heads, block, d)
    k_cache, v_cache = torch.zeros(shape), torch.zeros(shape)
    table = torch.randperm(blocks, dtype=torch.int32)[:10].reshape(2, 5)

    def slots(b, positions):
        return torch.tensor([int(table[b, j // block]) * block + j % block for j in positions], dtype=torch.int64)

    q_new = torch.randn(2, heads, d)
    k_new, v_new = torch.randn(2, kv_heads, d), torch.randn(2, kv_heads, d)
    for b, n in enumerate(lens):
        q, k, v = operands(1, n, heads, kv_heads, d)
        grape.rotate_qk(q[0], k[0], enc, kv_cache=grape.KVCacheWrite(slots(b, range(n)), k_cache, v_cache, v[0], layout))
        expect, _ = attention64(torch.cat([q, q_new[b][None, None]], 1), torch.cat([k, k_new[b][None, None]], 1),
                                torch.cat([v, v_new[b][None, None]], 1), torch.arange(n + 1)[None], causal=True,
                                inv_freq=torch.tensor(enc.inv_freq), **ref)
        if b == 0:
            expected = [expect[0, -1]]
        else:
            expected.append(expect[0, -1])
    new_slots = torch.cat([slots(0, [lens[0]]), slots(1, [lens[1]])])
    grape.rotate_qk(None, k_new, enc, positions=torch.tensor(lens),
                    kv_cache=grape.KVCacheWrite(new_slots, k_cache, v_cache, v_new, layout))
    out = grape.attention_decode(q_new, k_cache, v_cache, table, [n + 1 for n in lens],
                                 (enc, alibi) if with_alibi else enc, layout=layout)
    torch.testing.assert_close(out.double(), torch.stack(expected), atol=2e-5, rtol=0)


def test_decode_bad_input_is_one_clear_error():
    q = torch.randn(1, 4, 16)
    cache = torch.zeros(4, 8, 2, 16)
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    with pytest.raises(grape.GrapeError, match="block_table: must be a C-contiguous int32"):
        grape.attention_decode(q, cache, cache, table.long(), [5])
    with pytest.raises(grape.GrapeError, match=r"seq_lens\[0\] = 17"):
        grape.attention_decode(q, cache, cache, table, [17])
    with pytest.raises(grape.GrapeError, match="layout: must be 'NHD' or 'HND'"):
        grape.attention_decode(q, cache, cache, table, [5], layout="NDH")
    with pytest.raises(grape.GrapeError, match="head_dim 16 differs from q's 8"):
        grape.attention_decode(q[..., :8].contiguous(), cache, cache, table, [5])


def sdpa_operands(batch, seq, heads, kv_heads, d):
    """q, k, v in scaled_dot_product_attention's layout [batch, heads, seq, dim], dense."""
    return tuple(x.transpose(1, 2).contiguous() for x in operands(batch, seq, heads, kv_heads, d))


@pytest.mark.parametrize("encoding", ["none", "alibi", "rope"])
def test_sdpa_layout_reads_batch_heads_seq_dim(encoding):
    """layout="bhtd" takes q, k, v as scaled_dot_product_attention does, [batch, heads, seq, dim], and
    gives the output so: equal to float64 attention of the same tensors (and to torch's SDPA where
    torch has it), its gradients to float64 autograd, grape.attention and attention_backward on NumPy
    arrays to grape.torch.attention."""
    heads, kv_heads, d, seq = 4, 2, 16, 40
    q, k, v = (x.requires_grad_() for x in sdpa_operands(2, seq, heads, kv_heads, d))
    enc, ref = None, {}
    if encoding == "alibi":
        enc = grape.alibi(heads=heads)
        ref["slopes"] = torch.tensor(enc.slopes)
    elif encoding == "rope":
        enc = grape.rope(head_dim=d, base=100.0)
        ref["inv_freq"] = torch.tensor(enc.inv_freq)
    out = torch_attention(q, k, v, enc, layout="bhtd")
    assert out.shape == (2, heads, seq, d)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    want, _ = attention64(q64.transpose(1, 2), k64.transpose(1, 2), v64.transpose(1, 2),
                          torch.arange(seq)[None].expand(2, seq), causal=True, **ref)
    want = want.transpose(1, 2)
    torch.testing.assert_close(out.double(), want.detach(), atol=2e-5, rtol=0)
    if encoding == "none" and hasattr(torch.nn.functional, "scaled_dot_product_attention"):  # torch >= 2.0
        sdpa = torch.nn.functional.scaled_dot_product_attention(
            q64, k64.repeat_interleave(2, 1), v64.repeat_interleave(2, 1), is_causal=True)
        torch.testing.assert_close(out.double(), sdpa.detach(), atol=2e-5, rtol=0)
    weight = torch.randn(want.shape, dtype=torch.float64)
    got = torch.autograd.grad((out.double() * weight).sum(), (q, k, v))
    expect = torch.autograd.grad((want * weight).sum(), (q64, k64, v64))
    for name, g, w in zip("qkv", got, expect):
        assert g.shape == w.shape, name
        assert (g.double() - w).abs().max().item() <= 1e-4 * w.abs().max().item() + 1e-6, name

    arrays = [x.detach().numpy() for x in (q, k, v)]
    out_np, lse = grape.attention(*arrays, enc, layout="bhtd", return_lse=True)
    np.testing.assert_array_equal(out_np, out.detach().numpy())
    grads = grape.attention_backward(weight.float().numpy(), *arrays, out_np, lse, enc, layout="bhtd")
    for name, g, w in zip("qkv", grads[:3], got):
        np.testing.assert_allclose(g, w.numpy(), atol=1e-6, rtol=0, err_msg=name)


def test_a_layout_the_shapes_contradict_is_refused_naming_both():
    """A tensor in the other layout passes grape's checks with its heads and tokens swapped unless
    something tells them apart: K/V's head count (GQA) or the encoding's (ALiBi's slopes, a T5 table,
    per-head gates). Then the call is refused, naming both layouts."""
    both = (r"^grape: q, k, v: read as \[batch, seq, heads, dim\] \(layout='bthd'\), .*; read as "
            r"\[batch, heads, seq, dim\] they agree: pass layout='bhtd'$")
    q, k, v = sdpa_operands(1, 40, 8, 2, 16)             # GQA: K/V's heads read as a shorter sequence
    for call in (torch_attention, grape.attention):
        with pytest.raises(grape.GrapeError, match=both):
            call(q, k, v)
    q, k, v = sdpa_operands(1, 40, 8, 8, 16)             # MHA: only the slopes' 8 heads tell
    with pytest.raises(grape.GrapeError, match=both):
        torch_attention(q, k, v, grape.alibi(heads=8))
    with pytest.raises(grape.GrapeError, match=both):
        torch_attention(q, k, v, slopes=torch.ones(8))
    with pytest.raises(grape.GrapeError, match=both):
        grape.attention(q, k, v, log_forget=np.zeros((8, 40)))
    q, k, v = operands(1, 40, 8, 2, 16)                  # grape's layout given as SDPA's
    with pytest.raises(grape.GrapeError, match=r"they agree: pass layout='bthd'$"):
        torch_attention(q, k, v, layout="bhtd")
    with pytest.raises(grape.GrapeError, match=r"^grape: layout: must be 'bthd' \[batch, seq, heads, dim\] or "
                                               r"'bhtd' \[batch, heads, seq, dim\] \(got 'BTHD'\)$"):
        torch_attention(q, k, v, layout="BTHD")
    with pytest.raises(grape.GrapeError, match=r"^grape: q: layout='bhtd' takes \[batch, heads, seq, dim\] "
                                               r"\(got shape \[40, 8, 16\]\)$"):
        grape.attention(q[0], k[0], v[0], layout="bhtd")


def raises_one_grape_line(match, call, *args, **kwargs):
    """call(...) raises grape.GrapeError with one line that starts with 'grape: ' and matches."""
    with pytest.raises(grape.GrapeError, match=match) as error:
        call(*args, **kwargs)
    text = str(error.value)
    assert text.startswith("grape: ") and "\n" not in text, text


def test_every_bad_argument_is_one_grape_line_naming_it():
    q, k, v = operands(1, 8, 4, 2, 16)
    gates = (torch.ones(4), torch.ones(4, 3))  # 3 gates for 8 positions
    for call in (grape.attention, torch_attention):
        raises_one_grape_line(r"^grape: key_gate: must be \[heads, length\] with length >= 8, a value for every "
                              r"position 0..7 the call reaches \(got length 3\)$", call, q, k, v, grape_a=gates)
        raises_one_grape_line(r"^grape: slopes: must match q's 4 heads \(got 3 heads\)$", call, q, k, v,
                              grape.alibi(heads=3))
        raises_one_grape_line(r"^grape: q: must be a NumPy array or a torch tensor \(got list\)$"
                              if call is grape.attention else r"^grape: q: must be a torch tensor \(got list\)$",
                              call, q.tolist(), k, v)
        raises_one_grape_line(r"^grape: k: must be on the CPU, where grape's kernels run \(got a meta tensor\)$",
                              call, q, k.to("meta"), v)
    raises_one_grape_line(r"^grape: slopes: must match q's 4 heads \(got 3 heads\)$", torch_attention, q, k, v,
                          slopes=torch.ones(3))
    raises_one_grape_line(r"^grape: log_forget: must be \[heads, length\] with length >= 8", grape.attention, q, k, v,
                          log_forget=np.zeros((4, 4)))
    raises_one_grape_line(r"^grape: projections: must be \[heads, length, P\] with length >= 8", torch_attention, q,
                          k, v, grape_ap=torch.randn(4, 5, 4))
    raises_one_grape_line(r"^grape: phases: must be \[rows, length\] with length >= 8", torch_attention, q, k, v,
                          grape_m=(torch.full((8,), 0.1), torch.zeros(1, 5, dtype=torch.float64)))
    enc = grape.rope(head_dim=16)
    raises_one_grape_line(r"^grape: q: must be a NumPy array or a torch tensor \(got list\)$", grape.rotate_qk,
                          q.tolist(), None, enc)
    raises_one_grape_line(r"^grape: q: must be a torch tensor \(got list\)$", grape.torch.rotate_qk, q.tolist(), k,
                          enc)
    raises_one_grape_line(r"^grape: q: must be on the CPU, where grape's kernels run \(got a meta tensor\)$",
                          grape.torch.rotate_qk, q.to("meta"), k, enc)
    raises_one_grape_line(r"^grape: q: must be on the CPU", grape.rotate_qk, q.to("meta"), None, enc)
    cache, table = torch.zeros(4, 8, 2, 16), torch.tensor([[0, 1]], dtype=torch.int32)
    raises_one_grape_line(r"^grape: slopes: must match q's 4 heads \(got 3 heads\)$", grape.attention_decode,
                          torch.randn(1, 4, 16), cache, cache, table, [5], grape.alibi(heads=3))


@pytest.mark.parametrize("layout", ["bthd", "bhtd"])
def test_an_empty_sequence_gives_an_empty_result(layout):
    """T = 0, as torch's attention takes it: an empty output (and log-sum-exp), gradients of q's, k's
    and v's shapes; rotate_qk the same."""
    q, k, v = operands(2, 0, 4, 2, 16)
    for rotate, args in ((grape.torch.rotate_qk, (q, k)), (grape.rotate_qk, (q.numpy(), k.numpy()))):
        q_rot, k_rot = rotate(*args, grape.rope(head_dim=16))
        assert q_rot.shape == q.shape and k_rot.shape == k.shape
    if layout == "bhtd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    for enc in (None, grape.rope(head_dim=16), grape.alibi(heads=4)):
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        out = torch_attention(*leaves, enc, layout=layout)
        assert out.shape == q.shape
        out.sum().backward()
        assert [x.grad.shape for x in leaves] == [x.shape for x in leaves]
        out, lse = grape.attention(q.numpy(), k.numpy(), v.numpy(), enc, layout=layout, return_lse=True)
        assert out.shape == q.shape and lse.shape == (4, 0)

def test_the_matmul_switch_takes_each_path_the_cpu_has():
    """grape.set_matmul_path forces the attention products' instructions (bf16 storage only); on
    AVX512-BF16 the bf16 tiles give another output than the float32 products, both within bf16's
    tolerance of float64; f32 and f16 storage never change path; a bad name is a GrapeError."""
    units = grape.cpu_matmul_units()
    assert set(units) == {"avx512_bf16", "amx_bf16", "avx512_fp16"}
    q, k, v = (torch.randn(300, 4, 32) for _ in range(3))
    outs = {}
    try:
        for path in ["f32"] + (["avx512bf16"] if units["avx512_bf16"] else []):
            grape.set_matmul_path(path)
            assert grape.matmul_path("bfloat16") == path
            assert grape.matmul_path("float32") == grape.matmul_path("float16") == "f32"
            out = grape.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=False)
            qd, kd, vd = (x.bfloat16().double().transpose(0, 1) for x in (q, k, v))  # [heads, T, d]
            exact = torch.softmax(qd @ kd.transpose(1, 2) / 32 ** 0.5, -1) @ vd
            assert (out.double().transpose(0, 1) - exact).abs().max() < 3e-2
            outs[path] = out
        if len(outs) == 2:
            assert not torch.equal(outs["f32"], outs["avx512bf16"])
        with pytest.raises(grape.GrapeError):
            grape.set_matmul_path("amx")
    finally:
        grape.set_matmul_path("auto")


@pytest.mark.parametrize("encoding", ["none", "rope", "alibi", "fox"])
def test_keys_on_tokens_of_their_own_give_the_last_rows_of_the_whole_call(encoding):
    """New queries (the last 5 of 23 tokens) against every key, through key_positions: the output and
    every gradient are the whole same-token call's on those rows (its output gradient zero on the
    others), in the torch op and on NumPy arrays."""
    torch.manual_seed(3)
    batch, seq, new, heads, d = 2, 23, 5, 4, 16
    q, k, v = (torch.randn(batch, seq, heads, d) for _ in range(3))
    kw, learned = {}, None
    if encoding == "rope":
        kw = dict(encoding=grape.rope(head_dim=d), inv_freq=torch.tensor(grape.rope(head_dim=d).inv_freq))
        learned = "inv_freq"
    elif encoding == "alibi":
        kw = dict(slopes=torch.tensor(grape.alibi_slopes(heads), dtype=torch.float64))
        learned = "slopes"
    elif encoding == "fox":
        kw = dict(log_forget=torch.nn.functional.logsigmoid(torch.randn(heads, seq, dtype=torch.float64) + 2))
        learned = "log_forget"
    positions = torch.arange(seq).repeat(batch)
    new_positions = torch.arange(seq - new, seq).repeat(batch)

    def run(queries, key_positions, query_positions):
        leaves = {n: x.clone().requires_grad_() for n, x in kw.items() if n == learned}
        args = {**kw, **leaves}
        qq, kk, vv = (x.clone().requires_grad_() for x in (queries, k, v))
        out = torch_attention(qq, kk, vv, args.pop("encoding", None), positions=query_positions,
                              key_positions=key_positions, **args)
        return out, qq, kk, vv, leaves

    whole, qw, kw_, vw, lw = run(q, None, positions)
    weight = torch.zeros_like(whole)
    weight[:, seq - new:] = torch.randn(batch, new, heads, d)
    (whole * weight).sum().backward()
    part, qp, kp, vp, lp = run(q[:, seq - new:].contiguous(), positions, new_positions)
    torch.testing.assert_close(part, whole[:, seq - new:], atol=2e-6, rtol=0)
    (part * weight[:, seq - new:]).sum().backward()
    torch.testing.assert_close(qp.grad, qw.grad[:, seq - new:], atol=2e-6, rtol=0)
    torch.testing.assert_close(kp.grad, kw_.grad, atol=2e-6, rtol=0)
    torch.testing.assert_close(vp.grad, vw.grad, atol=2e-6, rtol=0)
    if learned:  # dL/dθ counts positions from 0 with keys of their own: float32 rounding times the position
        torch.testing.assert_close(lp[learned].grad, lw[learned].grad, atol=1e-4, rtol=1e-4)
    arrays = [x.numpy() for x in (q[:, seq - new:].contiguous(), k, v)]
    np_kw = {n: x for n, x in kw.items() if n != "encoding" and n != learned}
    enc = kw.get("encoding")
    if encoding == "alibi":
        enc = grape.alibi(slopes=list(grape.alibi_slopes(heads)))
    if encoding == "fox":
        np_kw["log_forget"] = kw["log_forget"].numpy()
    out_np = grape.attention(*arrays, enc, positions=new_positions.numpy(), key_positions=positions.numpy(), **np_kw)
    np.testing.assert_allclose(out_np, part.detach().numpy(), atol=1e-6, rtol=0)


def test_keys_on_tokens_of_their_own_are_checked_by_name():
    q, k, v = torch.randn(1, 4, 2, 8), torch.randn(1, 9, 2, 8), torch.randn(1, 9, 2, 8)
    with pytest.raises(grape.GrapeError, match=r"^grape: key_positions: must hold 9 values"):
        grape.attention(q, k, v, key_positions=np.arange(8))
    with pytest.raises(grape.GrapeError, match=r"^grape: v: batch and sequence extents must match k's \(1 x 8 vs 1 x 9\)"):
        grape.attention(q, k, v[:, :8], key_positions=np.arange(9))
    with pytest.raises(grape.GrapeError, match=r"^grape: keys: a lift \(GRAPE-A\)"):
        grape.attention(q, k, v, grape.encoding("grape_a", heads=2, head_dim=8), key_positions=np.arange(9))
