"""Bias tiles, the ALiBi slope gradient and the sinusoidal embedding against their formulas."""
import math

import numpy as np
import pytest
import torch

import grape

RNG = np.random.default_rng(7)


def distances(q_start, q_len, k_start, k_len):
    i = np.arange(q_start, q_start + q_len)[:, None]
    j = np.arange(k_start, k_start + k_len)[None, :]
    return i, j


def test_alibi_slopes_and_tile():
    np.testing.assert_allclose(grape.alibi_slopes(8), [2.0 ** -(h + 1) for h in range(8)], rtol=1e-7)
    slopes = grape.alibi_slopes(6)
    tile = grape.alibi_bias(slopes, q_len=4, k_len=9, q_start=5)
    i, j = distances(5, 4, 0, 9)
    expected = -np.asarray(slopes, np.float64)[:, None, None] * np.abs(i - j)[None]
    assert tile.shape == (6, 4, 9) and tile.dtype == np.float32
    np.testing.assert_allclose(tile, expected, rtol=1e-6)
    enc = grape.from_config({"model_type": "bloom", "n_head": 4, "hidden_size": 256})
    np.testing.assert_allclose(grape.alibi_bias(enc, 2, 2), -np.array(enc.slopes)[:, None, None] *
                               np.array([[0, 1], [1, 0]])[None], rtol=1e-6)


def test_alibi_slope_gradient():
    g = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    i, j = distances(2, 5, 1, 7)
    expected = (g.astype(np.float64) * -np.abs(i - j)[None]).sum(axis=(1, 2))
    np.testing.assert_allclose(grape.alibi_slope_grad(g, q_start=2, k_start=1), expected, rtol=1e-6)


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """transformers' _relative_position_bucket, for one relative position (key - query), float64."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if rel > 0 else 0
        n = abs(rel)
    else:
        n = max(-rel, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return bucket + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_tile_looks_up_the_bucket_of_each_offset(bidirectional):
    table = RNG.standard_normal((32, 3)).astype(np.float32)
    tile = grape.t5_bias(table, q_len=6, k_len=300, max_distance=128, bidirectional=bidirectional, q_start=150)
    for h in range(3):
        for a, i in enumerate(range(150, 156)):
            for j in range(300):
                assert tile[h, a, j] == table[t5_bucket(j - i, bidirectional, 32, 128), h]


def test_fox_tile_is_a_sum_of_log_forget_gates_along_the_path():
    lf = np.log(1 / (1 + np.exp(-RNG.standard_normal((2, 40))))).astype(np.float32)  # log sigmoid
    tile = grape.fox_bias(lf)
    assert tile.shape == (2, 40, 40)
    for h in range(2):
        for i in range(40):
            for j in range(40):
                if j > i:
                    assert tile[h, i, j] == -np.inf
                else:
                    assert tile[h, i, j] == pytest.approx(lf[h, j + 1:i + 1].astype(np.float64).sum(), abs=1e-5)


def test_sinusoidal_embedding_is_added_in_place():
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    before = x.astype(np.float64)
    positions = np.array([0, 1, 1000, 70000], dtype=np.int64)
    grape.add_sinusoidal(x, positions)
    omega = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    angle = positions[:, None] * omega[None, :]
    expected = before.copy()
    expected[:, 0::2] += np.sin(angle)
    expected[:, 1::2] += np.cos(angle)
    np.testing.assert_allclose(x, expected, atol=2e-6)


def test_bias_arguments_are_checked():
    with pytest.raises(grape.GrapeError, match="table: shape must be"):
        grape.t5_bias(np.zeros(32, np.float32), 2, 2)
    with pytest.raises(grape.GrapeError, match="log_forget: shape must be"):
        grape.fox_bias(np.zeros(5, np.float32))
    with pytest.raises(grape.GrapeError, match="positions: must hold 4 values"):
        grape.add_sinusoidal(np.zeros((4, 8), np.float32), np.arange(3))
    with pytest.raises(grape.GrapeError, match="x: must be float32"):
        grape.add_sinusoidal(np.zeros((4, 8)), np.arange(4))


def test_alibi_slopes_learn_through_torch():
    from grape.torch import alibi_bias
    slopes = torch.tensor(grape.alibi_slopes(4), dtype=torch.float32, requires_grad=True)
    g = torch.randn(4, 3, 5)
    (alibi_bias(slopes, q_len=3, k_len=5, q_start=2) * g).sum().backward()
    i, j = distances(2, 3, 0, 5)
    expected = (g.double().numpy() * -np.abs(i - j)[None]).sum(axis=(1, 2))
    np.testing.assert_allclose(slopes.grad.numpy(), expected, rtol=1e-5)


@pytest.mark.parametrize("query_gated", [False, True], ids=["key-gated", "query-key-gated"])
def test_grape_a_bias_grad_is_the_formulas_and_reads_only_the_causal_entries(query_gated):
    heads, t = 3, 9
    rng = np.random.default_rng(11)
    omega = rng.uniform(0.1, 1.0, heads)
    kg, qg = rng.uniform(0.1, 1.0, (heads, t)), rng.uniform(0.1, 1.0, (heads, t))
    g = rng.standard_normal((heads, t, t))
    above = np.triu(np.ones((t, t), dtype=bool), 1)
    g[:, above] = np.nan  # keys after the query: never read
    d_omega, d_key, d_query = grape.grape_a_bias_grad(omega, kg, g, query_gate=qg if query_gated else None)
    # b[h, i, j] = -(i - j) * omega[h] * (kg[h, j] + qg[h, i]) for j <= i
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    w = np.where(j < i, -(i - j) * g, 0.0)
    rate = kg[:, None, :] + (qg[:, :, None] if query_gated else 0.0)
    np.testing.assert_allclose(d_omega, (w * rate).sum((1, 2)), rtol=1e-12)
    np.testing.assert_allclose(d_key, omega[:, None] * w.sum(1), rtol=1e-12)
    if query_gated:
        np.testing.assert_allclose(d_query, omega[:, None] * w.sum(2), rtol=1e-12)
    else:
        assert d_query is None
    with pytest.raises(grape.GrapeError, match=r"^grape: grad_tile: shape must be \[heads, seq_len, seq_len\] = \[3, 9, 9\]$"):
        grape.grape_a_bias_grad(omega, kg, g[:, :, :4])
    g[1, 4, 2] = np.inf
    with pytest.raises(grape.GrapeError, match=r"^grape: grad_tile\[1\]\[4\]\[2\]: must be finite \(got inf\)$"):
        grape.grape_a_bias_grad(omega, kg, g)
