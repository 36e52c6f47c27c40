"""M-RoPE (Qwen2-VL's multimodal RoPE) in Python: grape.mrope and RotaryEncoding.with_sections
against transformers' own M-RoPE (apply_multimodal_rotary_pos_emb in transformers 4, Qwen2VLRotaryEmbedding's
recomposition in 5; evaluated in float64 on cos/sin computed
from the formula in float64), the learned-frequency gradient through grape.torch against float64
autograd of the same transformers function, and the errors."""
import types

import numpy as np
import pytest
import torch
try:
    from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_multimodal_rotary_pos_emb
except ImportError:  # transformers 5 sections the frequencies in Qwen2VLRotaryEmbedding itself
    apply_multimodal_rotary_pos_emb = None
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding, apply_rotary_pos_emb

import grape
from conftest import default_inv_freq
from grape.torch import rotate_qk

SECTIONS = [4, 6, 6]  # Qwen2-VL's (16, 24, 24) of 64 planes, scaled to 16 planes
HEAD_DIM = 32


def transformers_mrope(q, k, inv_freq, positions):
    """q, k [batch, seq, heads, dim]; positions [3, batch, seq]: Qwen2-VL's rotation in float64, its
    cos/sin built as Qwen2VLRotaryEmbedding builds them (cat(freqs, freqs)) but in float64."""
    freqs = positions.double()[..., None] * inv_freq.double()  # [3, batch, seq, planes]
    q_t, k_t = q.double().transpose(1, 2), k.double().transpose(1, 2)  # [batch, heads, seq, dim]
    if apply_multimodal_rotary_pos_emb is not None:  # transformers 4: the sections in the apply step
        emb = torch.cat([freqs, freqs], dim=-1)
        q_out, k_out = apply_multimodal_rotary_pos_emb(q_t, k_t, emb.cos(), emb.sin(), SECTIONS, unsqueeze_dim=1)
    else:  # transformers 5: the embedding's own recomposition, then the plain apply step
        emb = Qwen2VLRotaryEmbedding.recomposition_frequencies(types.SimpleNamespace(mrope_section=SECTIONS), freqs)
        q_out, k_out = apply_rotary_pos_emb(q_t, k_t, emb.cos(), emb.sin(), unsqueeze_dim=1)
    return q_out.transpose(1, 2), k_out.transpose(1, 2)


def vision_positions(batch, seq, rng):
    """(t, h, w) ids that differ per axis, as an image's patches have them, some past 2^16."""
    p = rng.integers(0, 70000, size=(3, batch, seq))
    p[:, :, 0] = 0
    return torch.from_numpy(p.astype(np.int64))


