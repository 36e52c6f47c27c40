"""grape.rotate_qk on NumPy arrays and torch tensors against the float64 formula (conftest.py)."""
import numpy as np
import pytest
import torch

import grape
from conftest import default_inv_freq, rope_reference

RNG = np.random.default_rng(20261204)
# float32 storage: one rounding of each output plus float32 products; far below what a float32
# angle at position 10^6 would cost (about 0.06 rad there).
F32_TOL = 1e-5


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("layout", ["half_split", "interleaved"])
def test_float32_matches_the_formula_up_to_large_positions(layout):
    enc = grape.rope(head_dim=64, base=10000.0, layout=layout)
    q, k = normal(6, 4, 64), normal(6, 2, 64)  # GQA: 2 KV heads
    positions = np.array([0, 1, 7, 4096, 1_000_000, 2**31 - 1], dtype=np.int64)
    q_rot, k_rot = grape.rotate_qk(q, k, enc, positions=positions)
    inv_freq = default_inv_freq(64)
    np.testing.assert_allclose(q_rot, rope_reference(q, inv_freq, positions, layout), atol=F32_TOL, rtol=0)
    np.testing.assert_allclose(k_rot, rope_reference(k, inv_freq, positions, layout), atol=F32_TOL, rtol=0)
    assert q_rot.dtype == np.float32 and not np.shares_memory(q_rot, q)


def test_partial_rotary_dim_passes_the_rest_through_and_int32_positions_work():
    enc = grape.rope(head_dim=64, rotary_dim=16, base=500000.0)
    q = normal(5, 3, 64)
    positions = np.array([3, 1, 4, 1, 5], dtype=np.int32)
    q_rot, k_rot = grape.rotate_qk(q, None, enc, positions=positions)
    assert k_rot is None
    np.testing.assert_array_equal(q_rot[..., 16:], q[..., 16:])
    np.testing.assert_allclose(q_rot, rope_reference(q, default_inv_freq(16, 500000.0), positions), atol=F32_TOL)


def test_batched_offsets_and_a_strided_view_of_a_packed_qkv_buffer():
    enc = grape.rope(head_dim=32)
    qkv = normal(2, 5, 3 * 4, 32)                  # [batch, seq, 3 * heads, dim]
    q, k = qkv[:, :, 0:4], qkv[:, :, 4:8]          # views: head stride 32, token stride 384
    offsets = np.array([10, 100_000], dtype=np.int64)
    q_rot, k_rot = grape.rotate_qk(q, k, enc, offsets=offsets)
    positions = offsets[:, None] + np.arange(5)[None, :]
    np.testing.assert_allclose(q_rot, rope_reference(q, default_inv_freq(32), positions), atol=F32_TOL)
    np.testing.assert_allclose(k_rot, rope_reference(k, default_inv_freq(32), positions), atol=F32_TOL)


def test_in_place_and_packed_sequences():
    enc = grape.rope(head_dim=16)
    q = normal(7, 2, 16)
    expected = rope_reference(q, default_inv_freq(16), [0, 1, 2, 0, 1, 2, 3])  # two sequences: 3 + 4 tokens
    cu_seqlens = np.array([0, 3, 7], dtype=np.int64)
    result = grape.rotate_qk(q, None, enc, cu_seqlens=cu_seqlens, out=(q, None))
    assert result[0] is q
    np.testing.assert_allclose(q, expected, atol=F32_TOL)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2.0**-10), (torch.bfloat16, 2.0**-7)])
def test_torch_half_types_round_once(dtype, tol):
    enc = grape.rope(head_dim=64)
    q = torch.from_numpy(normal(2, 8, 4, 64)).to(dtype)
    positions = torch.arange(16, dtype=torch.int64) * 997
    q_rot, _ = grape.rotate_qk(q, None, enc, positions=positions)
    assert isinstance(q_rot, torch.Tensor) and q_rot.dtype == dtype
    expected = rope_reference(q.double().numpy(), default_inv_freq(64), positions.numpy().reshape(2, 8))
    # one rounding to the storage type: relative error 2^-11 (f16) or 2^-8 (bf16) of |value| <= ~5
    np.testing.assert_allclose(q_rot.double().numpy(), expected, atol=5 * tol, rtol=0)


