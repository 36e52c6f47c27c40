"""Rotations written in Python: grape.python_rotation applied in torch (against grape's RoPE kernel and
an independent float64 RoPE), through grape.torch.attention (against a dense float64 softmax written
out here, gradients included) and through grape.check's laws (RoPE and an axial 2-D rotation pass; a
quadratic angle and non-commuting generators fail with shrunk counterexamples)."""
import math
import re

import numpy as np
import pytest
import torch

import grape
import grape.torch as gt

from conftest import assert_close, default_inv_freq, rope_reference

D = 16


def rope_angle(plane, pos):
    return pos * 10000.0 ** (-2.0 * plane.double() / D)  # plane.double(): -2.0 * plane would be float32


def learned_angle(plane, pos, inv_freq):
    return pos * inv_freq[plane]


def rope64(x, inv_freq, positions):
    """x [batch, seq, heads, d] turned by positions[t] * inv_freq[i] in planes (i, i + d/2), torch
    float64 with autograd (the formula written out, not grape's code)."""
    angle = positions.double().view(-1, 1) * inv_freq.double().view(1, -1)
    cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


def dense_attention64(q, k, v, causal):
    """softmax(Q Kᵀ/√d + mask) V in float64, k and v repeated to q's heads."""
    t, heads, dim = q.shape[1], q.shape[2], q.shape[3]
    group = heads // k.shape[2]
    kk, vv = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) / math.sqrt(dim)
    if causal:
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), vv)


