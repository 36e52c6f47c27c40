"""rotate_qk's cos/sin cache, fused QK-norm and paged KV-cache write against the formulas."""
import numpy as np
import pytest

import grape
from conftest import default_inv_freq, rope_reference

RNG = np.random.default_rng(11)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_a_rotary_cache_gives_the_same_bits_as_on_the_fly():
    enc = grape.rope(head_dim=64)
    q, k = normal(6, 4, 64), normal(6, 2, 64)
    positions = np.array([1000, 1001, 1002, 1500, 1999, 1234], dtype=np.int64)
    cache = grape.RotaryCache(enc, max_position=2000, first_position=1000)
    assert (cache.first_position, cache.max_position, cache.rotary_dim) == (1000, 2000, 64)
    cached = grape.rotate_qk(q, k, enc, positions=positions, cache=cache)
    direct = grape.rotate_qk(q, k, enc, positions=positions)
    np.testing.assert_array_equal(cached[0], direct[0])
    np.testing.assert_array_equal(cached[1], direct[1])
    with pytest.raises(grape.GrapeError, match="position"):
        grape.rotate_qk(q, k, enc, positions=positions - 1, cache=cache)  # 999 is outside the window


@pytest.mark.parametrize("unit_offset", [False, True])
def test_qk_norm_then_rotation(unit_offset):
    enc = grape.rope(head_dim=32)
    q, k = normal(5, 3, 32), normal(5, 1, 32)
    wq, wk = normal(32), normal(32)
    positions = np.arange(5) * 77
    q_rot, k_rot = grape.rotate_qk(q, k, enc, positions=positions,
                                   qk_norm=grape.QKNorm(wq, wk, eps=1e-5, unit_offset=unit_offset))

    def rms(x, w):
        x = x.astype(np.float64)
        scale = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)
        return x * scale * ((1.0 + w) if unit_offset else w).astype(np.float64)

    theta = default_inv_freq(32)
    np.testing.assert_allclose(q_rot, rope_reference(rms(q, wq), theta, positions), atol=2e-5 * 4)
    np.testing.assert_allclose(k_rot, rope_reference(rms(k, wk), theta, positions), atol=2e-5 * 4)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_kv_cache_write_puts_rotated_k_and_v_in_their_slots(layout):
    enc = grape.rope(head_dim=16)
    tokens, heads, blocks, block_size = 5, 2, 3, 4
    k, v = normal(tokens, heads, 16), normal(tokens, heads, 16)
    shape = (blocks, block_size, heads, 16) if layout == "NHD" else (blocks, heads, block_size, 16)
    k_cache, v_cache = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    slots = np.array([7, -1, 0, 11, 4], dtype=np.int64)
    positions = np.array([20, 21, 22, 23, 24], dtype=np.int64)
    _, k_rot = grape.rotate_qk(None, k, enc, positions=positions,
                               kv_cache=grape.KVCacheWrite(slots, k_cache, v_cache, v, layout=layout))
    np.testing.assert_allclose(k_rot, rope_reference(k, default_inv_freq(16), positions), atol=1e-5)

    def slot_view(cache, s):
        b, o = divmod(int(s), block_size)
        return cache[b, o] if layout == "NHD" else cache[b, :, o]

    written = set()
    for t, s in enumerate(slots):
        if s < 0:
            continue
        written.add(int(s))
        np.testing.assert_array_equal(slot_view(k_cache, s), k_rot[t])
        np.testing.assert_array_equal(slot_view(v_cache, s), v[t])
    for s in range(blocks * block_size):
        if s not in written:
            assert not slot_view(k_cache, s).any() and not slot_view(v_cache, s).any()


def test_fused_arguments_are_checked():
    enc = grape.rope(head_dim=16)
    k = normal(3, 1, 16)
    cache = np.zeros((2, 4, 1, 16), np.float32)
    with pytest.raises(grape.GrapeError, match="repeats slot"):
        grape.rotate_qk(None, k, enc, kv_cache=grape.KVCacheWrite([1, 1, 2], cache))
    with pytest.raises(grape.GrapeError, match="kv_cache.slot_mapping: must hold 3 values"):
        grape.rotate_qk(None, k, enc, kv_cache=grape.KVCacheWrite([1, 2], cache))
    with pytest.raises(grape.GrapeError, match="kv_cache.layout"):
        grape.rotate_qk(None, k, enc, kv_cache=grape.KVCacheWrite([0, 1, 2], cache, layout="NDH"))
    with pytest.raises(grape.GrapeError, match="qk_norm.k_weight: must be a contiguous float32 array of head_dim"):
        grape.rotate_qk(None, k, enc, qk_norm=grape.QKNorm(k_weight=np.ones(8, np.float32)))
    assert not cache.any()
