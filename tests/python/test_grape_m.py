"""GRAPE-M as the GRAPE paper's authors train it (llama-mha-grape-m-nonctx.py and
llama-mha-grape-m-ctx.py, transcribed in shared/reference/grape-paper-code.md) against grape's
kernel: learnable log-frequencies shared or per head, and the contextual cumulative phase
Phi_t = sum_{tau<t} sigmoid(w.x_tau + b) / c, shared or per head.

The reference below re-implements nothing of grape: it is the authors' formulas in PyTorch,
evaluated in float64 (their rotation convention included). grape's path is grape.torch's rotation
in float32 with the attention in float32 torch. Compared on the same random inputs for B = 2,
T in {1, 7, 64, 300}, H in {1, 4, 6}, D in {16, 64, 128}: rotated q and k, attention outputs, and
the gradients of a loss on the outputs with respect to q, k, the log-frequencies and the gate's
weights (through Phi)."""
import math

import numpy as np
import pytest
import torch

import grape
from conftest import assert_close
from grape.torch import grape_m_rotate_qk

OMEGA_SCALE = 16.0   # ctx_omega_scale, the authors' default
C = 24               # width of the token features the contextual gate reads


# ---- the authors' formulas (float64 here) ------------------------------------------------------

def authors_apply_rotary(x, cos, sin):
    """apply_rotary_emb of the authors' files: y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)


def authors_theta(log_freq, scale):
    """theta = exp(log_freq / s): [D/2] shared or [H, D/2] per head."""
    return torch.exp(log_freq / scale)


def authors_phase(x, w, b):
    """Phi_t = sum_{tau < t} omega_tau, omega = sigmoid(x w + b) / c: [B, T, 1 or H] (exclusive)."""
    omega = torch.sigmoid(x @ w + b) / OMEGA_SCALE
    return torch.cumsum(omega, dim=1) - omega


def authors_angles(theta, phase, batch, seq, heads):
    """angle[b, t, h, j] = p[b, t, h] * theta[h, j], p = t (non-contextual) or Phi."""
    theta = theta.expand(heads, theta.shape[-1]) if theta.dim() == 2 else theta.expand(heads, theta.shape[0])
    if phase is None:
        p = torch.arange(seq, dtype=theta.dtype)[None, :, None].expand(batch, seq, heads)
    else:
        p = phase.expand(batch, seq, heads)
    return p[..., None] * theta[None, None]


def attention(q, k, v):
    """Causal softmax attention, scale 1/sqrt(D), [B, T, H, D] in and out."""
    d = q.shape[-1]
    s = torch.einsum("bmhd,bnhd->bhmn", q, k) / math.sqrt(d)
    t = q.shape[1]
    s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    return torch.einsum("bhmn,bnhd->bmhd", torch.softmax(s, dim=-1), v)


# ---- one case: both paths on the same inputs ---------------------------------------------------

def make_case(seq, heads, dim, per_head, contextual, seed):
    g = torch.Generator().manual_seed(seed)
    planes = dim // 2
    rope = -(torch.arange(planes, dtype=torch.float64) * 2 / dim) * math.log(10000.0)
    scale = 2.0  # log_freq_scale: the stored parameter is s * log(theta)
    log_freq = scale * (rope if not per_head else rope[None].repeat(heads, 1))
    log_freq = log_freq + 0.1 * torch.randn(log_freq.shape, generator=g, dtype=torch.float64)
    case = dict(scale=scale, log_freq=log_freq.float(),
                q=torch.randn(2, seq, heads, dim, generator=g), k=torch.randn(2, seq, heads, dim, generator=g),
                v=torch.randn(2, seq, heads, dim, generator=g), upstream=torch.randn(2, seq, heads, dim, generator=g))
    if contextual:
        rows = heads if per_head else 1
        case.update(x=torch.randn(2, seq, C, generator=g), w=torch.randn(C, rows, generator=g) / math.sqrt(C),
                    b=torch.full((rows,), 2.0) + 0.5 * torch.randn(rows, generator=g))
    return case


def leaves(case, dtype):
    """The case's tensors as fresh leaves of one dtype (the parameters with gradients)."""
    out = {}
    for name, value in case.items():
        if isinstance(value, torch.Tensor):
            out[name] = value.detach().to(dtype).requires_grad_(name != "upstream")
        else:
            out[name] = value
    return out