def test_mrope_matches_transformers_multimodal_rotation():
    rng = np.random.default_rng(20261205)
    enc = grape.mrope(HEAD_DIM, SECTIONS, base=1_000_000.0)
    assert enc.num_axes == 3 and enc.sections == SECTIONS and "sections 4/6/6" in enc.describe()
    batch, seq = 2, 7
    q = torch.randn(batch, seq, 4, HEAD_DIM)
    k = torch.randn(batch, seq, 2, HEAD_DIM)
    positions = vision_positions(batch, seq, rng)
    q_rot, k_rot = grape.rotate_qk(q, k, enc, positions=positions.reshape(3, -1).numpy())
    q_ref, k_ref = transformers_mrope(q, k, torch.tensor(default_inv_freq(HEAD_DIM, 1_000_000.0)), positions)
    # float32 arithmetic on exact phases: a few float32 ulps of |x| ~ 3, at any position.
    np.testing.assert_allclose(q_rot, q_ref.numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(k_rot, k_ref.numpy(), atol=1e-5, rtol=0)
    assert np.abs(np.asarray(q_rot) - q.numpy()).max() > 0.1  # it did turn


def test_text_positions_are_rope_bit_for_bit():
    """t = h = w: every plane turns by the token's position, so M-RoPE is RoPE."""
    mrope = grape.mrope(HEAD_DIM, SECTIONS)
    rope = grape.rope(HEAD_DIM)
    q, k = np.random.default_rng(1).standard_normal((2, 9, 4, HEAD_DIM), dtype=np.float32), None
    ids = np.array([0, 5, 17, 1000, 99999, 3, 2, 1, 40], dtype=np.int64)
    same = np.tile(np.concatenate([ids, ids + 7]), (3, 1))
    q_m, _ = grape.rotate_qk(q, k, mrope, positions=same)
    q_r, _ = grape.rotate_qk(q, k, rope, positions=same[0])
    assert np.array_equal(q_m, q_r)
    q_offsets, _ = grape.rotate_qk(q, k, mrope, offsets=np.array([0, 11], dtype=np.int64))
    q_rope_offsets, _ = grape.rotate_qk(q, k, rope, offsets=np.array([0, 11], dtype=np.int64))
    assert np.array_equal(q_offsets, q_rope_offsets)  # no ids: every axis reads offset + s


def test_from_config_with_sections_reads_qwen2_vl():
    config = {"model_type": "qwen2_vl", "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
              "max_position_embeddings": 32768, "rope_theta": 1000000.0,
              "rope_scaling": {"type": "mrope", "mrope_section": SECTIONS}}
    enc = grape.from_config(config, precision="float64")
    assert enc.num_axes == 1
    vl = enc.with_sections(config["rope_scaling"]["mrope_section"])
    assert vl.num_axes == 3 and vl.sections == SECTIONS and vl.head_dim == HEAD_DIM
    np.testing.assert_array_equal(vl.inv_freq, grape.mrope(HEAD_DIM, SECTIONS, base=1e6).inv_freq)


def test_learned_frequencies_get_the_transformers_gradient():
    rng = np.random.default_rng(3)
    batch, seq = 1, 6
    theta = torch.tensor(default_inv_freq(HEAD_DIM), dtype=torch.float64, requires_grad=True)
    positions = vision_positions(batch, seq, rng) % 50
    q = torch.randn(batch, seq, 3, HEAD_DIM, requires_grad=True)
    k = torch.randn(batch, seq, 1, HEAD_DIM, requires_grad=True)
    wq, wk = torch.randn(batch, seq, 3, HEAD_DIM, dtype=torch.float64), torch.randn(batch, seq, 1, HEAD_DIM,
                                                                                  dtype=torch.float64)
    q_rot, k_rot = rotate_qk(q, k, grape.mrope(HEAD_DIM, SECTIONS), positions=positions.reshape(3, -1),
                             inv_freq=theta)
    ((q_rot.double() * wq).sum() + (k_rot.double() * wk).sum()).backward()

    theta64 = theta.detach().clone().requires_grad_()
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    q_ref, k_ref = transformers_mrope(q64, k64, theta64, positions)
    ((q_ref * wq).sum() + (k_ref * wk).sum()).backward()
    torch.testing.assert_close(q.grad.double(), q64.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(k.grad.double(), k64.grad, atol=1e-5, rtol=0)
    # dL/dθ_i = Σ position·(…): positions < 50, so a float32 relative error of ~1e-6 per term.
    torch.testing.assert_close(theta.grad, theta64.grad, atol=1e-3, rtol=1e-5)
    assert theta64.grad.abs().max() > 1.0


def test_fused_attention_with_a_sectioned_table_learns_it():
    """A Qwen2-VL encoding (a table with sections, as with_sections makes it from a config) inside
    grape.torch.attention, its table learned: the output and the gradients for q, k, v and θ against
    float64 autograd of transformers' M-RoPE followed by a float64 causal attention."""
    rng = np.random.default_rng(5)
    seq, heads = 29, 2
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, seq, heads, HEAD_DIM, generator=g, requires_grad=True) for _ in range(3))
    weight = torch.randn(1, seq, heads, HEAD_DIM, generator=g, dtype=torch.float64)
    positions = vision_positions(1, seq, rng) % 3000
    enc = grape.rope(HEAD_DIM, base=1e6).with_sections(SECTIONS)
    theta = torch.tensor(enc.inv_freq, requires_grad=True)
    out = grape.torch.attention(q, k, v, enc, inv_freq=theta, positions=positions.reshape(3, -1))
    leaves = [q, k, v, theta]
    got = torch.autograd.grad((out.double() * weight).sum(), leaves)

    leaves64 = [x.detach().double().requires_grad_() for x in leaves]
    q_rot, k_rot = transformers_mrope(*leaves64[:2], leaves64[3], positions)
    logits = torch.einsum("bihd,bjhd->bhij", q_rot / HEAD_DIM ** 0.5, k_rot)
    logits = logits.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    expect = torch.einsum("bhij,bjhd->bihd", torch.softmax(logits, -1), leaves64[2])
    torch.testing.assert_close(out.double(), expect.detach(), atol=2e-5, rtol=0)
    want = torch.autograd.grad((expect * weight).sum(), leaves64)
    for name, a, b in zip(["q", "k", "v", "theta"], got, want):
        assert (a.double() - b).abs().max().item() <= 1e-4 * b.abs().max().item() + 1e-6, name
    assert want[3].abs().max() > 1.0
    # Without positions every axis reads the token's index: text tokens, which is RoPE's attention.
    plain = grape.attention(q.detach(), k.detach(), v.detach(), grape.rope(HEAD_DIM, base=1e6))
    torch.testing.assert_close(grape.attention(q.detach(), k.detach(), v.detach(), enc), plain, atol=1e-6, rtol=0)


