"""grape.encoding(name, **params): built-ins made from their parameters, and rotate_qk through their
instance kernels, against the formulas in float64: xPos (RoPE times zeta_i^(+-position/scale_base)),
GRAPE-M (the matrix exponential of position * omega * (a b^T - b a^T), torch.linalg.matrix_exp),
the backward (the transpose), the relative law on the scores, gradients through grape.torch, and
the errors."""
import numpy as np
import pytest
import torch

import grape
from conftest import default_inv_freq, rope_reference
from grape.torch import rotate_qk


def xpos_reference(x, positions, head_dim, base, scale_base, gamma, key):
    """x [tokens, heads, dim]: half-split RoPE, plane i scaled by zeta_i^(+-m/scale_base),
    zeta_i = (2i/d + gamma)/(1 + gamma) (Sun et al.; + for queries, - for keys)."""
    rotated = rope_reference(x, default_inv_freq(head_dim, base), positions)
    zeta = (np.arange(0, head_dim, 2) / head_dim + gamma) / (1 + gamma)
    sign = -1.0 if key else 1.0
    scale = zeta[None, :] ** (sign * np.asarray(positions, dtype=np.float64)[:, None] / scale_base)
    scale = np.concatenate([scale, scale], axis=1)[:, None, :]  # plane i: channels i and i + d/2
    return rotated * scale


def grape_m_matrices(positions, omega, a, b):
    """exp(m * omega * (a b^T - b a^T)) per position, float64 [tokens, d, d]."""
    a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    generator = omega * (torch.outer(a, b) - torch.outer(b, a))
    m = torch.tensor(positions, dtype=torch.float64)[:, None, None]
    return torch.linalg.matrix_exp(m * generator)


def test_every_builtin_is_made_with_its_defaults_and_says_what_it_is():
    names = [e.name for e in grape.list()]
    for name in names:
        enc = grape.encoding(name)
        assert enc.name == name and name in enc.describe() and enc.params
    xpos = grape.encoding("xpos", head_dim=16, scale_base=256)
    assert xpos.params == {"head_dim": 16, "base": 10000.0, "scale_base": 256.0, "gamma": 0.4}
    assert xpos.rotates_qk and xpos.head_dim == 16 and xpos.num_axes == 1
    assert not grape.encoding("alibi").rotates_qk
    assert grape.encoding("mrope").num_axes == 3
    assert grape.encoding("rope_alibi", rotary={"head_dim": 32, "rotary_dim": 16}).params["rotary"]["rotary_dim"] == 16


def test_xpos_rotates_and_scales_as_the_formula():
    d, base, scale_base, gamma = 16, 10000.0, 512.0, 0.4
    enc = grape.encoding("xpos", head_dim=d, base=base, scale_base=scale_base, gamma=gamma)
    rng = np.random.default_rng(7)
    q = rng.standard_normal((6, 3, d), dtype=np.float32)
    k = rng.standard_normal((6, 1, d), dtype=np.float32)
    positions = np.array([0, 1, 7, 100, 999, 2000], dtype=np.int64)
    q_rot, k_rot = grape.rotate_qk(q, k, enc, positions=positions)
    q_ref = xpos_reference(q, positions, d, base, scale_base, gamma, key=False)
    k_ref = xpos_reference(k, positions, d, base, scale_base, gamma, key=True)
    # float32 arithmetic; the scales reach zeta^(-2000/512) ~ 100: relative 1e-6.
    np.testing.assert_allclose(q_rot, q_ref, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(k_rot, k_ref, rtol=2e-6, atol=2e-6)
    assert np.abs(k_ref).max() > 20  # the key scales did grow


def test_xpos_scores_depend_on_the_offset_only():
    enc = grape.encoding("xpos", head_dim=32)
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 1, 32), dtype=np.float32)
    k = rng.standard_normal((1, 1, 32), dtype=np.float32)
    scores = []
    for shift in (0, 37, 1000):
        q_rot, _ = grape.rotate_qk(q, None, enc, positions=[5 + shift])
        _, k_rot = grape.rotate_qk(None, k, enc, positions=[2 + shift])
        scores.append(float(np.dot(q_rot.ravel().astype(np.float64), k_rot.ravel())))
    # The scales reach 12 and 1/12 at these positions; an absolute encoding would move the score by O(1).
    np.testing.assert_allclose(scores, scores[0], rtol=0, atol=1e-4)