def reference_path(case):
    """The authors' model step in float64: rotate q and k, attend, loss = <out, upstream>."""
    t = leaves(case, torch.float64)
    batch, seq, heads, _ = t["q"].shape
    theta = authors_theta(t["log_freq"], t["scale"])
    phase = authors_phase(t["x"], t["w"], t["b"]) if "x" in t else None
    angle = authors_angles(theta, phase, batch, seq, heads)
    q_rot = authors_apply_rotary(t["q"], angle.cos(), angle.sin())
    k_rot = authors_apply_rotary(t["k"], angle.cos(), angle.sin())
    out = attention(q_rot, k_rot, t["v"])
    (out * t["upstream"]).sum().backward()
    return t, q_rot.detach(), k_rot.detach(), out.detach(), angle.detach()


def grape_path(case):
    """The same step with grape's rotation (float32 q and k, float64 angles) and float32 attention."""
    t = leaves(case, torch.float32)
    # theta and Phi are formed in float64 from the float32 parameters (the kernel takes them so; in
    # float32, theta alone would carry 2^-24 relative error into every angle).
    freqs = authors_theta(t["log_freq"].double(), t["scale"])
    phases = None
    if "x" in t:
        phases = authors_phase(t["x"].double(), t["w"].double(), t["b"].double())
        if phases.shape[-1] == 1:
            phases = phases[..., 0]  # shared: shaped like the tokens
    q_rot, k_rot = grape_m_rotate_qk(t["q"], t["k"], freqs, phases=phases, angle_sign=-1)  # the authors' sign
    out = attention(q_rot, k_rot, t["v"])
    (out * t["upstream"]).sum().backward()
    return t, q_rot.detach(), k_rot.detach(), out.detach()


VARIANTS = [(per_head, contextual) for per_head in (False, True) for contextual in (False, True)]


@pytest.mark.parametrize("per_head,contextual", VARIANTS, ids=["shared", "shared-ctx", "per-head", "per-head-ctx"])
@pytest.mark.parametrize("dim", [16, 64, 128])
@pytest.mark.parametrize("heads", [1, 4, 6])
@pytest.mark.parametrize("seq", [1, 7, 64, 300])
def test_matches_the_authors_formulas(seq, heads, dim, per_head, contextual):
    case = make_case(seq, heads, dim, per_head, contextual, seed=seq * 1000 + heads * 10 + dim)
    ref, ref_q, ref_k, ref_out, angle = reference_path(case)
    ours, q_rot, k_rot, out = grape_path(case)
    assert_close(q_rot, ref_q, 2e-6, "rotated q")
    assert_close(k_rot, ref_k, 2e-6, "rotated k")
    assert_close(out, ref_out, 2e-5, "attention output")
    for name in ("q", "k", "v", "log_freq") + (("w", "b", "x") if contextual else ()):
        assert_close(ours[name].grad, ref[name].grad, 2e-4, "dL/d" + name, floor=1e-9)


def test_the_default_sign_is_hugging_faces():
    """Without angle_sign, grape turns by +angle (y1 = x1 cos - x2 sin): the authors' formula at
    -angle, and the same as their sign with the frequencies negated."""
    case = make_case(7, 4, 16, True, True, seed=5)
    _, _, _, _, angle = reference_path(case)
    freqs = torch.exp(case["log_freq"].double() / case["scale"])
    phases = authors_phase(case["x"].double(), case["w"].double(), case["b"].double())
    q, k = grape.grape_m_rotate_qk(case["q"], case["k"], freqs, phases=phases)
    assert_close(q, authors_apply_rotary(case["q"].double(), angle.cos(), -angle.sin()), 2e-6, "q")
    assert_close(k, authors_apply_rotary(case["k"].double(), angle.cos(), -angle.sin()), 2e-6, "k")
    q_neg, _ = grape.grape_m_rotate_qk(case["q"], case["k"], -freqs, phases=phases, angle_sign=-1)
    assert_close(q_neg, q, 1e-6, "q with -theta and the authors' sign")
    with pytest.raises(AssertionError):  # the sign is not a detail: the authors' outputs differ
        assert_close(q, authors_apply_rotary(case["q"].double(), angle.cos(), angle.sin()), 2e-6, "q")