def test_bad_sections_and_positions_are_one_line_errors():
    enc = grape.rope(HEAD_DIM)
    with pytest.raises(grape.GrapeError, match=r"^grape: sections: must add up to rotary_dim / 2 = 16 planes \(got 15\)$"):
        enc.with_sections([4, 6, 5])
    with pytest.raises(grape.GrapeError, match=r"^grape: sections\[1\]: must be in \[0, 16\] \(got -1\)$"):
        enc.with_sections([5, -1, 12])
    with pytest.raises(grape.GrapeError, match="must list 1 to 8 plane counts"):
        enc.with_sections([])
    q = np.zeros((5, 2, HEAD_DIM), dtype=np.float32)
    with pytest.raises(grape.GrapeError, match=r"positions: must hold 15 values \(num_axes x tokens\)"):
        grape.rotate_qk(q, None, grape.mrope(HEAD_DIM, SECTIONS), positions=np.arange(5, dtype=np.int64))
    with pytest.raises(grape.GrapeError, match="one position axis or M-RoPE's three"):
        grape.attention(q, q, q, enc.with_sections([8, 8]), positions=np.zeros((2, 5), dtype=np.int64))
    with pytest.raises(grape.GrapeError, match="a \\(RotaryEncoding, AlibiEncoding\\) pair takes a rotation on one position axis"):
        grape.attention(q, q, q, (grape.mrope(HEAD_DIM, SECTIONS), grape.alibi(heads=2)))
    cache = np.zeros((1, 16, 2, HEAD_DIM), dtype=np.float32)  # one NHD page of 16 slots
    with pytest.raises(grape.GrapeError, match="^grape: encoding: this RotaryEncoding turns its planes on 3 position "
                                               "axes; decode takes one position per query$"):
        grape.attention_decode(np.zeros((1, 2, HEAD_DIM), dtype=np.float32), cache, cache,
                               np.zeros((1, 1), dtype=np.int32), np.array([5]), grape.mrope(HEAD_DIM, SECTIONS))
    with pytest.raises(grape.GrapeError, match="^grape: encoding: mrope turns its planes on 3 position axes"):
        grape.attention_decode(np.zeros((1, 2, HEAD_DIM), dtype=np.float32), cache, cache,
                               np.zeros((1, 1), dtype=np.int32), np.array([5]),
                               grape.encoding("mrope", head_dim=HEAD_DIM, sections=SECTIONS))