def test_attention_factor_scales_cos_and_sin():
    enc = grape.rope(head_dim=8, attention_factor=1.25)
    q = normal(3, 1, 8)
    q_rot, _ = grape.rotate_qk(q, None, enc)
    np.testing.assert_allclose(q_rot, rope_reference(q, default_inv_freq(8), [0, 1, 2], attention_factor=1.25),
                               atol=F32_TOL)


def test_backward_is_the_inverse_rotation():
    enc = grape.rope(head_dim=32)
    g = normal(4, 2, 32)
    positions = np.array([5, 6, 7, 123456], dtype=np.int64)
    dq, _ = grape.rotate_qk_backward(g, None, enc, positions=positions)
    np.testing.assert_allclose(dq, rope_reference(g, default_inv_freq(32), -positions), atol=F32_TOL)


@pytest.mark.parametrize("call,message", [
    (lambda q, e: grape.rotate_qk(q.astype(np.float64), None, e), "q: dtype must be float32"),
    (lambda q, e: grape.rotate_qk(q[..., :16], None, e), "q: last dimension must be the encoding's head_dim 32"),
    (lambda q, e: grape.rotate_qk(q[..., ::2].repeat(2, axis=-1)[..., ::2], None, e), "channels must be contiguous"),
    (lambda q, e: grape.rotate_qk(q[::-1], None, e), "negative strides"),
    (lambda q, e: grape.rotate_qk(q, None, e, positions=np.arange(3)), "positions: must hold 4 values"),
    (lambda q, e: grape.rotate_qk(q, None, e, positions=np.arange(4.0)), "positions: dtype must be int32 or int64"),
    (lambda q, e: grape.rotate_qk(q, None, e, positions=np.arange(4), offsets=np.zeros(1, np.int64)),
     "give one or neither"),
    (lambda q, e: grape.rotate_qk(q[0], None, e), "shape must be"),
    (lambda q, e: grape.rotate_qk(q, q[:, :1], e, out=(q, np.empty_like(q))), "k_out: must have the dtype, shape"),
    (lambda q, e: grape.rotate_qk(q, None, grape.from_config({"model_type": "bloom", "n_head": 4, "hidden_size": 256})),
     "encoding: must be a grape.RotaryEncoding"),
])
def test_bad_arguments_are_one_line_errors_and_write_nothing(call, message):
    enc = grape.rope(head_dim=32)
    q = normal(4, 2, 32)
    before = q.copy()
    with pytest.raises((grape.GrapeError, TypeError), match=message):
        call(q, enc)
    np.testing.assert_array_equal(q, before)


def test_positions_may_be_a_list():
    enc = grape.rope(head_dim=8)
    q = normal(3, 1, 8)
    q_rot, _ = grape.rotate_qk(q, None, enc, positions=[7, 0, 300])
    np.testing.assert_allclose(q_rot, rope_reference(q, default_inv_freq(8), [7, 0, 300]), atol=F32_TOL)


def test_positions_beyond_max_position_are_refused():
    enc = grape.rope(head_dim=8)
    with pytest.raises(grape.GrapeError, match="position"):
        grape.rotate_qk(normal(2, 1, 8), None, enc, positions=np.array([0, 100]), max_position=50)


def test_out_strides_count_only_where_a_dimension_is_stepped():
    """An output must address like its input, but a dimension of extent 1 is never stepped along:
    torch 2 gives such dimensions of an autograd gradient strides of its own, and they are accepted.
    A stride that is stepped along and differs is refused with both layouts in the message."""
    enc = grape.rope(head_dim=16)
    q, k = torch.randn(2, 1, 1, 16), torch.randn(2, 1, 1, 16)
    q_out = torch.empty_strided((2, 1, 1, 16), (16, 1, 1, 1))  # strides of its extent-1 dimensions differ
    k_out = torch.empty_like(k)
    grape.rotate_qk(q, k, enc, out=(q_out, k_out))
    want_q, want_k = grape.rotate_qk(q, k, enc)
    assert torch.equal(q_out, want_q) and torch.equal(k_out, want_k)
    wide = torch.randn(2, 3, 1, 32)[..., :16]  # its rows 32 apart (torch 1.13 reports stride 1 for extent 1)
    with pytest.raises(grape.GrapeError, match=r"q_out: must have the dtype, shape and strides of q "
                                               r"\(shape \[2, 3, 1, 16\], strides \[96, 32, \d+, 1\] vs "
                                               r"\[2, 3, 1, 16\], \[48, 16, \d+, 1\]\)"):
        grape.rotate_qk(torch.randn(2, 3, 1, 16), None, enc, out=(wide, None))