def test_grouped_query_heads_take_their_key_heads_row():
    """GQA: 6 query heads on 2 key heads; query head h uses the row of key head h // 3."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 5, 6, 16)).astype(np.float32)
    k = rng.standard_normal((2, 5, 2, 16)).astype(np.float32)
    freqs = rng.uniform(0.01, 1.0, size=(2, 8))
    phases = np.cumsum(rng.uniform(0, 3, size=(2, 5, 2)), axis=1)
    q_rot, k_rot = grape.grape_m_rotate_qk(q, k, freqs, phases=phases)
    for h in range(6):
        angle = torch.from_numpy(phases[..., h // 3, None] * freqs[h // 3])
        want = authors_apply_rotary(torch.from_numpy(q[:, :, h]).double(), angle.cos(), -angle.sin())
        assert_close(torch.from_numpy(q_rot[:, :, h]), want, 2e-6, "q head %d" % h)
    angle = torch.from_numpy(phases[..., None] * freqs[None, None])
    want = authors_apply_rotary(torch.from_numpy(k).double(), angle.cos(), -angle.sin())
    assert_close(torch.from_numpy(k_rot), want, 2e-6, "k")


def test_integer_positions_and_offsets_follow_rotate_qk():
    """Non-contextual GRAPE-M with offsets (a KV cache at position 10^6): per-head rows, exact phases."""
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 3, 4, 16)).astype(np.float32)
    freqs = rng.uniform(0.01, 1.0, size=(4, 8))
    offsets = np.array([5, 1_000_000], dtype=np.int64)
    q_rot, _ = grape.grape_m_rotate_qk(q, None, freqs, offsets=offsets)
    pos = (offsets[:, None] + np.arange(3)[None, :]).astype(np.float64)  # [B, T]
    for h in range(4):
        angle = torch.from_numpy(pos[..., None] * freqs[h])
        want = authors_apply_rotary(torch.from_numpy(q[:, :, h]).double(), angle.cos(), -angle.sin())
        assert_close(torch.from_numpy(q_rot[:, :, h]), want, 4e-6, "q head %d" % h)


def test_large_phases_keep_float32_accuracy():
    """Phi near 10^5 (a long context with large omega): grape's angle is formed in float64, so the
    output stays within float32 rounding; the authors' float32 angle would be off by ~1e-2 rad."""
    rng = np.random.default_rng(6)
    q = rng.standard_normal((1, 4, 1, 16)).astype(np.float32)
    freqs = np.full(8, 0.9)
    phases = 1e5 + np.cumsum(rng.uniform(0, 1, size=(1, 4)), axis=1)
    q_rot, _ = grape.grape_m_rotate_qk(q, None, freqs, phases=phases)
    angle = torch.from_numpy(phases[..., None, None] * freqs)
    want = authors_apply_rotary(torch.from_numpy(q).double(), angle.cos(), -angle.sin())
    assert_close(torch.from_numpy(q_rot), want, 4e-6, "q")
    f32 = torch.from_numpy(phases).float()[..., None] * torch.tensor(0.9, dtype=torch.float32)
    assert (f32.double() - torch.from_numpy(phases)[..., None] * 0.9).abs().max() > 1e-3


def test_param_grads_have_the_parameters_shapes():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 5, 4, 16)).astype(np.float32)
    k = rng.standard_normal((2, 5, 2, 16)).astype(np.float32)
    g = rng.standard_normal(q.shape).astype(np.float32), rng.standard_normal(k.shape).astype(np.float32)
    per_head = rng.uniform(0, 5, size=(2, 5, 2))
    df, dp = grape.grape_m_param_grads(q, k, *g, rng.uniform(0.1, 1, size=(2, 8)), phases=per_head)
    assert df.shape == (2, 8) and dp.shape == (2, 5, 2)
    df, dp = grape.grape_m_param_grads(q, k, *g, rng.uniform(0.1, 1, size=8), phases=per_head[..., 0])
    assert df.shape == (8,) and dp.shape == (2, 5)
    df, dp = grape.grape_m_param_grads(q, k, *g, rng.uniform(0.1, 1, size=8))
    assert df.shape == (8,) and dp is None


