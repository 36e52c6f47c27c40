"""grape.attention, grape.torch.attention and grape.attention_decode with a grape.encoding(...)
object: the built-ins that no other argument reaches (xPos, learnable GRAPE-M, M-RoPE, axial 2-D
RoPE, STRING, LieRE, GRAPE-A's lift) through their instance's own kernels. The reference does not
use the fused kernel: Q and K turned (or lifted) by grape.torch.rotate_qk / lift_qk, which other
tests check against the formulas, then softmax(scale * Q K^T + causal mask) V in float64, with
torch autograd for the gradients of q, k and v."""
import math

import numpy as np
import pytest
import torch

import grape
import grape.torch as gt

SEQ, HEADS = 37, 2
ROTATIONS = ["xpos", "grape_m", "mrope", "axial_2d", "string_rope", "liere_2d"]


def case(name, seed):
    enc = grape.encoding(name)
    heads = enc.params["heads"] if "heads" in enc.params else HEADS
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)
    q, k, v = r(1, SEQ, heads, enc.head_dim), r(1, SEQ, heads, enc.head_dim), r(1, SEQ, heads, enc.head_dim)
    positions = None
    if enc.num_axes > 1:  # a position per axis and token, in no order
        positions = torch.randint(0, 300, (enc.num_axes, SEQ), generator=g, dtype=torch.int64)
    return enc, q, k, v, positions


def reference(enc, q, k, v, positions):
    """The encoded Q and K from the rotation (or lift) alone, then the attention in float64."""
    if enc.lifts_qk:
        q_enc, k_enc = gt.lift_qk(q, k, enc)
    else:
        q_enc, k_enc = gt.rotate_qk(q, k, enc, positions=positions)
    q_enc, k_enc = q_enc.double(), k_enc.double()
    d = q.shape[-1]
    # The scale multiplies the content channels' product; a lift's two extra channels add their
    # product unscaled, as a bias is added (docs/attention.md: "a lift's term is not scaled").
    s = torch.einsum("bmhd,bnhd->bhmn", q_enc[..., :d], k_enc[..., :d]) / math.sqrt(d)
    if enc.lifts_qk:
        s = s + torch.einsum("bmhd,bnhd->bhmn", q_enc[..., d:], k_enc[..., d:])
    s = s.masked_fill(torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhmn,bnhd->bmhd", torch.softmax(s, dim=-1), v.double())


@pytest.mark.parametrize("name", ROTATIONS + ["grape_a"])
def test_forward_and_gradients_match_the_encoded_reference(name):
    enc, q, k, v, positions = case(name, seed=len(name))
    want = reference(enc, q, k, v, positions)
    got = grape.attention(q, k, v, enc, positions=positions)
    np.testing.assert_allclose(got.double(), want.detach(), atol=2e-5)
    # Gradients of q, k and v: the fused backward against autograd through the reference.
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    (gt.attention(*leaves, encoding=enc, positions=positions).double() * w).sum().backward()
    ref_leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    (reference(enc, *ref_leaves, positions) * w).sum().backward()
    for got_x, want_x in zip(leaves, ref_leaves):
        scale = want_x.grad.abs().max().item()
        assert (got_x.grad.double() - want_x.grad).abs().max().item() <= 1e-4 * scale


@pytest.mark.parametrize("name", ["xpos", "grape_m", "string_rope"])
def test_decode_matches_the_fused_attention_at_the_last_token(name):
    enc, q, k, v, _ = case(name, seed=7)
    full = grape.attention(q, k, v, enc)
    # The paged cache rotate_qk's KV write fills: K turned at its position, V as given, pages of 8.
    _, k_rot = grape.rotate_qk(q[0], k[0], enc)
    block = 8
    blocks = (SEQ + block - 1) // block
    k_cache = torch.zeros(blocks, block, HEADS, enc.head_dim)
    v_cache = torch.zeros_like(k_cache)
    k_cache.view(-1, HEADS, enc.head_dim)[:SEQ] = k_rot
    v_cache.view(-1, HEADS, enc.head_dim)[:SEQ] = v[0]
    out = grape.attention_decode(q[0, -1:].contiguous(), k_cache, v_cache, torch.arange(blocks, dtype=torch.int32)[None],
                                 torch.tensor([SEQ]), enc)
    np.testing.assert_allclose(out[0], full[0, -1], atol=2e-5)


def test_what_a_built_in_cannot_do_is_one_clear_error():
    enc, q, k, v, positions = case("mrope", seed=1)
    out, lse = grape.attention(q, k, v, enc, positions=positions, return_lse=True)
    for flag in ("inv_freq_grad", "bias_grad"):  # mrope's frequencies train through grape.torch.rotate_qk
        with pytest.raises(grape.GrapeError, match=f"^grape: {flag}: for mrope the backward gives dq, dk and dv$"):
            grape.attention_backward(out, q, k, v, out, lse, enc, positions=positions, **{flag: True})
    with pytest.raises(grape.GrapeError, match="^grape: encoding: sinusoidal enters as 'add to the input embedding'"):
        grape.attention(q, k, v, grape.encoding("sinusoidal"))
    with pytest.raises(grape.GrapeError, match="^grape: encoding, log_forget, grape_a, grape_ap, grape_m: give one$"):
        grape.attention(q, k, v, enc, log_forget=np.zeros((HEADS, SEQ)))
    lift, q, k, v, _ = case("grape_a", seed=2)
    with pytest.raises(grape.GrapeError, match="^grape: encoding: grape_a lifts Q and K; decode would need lifted keys"):
        cache = torch.zeros(1, 8, q.shape[2], q.shape[3])
        grape.attention_decode(q[0, :1].contiguous(), cache, cache, torch.zeros(1, 1, dtype=torch.int32),
                               torch.tensor([1]), lift)