def axial_generators(d, scale=1.0):
    """Two commuting generators: axis 0 turns planes (i, i + d/4) of the first half of the channels,
    axis 1 the same planes of the second half, at RoPE's frequencies for d/4 planes each."""
    g = torch.zeros(2, d, d, dtype=torch.float64)
    quarter = d // 4
    freqs = torch.tensor(default_inv_freq(d // 2), dtype=torch.float64) * scale
    for axis in range(2):
        base = axis * (d // 2)
        for i in range(quarter):
            g[axis, base + quarter + i, base + i] = freqs[i]
            g[axis, base + i, base + quarter + i] = -freqs[i]
    return g


def axial64(x, positions, d):
    """x turned as axial_generators(d) says, with cos and sin (the formula, not matrix_exp)."""
    out = x.clone()
    quarter = d // 4
    freqs = torch.tensor(default_inv_freq(d // 2), dtype=torch.float64)
    for axis in range(2):
        base = axis * (d // 2)
        angle = positions[:, axis].double().view(-1, 1) * freqs.view(1, -1)
        cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
        a, b = x[..., base:base + quarter], x[..., base + quarter:base + 2 * quarter]
        out[..., base:base + quarter] = a * cos - b * sin
        out[..., base + quarter:base + 2 * quarter] = a * sin + b * cos
    return out


def shrunk(positions):
    """'m=(1) n=(0)' or 'm=(0, 1) n=(1, 0)' -> {'m': (1,), 'n': (0,)}."""
    return {name: tuple(int(x) for x in values.split(", "))
            for name, values in re.findall(r"(\w)=\(([-0-9, ]+)\)", positions)}


def test_an_angle_function_rope_passes_every_law_and_matches_grape_rope():
    rot = grape.python_rotation(rope_angle, head_dim=D, name="rope_py")
    report = grape.check(rot, trials=100, seed=3)
    assert report.passed, str(report)
    assert [law.name for law in report.laws] == ["finite", "norm_preservation", "homomorphism", "relative", "attention_kernel"]
    assert all(law.holds and law.trials == 100 for law in report.laws)
    assert str(report).startswith("rope_py: passed")
    assert "1 draw in 8 an edge case" in report.position_draws and "0..1048576" in report.positions
    assert re.search(r"called the Python angle function \d+ times", report.notes[0])

    torch.manual_seed(0)
    q, k = torch.randn(2, 300, 4, D), torch.randn(2, 300, 2, D)
    want_q, want_k = gt.rotate_qk(q, k, grape.rope(head_dim=D))
    got_q, got_k = rot.rotate_qk(q, k)
    assert got_q.dtype == torch.float32
    assert_close(got_q, want_q, 4e-6, "q against grape.rope")  # both float32 roundings of the same rotation
    assert_close(got_k, want_k, 4e-6, "k against grape.rope")
    positions = torch.arange(300) + 1000_000  # far positions, as the laws draw: the angles stay float64
    ref = rope_reference(q.numpy(), default_inv_freq(D), positions.numpy())
    assert_close(rot.apply(q, positions), torch.from_numpy(ref), 4e-6, "q at positions 10^6 against float64")
    table = grape.python_rotation(inv_freq=grape.rope(head_dim=D))  # the frequency-table wrapper: the same RoPE
    assert torch.equal(table.apply(q, positions), rot.apply(q, positions))
    assert grape.check(table, trials=20).passed


def test_the_interleaved_layout_turns_adjacent_channels():
    rot = grape.python_rotation(rope_angle, head_dim=D, layout="interleaved")
    x = torch.randn(37, 3, D, dtype=torch.float64)
    ref = rope_reference(x.numpy(), default_inv_freq(D), np.arange(37), layout="interleaved")
    assert_close(rot.apply(x), torch.from_numpy(ref), 1e-13, "interleaved")
    table = grape.python_rotation(inv_freq=grape.rope(head_dim=D, layout="interleaved"))
    assert_close(table.apply(x), torch.from_numpy(ref), 1e-13, "interleaved table")


def test_learnable_frequencies_get_float64_autograd_gradients_through_the_attention():
    for causal in (True, False):
        for dtype, tol in ((torch.float32, 2e-5), (torch.bfloat16, 2e-2)):  # the fused attention's dtypes
            torch.manual_seed(1)
            t = 70
            inv_freq = torch.tensor(default_inv_freq(D), dtype=dtype).requires_grad_()
            rot = grape.python_rotation(learned_angle, head_dim=D, params=[inv_freq], name="learned")
            q = torch.randn(2, t, 4, D, dtype=dtype, requires_grad=True)
            k, v = (torch.randn(2, t, 2, D, dtype=dtype, requires_grad=True) for _ in range(2))
            out = gt.attention(q, k, v, encoding=rot, causal=causal)
            assert out.dtype == dtype and out.shape == q.shape
            w = torch.randn(out.shape, dtype=torch.float64)
            got = torch.autograd.grad((out.double() * w).sum(), (q, k, v, inv_freq))
            ref_in = [x.detach().double().requires_grad_() for x in (q, k, v, inv_freq)]
            pos = torch.arange(t)  # the reference starts from the inputs as rounded to dtype
            ref = dense_attention64(rope64(ref_in[0], ref_in[3], pos), rope64(ref_in[1], ref_in[3], pos), ref_in[2],
                                    causal)
            want = torch.autograd.grad((ref * w).sum(), ref_in)
            what = "causal=%s %s" % (causal, dtype)
            assert_close(out, ref, tol, what + " out")
            for name, g, r in zip(("dq", "dk", "dv", "dinv_freq"), got, want):
                assert g.dtype == dtype and g.shape == r.shape
                assert_close(g, r, tol, "%s %s" % (what, name))
    # apply alone: the gradient of a rotated tensor in the frequencies
    x = torch.randn(1, 50, 2, D, dtype=torch.float64)
    inv_freq = torch.tensor(default_inv_freq(D), requires_grad=True)
    rot = grape.python_rotation(learned_angle, head_dim=D, params=[inv_freq])
    got = torch.autograd.grad(rot.apply(x).pow(3).sum(), inv_freq)[0]
    leaf = inv_freq.detach().requires_grad_()
    want = torch.autograd.grad(rope64(x, leaf, torch.arange(50)).pow(3).sum(), leaf)[0]
    assert_close(got, want, 1e-12, "apply dinv_freq")
    assert grape.check(rot, trials=30).passed


def test_an_axial_rotation_of_two_commuting_generators_passes_and_runs_in_attention():
    gens = axial_generators(D)
    rot = grape.python_rotation(generators=list(gens), name="axial_2d", max_position=4096)
    report = grape.check(rot, trials=60, seed=2)
    assert report.passed, str(report)
    assert [law.name for law in report.laws] == ["skew", "generators_commute", "finite", "norm_preservation", "homomorphism",
                                                 "relative", "attention_kernel"]
    assert report.law("generators_commute").trials == 1 and report.law("skew").trials == 2
    torch.manual_seed(4)
    t = 40
    positions = torch.stack([torch.arange(t) // 8, torch.arange(t) % 8], -1)  # a 5 x 8 grid of patches
    q64 = torch.randn(1, t, 4, D, dtype=torch.float64, requires_grad=True)
    k64, v64 = (torch.randn(1, t, 2, D, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert_close(rot.apply(q64, positions), axial64(q64, positions, D), 1e-13, "axial apply")
    q, k, v = (x.detach().float().requires_grad_() for x in (q64, k64, v64))
    out = gt.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), encoding=rot, positions=positions,
                       causal=False, layout="bhtd").transpose(1, 2)
    ref = dense_attention64(axial64(q64, positions, D), axial64(k64, positions, D), v64, causal=False)
    assert_close(out, ref, 2e-5, "axial out")
    for name, a, b in zip(("dq", "dk", "dv"), torch.autograd.grad(out.sum(), (q, k, v)),
                          torch.autograd.grad(ref.sum(), (q64, k64, v64))):
        assert_close(a, b, 2e-5, "axial " + name)


def test_non_commuting_generators_fail_generators_commute_and_relative():
    gens = torch.zeros(2, 4, 4, dtype=torch.float64)
    gens[0, 1, 0], gens[0, 0, 1] = 1.0, -1.0  # turns channels 0 and 1
    gens[1, 2, 1], gens[1, 1, 2] = 1.0, -1.0  # turns channels 1 and 2: they share channel 1
    report = grape.check(grape.python_rotation(generators=gens, name="tangled", max_position=1000), trials=40)
    assert not report.passed
    c = report.law("generators_commute").counterexample
    assert c is not None and c.positions == "a=0 b=1"
    ab, ba = gens[0] @ gens[1], gens[1] @ gens[0]
    i, j = (int(x) for x in re.match(r"\(L_0 L_1\)\[(\d+), (\d+)\]", c.what).groups())
    assert (c.lhs, c.rhs) == (float(ab[i, j]), float(ba[i, j])) and c.lhs != c.rhs
    law = report.law("relative")
    assert law.claimed and not law.holds
    p = shrunk(law.counterexample.positions)
    assert max(max(p["m"]), max(p["n"])) <= 1, law.counterexample.positions  # shrunk from positions up to 1000
    m, n = (torch.tensor(p[x], dtype=torch.float64) for x in "mn")
    lhs = torch.matrix_exp(torch.einsum("a,aij->ij", m, gens)).T @ torch.matrix_exp(torch.einsum("a,aij->ij", n, gens))
    rhs = torch.matrix_exp(torch.einsum("a,aij->ij", n - m, gens))
    assert (lhs - rhs).abs().max().item() > 1e-3  # the counterexample is one in float64 written out here
    for holds in ("skew", "finite", "norm_preservation"):
        assert report.law(holds).holds, holds


def test_a_quadratic_angle_fails_relative_and_homomorphism_at_shrunk_positions():
    theta = 0.1
    rot = grape.python_rotation(lambda plane, pos: theta * pos ** 2 + 0.0 * plane, head_dim=4, name="quadratic")
    report = grape.check(rot, trials=30, seed=1)
    assert not report.passed
    rel, comp = report.law("relative"), report.law("homomorphism")
    assert rel.claimed and not rel.holds and comp.claimed and not comp.holds
    # ρ(m)ᵀρ(n) turns by θ(n² − m²), ρ(n − m) by θ(n − m)²: they differ as soon as m ≠ 0 and m ≠ n
    assert shrunk(rel.counterexample.positions) == {"m": (1,), "n": (0,)}, rel.counterexample.positions
    assert rel.counterexample.what == "entry [0, 2]"  # -sin of the plane's angle
    assert rel.counterexample.lhs == pytest.approx(math.sin(theta)) and rel.counterexample.rhs == pytest.approx(
        -math.sin(theta))
    assert shrunk(comp.counterexample.positions) == {"m": (1,), "n": (1,)}, comp.counterexample.positions
    assert comp.counterexample.lhs == pytest.approx(math.cos(2 * theta))  # θ(1 + 1) against θ(1 + 1)²
    assert comp.counterexample.rhs == pytest.approx(math.cos(4 * theta))
    for holds in ("finite", "norm_preservation", "attention_kernel"):
        assert report.law(holds).holds, holds


def test_a_generator_that_is_not_skew_fails_skew():
    gens = axial_generators(8)
    gens[1, 5, 5] = 0.5
    c = grape.check(grape.python_rotation(generators=gens, max_position=100), trials=10).law("skew").counterexample
    assert c is not None and c.positions == "a=1" and c.what == "L_1[5, 5] vs -L_1[5, 5]"


def test_tokens_without_a_batch_dimension_and_a_half_precision_input():
    torch.manual_seed(5)
    rot = grape.python_rotation(rope_angle, head_dim=D)
    q, k, v = (torch.randn(37, 4, D) for _ in range(3))
    flat = gt.attention(q, k, v, encoding=rot)
    batched = gt.attention(q[None], k[None], v[None], encoding=rot)
    assert torch.equal(flat, batched[0])
    half = rot.apply(q.bfloat16())
    assert half.dtype == torch.bfloat16
    ref = rope_reference(q.bfloat16().double().numpy(), default_inv_freq(D), np.arange(37))
    assert_close(half, torch.from_numpy(ref), 1e-2, "bfloat16 apply")  # bf16's rounding of the output


def _rope_rotation():
    return grape.python_rotation(rope_angle, head_dim=D)


def _attention_on(rotation, **kw):
    q, k, v = (torch.randn(1, 4, 2, D) for _ in range(3))
    return gt.attention(q, k, v, encoding=rotation, **kw)


@pytest.mark.parametrize("make,message", [
    (lambda: grape.python_rotation(), r"^grape: python_rotation: give exactly one of angle, generators, inv_freq"),
    (lambda: grape.python_rotation(rope_angle, inv_freq=torch.ones(8)), r"^grape: python_rotation: give exactly one"),
    (lambda: grape.python_rotation(3, head_dim=D), r"^grape: angle: must be callable"),
    (lambda: grape.python_rotation(rope_angle), r"^grape: head_dim: needed with an angle function"),
    (lambda: grape.python_rotation(rope_angle, head_dim=7), r"^grape: head_dim: must be even"),
    (lambda: grape.python_rotation(rope_angle, head_dim=D, layout="split"), r"^grape: layout: must be one of"),
    (lambda: grape.python_rotation(rope_angle, head_dim=D, params=[0.5]), r"^grape: params: item 0 must be a torch"),
    (lambda: grape.python_rotation(rope_angle, head_dim=D, max_position=0), r"^grape: max_position:"),
    (lambda: grape.python_rotation(generators=torch.zeros(2, 3, 3)), r"^grape: generators: must be \[d, d\]"),
    (lambda: grape.python_rotation(generators=[torch.zeros(4, 4), torch.zeros(6, 6)]),
     r"^grape: generators: must all have one shape"),
    (lambda: grape.python_rotation(generators=torch.zeros(4, 4, dtype=torch.int64)),
     r"^grape: generators: must be a floating-point CPU tensor"),
    (lambda: grape.python_rotation(generators=torch.zeros(4, 4), params=[torch.ones(1)]),
     r"^grape: params: not taken with generators"),
    (lambda: grape.python_rotation(inv_freq=torch.ones(4), head_dim=D), r"^grape: inv_freq: has 4 entries"),
    (lambda: grape.python_rotation(inv_freq=grape.rope(head_dim=D, rotary_dim=8)),
     r"^grape: inv_freq: a RotaryEncoding must rotate every channel"),
    (lambda: _rope_rotation().apply(torch.randn(4, 2, 8)), r"^grape: x: must be \[batch, seq, heads, 16\]"),
    (lambda: _rope_rotation().rotate_qk(torch.randn(4, 2, D), torch.randn(4, 2, 6)), r"^grape: k: must be \[batch"),
    (lambda: _rope_rotation().apply(torch.randn(4, 2, D), torch.arange(4.0)),
     r"^grape: positions: must be an integer torch tensor"),
    (lambda: _rope_rotation().apply(torch.randn(4, 2, D), torch.arange(5)), r"^grape: positions: must be \[4, 1\]"),
    (lambda: grape.python_rotation(lambda p, x: p * x.long(), head_dim=D).apply(torch.randn(4, 2, D)),
     r"^grape: angle: must return a floating-point tensor"),
    (lambda: grape.python_rotation(lambda p, x: torch.zeros(3, 3, dtype=torch.float64), head_dim=D).apply(
        torch.randn(4, 2, D)), r"^grape: angle: returned shape \[3, 3\], which does not broadcast to \[N, "
                               r"head_dim/2\] = \[4, 8\]"),
    (lambda: grape.python_rotation(lambda p, x: x[99] * p, head_dim=D).apply(torch.randn(4, 2, D)),
     r"^grape: angle: raised IndexError"),
    (lambda: _attention_on(_rope_rotation(), offsets=torch.zeros(1, dtype=torch.int64)),
     r"^grape: offsets: not taken with a python_rotation encoding"),
    (lambda: gt.attention(torch.randn(1, 4, 2, 8), torch.randn(1, 4, 2, 8), torch.randn(1, 4, 2, 8),
                          encoding=_rope_rotation()), r"^grape: q: must be a floating-point tensor \[batch, seq"),
    (lambda: grape.check(_rope_rotation(), trials=0), r"^grape: trials:"),
])
def test_bad_arguments_are_one_line_errors_naming_the_argument(make, message):
    with pytest.raises(grape.GrapeError, match=message) as info:
        make()
    assert "\n" not in str(info.value)