@pytest.mark.parametrize("per_head", [False, True])
def test_one_pass_backward_matches_the_two_passes(per_head):
    """grape_m_rotate_qk_backward_with_grads (from the float32 outputs) against the backward rotation
    and grape_m_param_grads (from the inputs, float64 cos/sin): the same dq, dk and, within float32
    outputs' rounding, the same parameter gradients; GQA, phases shared or per key head."""
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 9, 4, 16)).astype(np.float32)
    k = rng.standard_normal((2, 9, 2, 16)).astype(np.float32)
    g_q, g_k = rng.standard_normal(q.shape).astype(np.float32), rng.standard_normal(k.shape).astype(np.float32)
    freqs = rng.uniform(0.1, 1, size=(2, 8) if per_head else 8)
    phases = rng.uniform(0, 50, size=(2, 9, 2) if per_head else (2, 9))
    q_rot, k_rot = grape.grape_m_rotate_qk(q, k, freqs, phases=phases)
    dq, dk, d_freqs, d_phases = grape.grape_m_rotate_qk_backward_with_grads(g_q, g_k, q_rot, k_rot, freqs,
                                                                          phases=phases)
    want_dq, want_dk = grape.grape_m_rotate_qk_backward(g_q, g_k, freqs, phases=phases)
    want_freqs, want_phases = grape.grape_m_param_grads(q, k, g_q, g_k, freqs, phases=phases)
    assert d_freqs.shape == want_freqs.shape and d_phases.shape == want_phases.shape
    assert_close(torch.from_numpy(dq), torch.from_numpy(want_dq), 1e-6, "dq")
    assert_close(torch.from_numpy(dk), torch.from_numpy(want_dk), 1e-6, "dk")
    assert_close(torch.from_numpy(d_freqs), torch.from_numpy(want_freqs), 2e-5, "dL/dfreqs")
    assert_close(torch.from_numpy(d_phases), torch.from_numpy(want_phases), 2e-5, "dL/dphases")
    with pytest.raises(grape.GrapeError, match="rotated_k is null"):
        grape.grape_m_rotate_qk_backward_with_grads(g_q, g_k, q_rot, None, freqs, phases=phases)
    with pytest.raises(grape.GrapeError, match="rotated_q: must have the dtype, shape and strides of grad_q"):
        grape.grape_m_rotate_qk_backward_with_grads(g_q, g_k, k_rot, k_rot, freqs, phases=phases)


def test_bf16_parameter_gradients_come_from_the_inputs():
    """grape.torch.grape_m_rotate_qk in bfloat16 forms dL/dfreqs and dL/dphases from its inputs, not
    from its bf16-rounded outputs: the same values as float32 inputs holding the same numbers give
    (whose outputs are float32), to 1e-5; from bf16 outputs they would be about 1e-3 off."""
    g = torch.Generator().manual_seed(12)
    q, k = (torch.randn(2, 64, 2, 32, generator=g).bfloat16() for _ in range(2))
    upstream_q, upstream_k = (torch.randn(2, 64, 2, 32, generator=g).bfloat16() for _ in range(2))
    phases0 = torch.rand(2, 64, generator=g, dtype=torch.float64) * 40
    freqs0 = torch.rand(16, generator=g, dtype=torch.float64) + 0.1
    grads = {}
    for dtype in (torch.bfloat16, torch.float32):
        freqs, phases = freqs0.clone().requires_grad_(), phases0.clone().requires_grad_()
        q_rot, k_rot = grape_m_rotate_qk(q.to(dtype), k.to(dtype), freqs, phases=phases)
        ((q_rot.float() * upstream_q.float()).sum() + (k_rot.float() * upstream_k.float()).sum()).backward()
        grads[dtype] = freqs.grad, phases.grad
    assert_close(grads[torch.bfloat16][0], grads[torch.float32][0], 1e-5, "dL/dfreqs")
    assert_close(grads[torch.bfloat16][1], grads[torch.float32][1], 1e-5, "dL/dphases")


@pytest.mark.parametrize("call,message", [
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones((3, 8))), "freqs: rows must be 1 or the key heads 2"),
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones(9)), "planes must be in [1, head_dim / 2 = 8]"),
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones(8), phases=np.zeros((2, 4))), "phases: must be shaped"),
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones(8), phases=np.zeros((2, 5, 3))), "phases: rows must be"),
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones(8), phases=np.full((2, 5), np.nan)), "is not finite"),
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones(8), phases=np.zeros((2, 5)), offsets=[0, 1]),
     "positions, offsets"),
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones(8), layout="diagonal"), "layout: must be"),
    (lambda q, k: grape.grape_m_rotate_qk(q, k, np.ones(8), angle_sign=0), "angle_sign must be 1 or -1"),
    (lambda q, k: grape.grape_m_rotate_qk(q.astype(np.float64), k, np.ones(8)), "q:"),
])
def test_bad_arguments_raise_one_line(call, message):
    q = np.zeros((2, 5, 4, 16), np.float32)
    k = np.zeros((2, 5, 2, 16), np.float32)
    with pytest.raises(grape.GrapeError) as e:
        call(q, k)
    assert message in str(e.value) and "\n" not in str(e.value)