def test_grape_m_is_the_matrix_exponential_and_its_backward_the_transpose():
    d, omega = 8, 0.3
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal(d) / np.sqrt(d), rng.standard_normal(d) / np.sqrt(d)
    enc = grape.encoding("grape_m", head_dim=d, omega=omega, a=a.tolist(), b=b)  # a list or an array
    np.testing.assert_array_equal(enc.params["b"], b)
    positions = [0, 1, 5, 40, 3000, 123456]
    x = rng.standard_normal((len(positions), 2, d), dtype=np.float32)
    rotations = grape_m_matrices(positions, omega, a, b)  # [tokens, d, d]
    expected = torch.einsum("tij,thj->thi", rotations, torch.from_numpy(x).double()).numpy()
    q_rot, k_rot = grape.rotate_qk(x, x, enc, positions=positions)
    np.testing.assert_allclose(q_rot, expected, atol=3e-6, rtol=0)
    np.testing.assert_array_equal(q_rot, k_rot)  # orthogonal: keys turn as queries do
    back, _ = grape.rotate_qk_backward(x, None, enc, positions=positions)
    transposed = torch.einsum("tji,thj->thi", rotations, torch.from_numpy(x).double()).numpy()
    np.testing.assert_allclose(back, transposed, atol=3e-6, rtol=0)


def test_torch_gradients_through_a_builtin_match_float64_autograd():
    d, omega = 8, 0.2
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal(d), rng.standard_normal(d)
    enc = grape.encoding("grape_m", head_dim=d, omega=omega, a=a, b=b)
    positions = [3, 1, 4, 1, 5]
    q = torch.randn(5, 2, d, requires_grad=True)
    k = torch.randn(5, 1, d, requires_grad=True)
    wq, wk = torch.randn(5, 2, d, dtype=torch.float64), torch.randn(5, 1, d, dtype=torch.float64)
    q_rot, k_rot = rotate_qk(q, k, enc, positions=torch.tensor(positions))
    ((q_rot.double() * wq).sum() + (k_rot.double() * wk).sum()).backward()
    rotations = grape_m_matrices(positions, omega, a, b)
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    q_ref = torch.einsum("tij,thj->thi", rotations, q64)
    k_ref = torch.einsum("tij,thj->thi", rotations, k64)
    ((q_ref * wq).sum() + (k_ref * wk).sum()).backward()
    torch.testing.assert_close(q.grad.double(), q64.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(k.grad.double(), k64.grad, atol=1e-5, rtol=0)
    with pytest.raises(grape.GrapeError, match="inv_freq: replaces a RotaryEncoding's table"):
        rotate_qk(q, k, enc, positions=torch.tensor(positions), inv_freq=torch.ones(d // 2))


def test_bad_names_parameters_and_uses_are_one_line_errors():
    with pytest.raises(grape.GrapeError, match=r"^grape: encoding: no built-in 'yarn' \(grape.list\(\): rope, "):
        grape.encoding("yarn")
    with pytest.raises(grape.GrapeError,
                       match=r"^grape: xpos: no parameter 'theta' \(it takes head_dim, base, scale_base, gamma\)$"):
        grape.encoding("xpos", theta=1.0)
    with pytest.raises(grape.GrapeError, match=r"^grape: xpos.head_dim: must be an int$"):
        grape.encoding("xpos", head_dim=16.5)
    with pytest.raises(grape.GrapeError, match=r"^grape: t5_buckets.bidirectional: must be a bool$"):
        grape.encoding("t5_buckets", bidirectional=1)
    with pytest.raises(grape.GrapeError, match=r"^grape: grape_m.a: must be a list of floats$"):
        grape.encoding("grape_m", a="abc")
    with pytest.raises(grape.GrapeError, match="head_dim"):
        grape.encoding("xpos", head_dim=15)  # the type's own check: an even head_dim
    with pytest.raises(grape.GrapeError, match="a, b: must hold head_dim = 8 values each"):
        grape.encoding("grape_m", head_dim=8)
    x = np.zeros((2, 1, 64), dtype=np.float32)
    with pytest.raises(grape.GrapeError, match=r"^grape: encoding: alibi enters attention as "):
        grape.rotate_qk(x, x, grape.encoding("alibi"))
    with pytest.raises(grape.GrapeError, match="head_dim"):
        grape.rotate_qk(x, x, grape.encoding("xpos", head_dim=16))
    with pytest.raises(grape.GrapeError, match="^grape: cache: takes a RotaryEncoding"):
        grape.rotate_qk(x, x, grape.encoding("xpos"), cache=grape.RotaryCache(grape.rope(64), 4))


def test_score_bias_builtins_give_their_tile():
    """ALiBi (alone and as RoPE+ALiBi's bias part) and FoX against their formulas, off the diagonal."""
    from conftest import alibi_paper_slopes
    i = np.arange(5, 12)[:, None]
    j = np.arange(3, 16)[None, :]
    for enc, heads in ((grape.encoding("alibi", heads=6), 6), (grape.encoding("rope_alibi", heads=4), 4)):
        assert enc.has_bias_tile and not enc.has_embedding
        tile = enc.bias_tile(7, 13, q_start=5, k_start=3)
        assert tile.dtype == np.float32 and tile.shape == (heads, 7, 13)
        want = -np.asarray(alibi_paper_slopes(heads))[:, None, None] * np.abs(i - j)[None]
        np.testing.assert_allclose(tile, want, rtol=1e-6, atol=0)
    rng = np.random.default_rng(7)
    logits = rng.normal(0.0, 2.0, size=(2, 16))
    fox = grape.encoding("fox", heads=2, head_dim=8, gate_logits=logits.ravel().tolist())
    log_forget = -np.log1p(np.exp(-logits))  # log sigmoid
    tile = fox.bias_tile(7, 13, q_start=5, k_start=3)
    for h in range(2):
        for r in range(7):
            for c in range(13):
                m, n = 5 + r, 3 + c
                want = -np.inf if n > m else log_forget[h, n + 1:m + 1].sum()
                assert tile[h, r, c] == pytest.approx(want, rel=1e-6, abs=1e-6)


def test_embedding_builtins_add_their_embedding():
    dim, base = 16, 10000.0
    enc = grape.encoding("sinusoidal", dim=dim, base=base)
    assert enc.has_embedding and not enc.has_bias_tile and not enc.rotates_qk
    positions = np.array([0, 1, 77, 4096, 1_000_000], dtype=np.int64)
    x = np.ones((5, dim), dtype=np.float32)
    assert enc.add_embedding(x, positions) is x
    angle = positions[:, None].astype(np.float64) * base ** (-np.arange(0, dim, 2) / dim)[None, :]
    want = np.ones((5, dim))
    want[:, 0::2] += np.sin(angle)
    want[:, 1::2] += np.cos(angle)
    np.testing.assert_allclose(x, want, atol=2e-6, rtol=0)
    learned = grape.encoding("learned_absolute", dim=8)
    a = learned.add_embedding(np.zeros((3, 8), dtype=np.float32), np.array([4, 0, 9], dtype=np.int64))
    b = learned.add_embedding(np.zeros((3, 8), dtype=np.float32), np.array([9, 4, 0], dtype=np.int64))
    np.testing.assert_array_equal(a[[2, 0, 1]], b)  # a row depends on its position only
    assert np.abs(a).max() > 0


def test_builtins_refuse_the_call_of_another_injection():
    with pytest.raises(grape.GrapeError, match=r"^grape: encoding: rope enters attention as .*; bias_tile takes"):
        grape.encoding("rope").bias_tile(4, 4)
    with pytest.raises(grape.GrapeError, match=r"^grape: encoding: alibi enters attention as .*; add_embedding"):
        grape.encoding("alibi").add_embedding(np.zeros((2, 64), dtype=np.float32), np.zeros(2, dtype=np.int64))
    with pytest.raises(grape.GrapeError, match="positions: must hold 2 values"):
        grape.encoding("sinusoidal", dim=4).add_embedding(np.zeros((2, 4), dtype=np.float32),
                                                          np.zeros(3, dtype=np.int64))
    with pytest.raises(grape.GrapeError, match="x: must be float32"):
        grape.encoding("sinusoidal", dim=4).add_embedding(np.zeros((2, 4)), np.zeros(2, dtype=np.int64))


def test_grape_a_lift_carries_the_alibi_score_and_its_backward_is_the_adjoint():
    """q_lifted . k_lifted = q . k + slope_h (n - m) for every pair (GQA: a query head's key head), and
    lift_qk_backward is the transpose of the (affine) lift: L(q + e) - L(q) = <dL/dq, e>."""
    from conftest import alibi_paper_slopes
    enc = grape.encoding("grape_a", heads=4, head_dim=8)
    assert enc.lifts_qk and not enc.rotates_qk and not enc.has_bias_tile
    rng = np.random.default_rng(11)
    q = rng.normal(size=(6, 4, 8)).astype(np.float32)
    k = rng.normal(size=(6, 2, 8)).astype(np.float32)
    pos = np.array([0, 3, 17, 200, 999, 5], dtype=np.int64)
    q_l, k_l = grape.lift_qk(q, k, enc, positions=pos)
    assert q_l.shape == (6, 4, 10) and k_l.shape == (6, 4, 10) and q_l.dtype == np.float32
    slopes = np.asarray(alibi_paper_slopes(4))
    got = np.einsum("ihc,jhc->hij", q_l.astype(np.float64), k_l.astype(np.float64))
    kv = np.repeat(k.astype(np.float64), 2, axis=1)  # query head h reads key head h // 2
    want = np.einsum("ihc,jhc->hij", q.astype(np.float64), kv) + slopes[:, None, None] * (pos[None, :] - pos[:, None])[None]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-3)

    wq = rng.normal(size=q_l.shape).astype(np.float32)
    wk = rng.normal(size=k_l.shape).astype(np.float32)
    dq, dk = grape.lift_qk_backward(wq, wk, q, k, enc, positions=pos)
    assert dq.shape == q.shape and dk.shape == k.shape
    e_q = rng.normal(size=q.shape).astype(np.float32)
    e_k = rng.normal(size=k.shape).astype(np.float32)

    def loss(qq, kk):
        a, b = grape.lift_qk(qq, kk, enc, positions=pos)
        return (wq.astype(np.float64) * a).sum() + (wk.astype(np.float64) * b).sum()

    change = loss(q + e_q, k + e_k) - loss(q, k)
    predicted = (dq.astype(np.float64) * e_q).sum() + (dk.astype(np.float64) * e_k).sum()
    assert change == pytest.approx(predicted, rel=1e-4, abs=1e-2)


def test_lift_qk_refuses_an_encoding_that_does_not_lift():
    x = np.zeros((2, 1, 64), dtype=np.float32)
    with pytest.raises(grape.GrapeError, match=r"^grape: encoding: rope enters attention as .*; lift_qk takes lifts"):
        grape.lift_qk(x, x, grape.encoding("rope"))
    with pytest.raises(grape.GrapeError, match="last dimension must be the encoding's head_dim 8"):
        grape.lift_qk(x, x, grape.encoding("grape_a", heads=1, head_dim=8))
