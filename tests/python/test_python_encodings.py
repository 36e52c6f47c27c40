"""Score biases written in Python: grape.python_bias through grape.torch.attention's tiled loop (against a
dense float64 softmax written out here) and through grape.check's laws (a good bias passes, a wrong
gradient and a false relative claim fail with counterexamples)."""
import math
import os
import re
import sys

import pytest
import torch

import grape
import grape.torch as gt

from conftest import assert_close

HEADS = 4


def log_distance(head, q_pos, k_pos, lam):
    return -lam[head] * torch.log1p((q_pos - k_pos).abs().to(lam.dtype))


class _OffByMinusThree(torch.autograd.Function):
    """The identity whose backward is -3 times the right one: the values are right, the gradient is not."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return -3 * grad


def log_distance_broken_gradient(head, q_pos, k_pos, lam):
    return -_OffByMinusThree.apply(lam)[head] * torch.log1p((q_pos - k_pos).abs().to(lam.dtype))


def lam_values():
    return torch.tensor([0.5, 1.0, 0.25, 2.0], requires_grad=True)


def dense_reference(q, k, v, bias_grid, causal):
    """softmax(Q K^T / sqrt(d) + B + mask) V in float64 on the whole T x T grid; k and v repeated to q's
    heads (query head h reads key head h // (H / Hk))."""
    t, heads, dim = q.shape[1], q.shape[2], q.shape[3]
    group = heads // k.shape[2]
    kk, vv = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) / math.sqrt(dim) + bias_grid
    if causal:
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), vv)


def log_distance_grid(lam, t):
    m = torch.arange(t, dtype=torch.float64).view(t, 1)
    n = torch.arange(t, dtype=torch.float64).view(1, t)
    return -lam.view(-1, 1, 1) * torch.log(1.0 + (m - n).abs())


def test_a_log_distance_bias_with_learnable_lambda_passes_every_law():
    bias = grape.python_bias(log_distance, [lam_values()], name="log_distance", heads=HEADS)
    report = grape.check(bias, trials=100, seed=5)
    assert report.passed, str(report)
    names = [law.name for law in report.laws]
    assert names == ["finite", "relative", "attention_kernel", "bias_gradient", "attention_gradient"]
    assert all(law.holds and law.run and law.trials == 100 for law in report.laws)
    text = str(report)
    assert text.startswith("log_distance: passed")
    for name in names:
        assert re.search(r"^  %s +claimed +holds$" % name, text, re.M), text
    assert report.seed == 5 and report.trials == 100 and report.encoding == "log_distance"
    assert "lam float32[4]" in report.parameters
    assert "1 draw in 8 an edge case" in report.position_draws
    assert re.search(r"called the Python fn \d+ times .* \d+\.\d+ s of the check's \d+\.\d+ s", report.notes[0])


def test_a_wrong_gradient_fails_the_gradient_law_with_the_parameter_named():
    bias = grape.python_bias(log_distance_broken_gradient, [lam_values()], name="broken", heads=HEADS)
    report = grape.check(bias, trials=30, seed=2)
    assert not report.passed
    law = report.law("bias_gradient")
    assert law.claimed and not law.holds
    c = law.counterexample
    assert re.fullmatch(r"dL/dlam\[[0-3]\] \(params\[0\]\)", c.what), c.what
    assert c.lhs == pytest.approx(-3 * c.rhs, rel=1e-6)  # the backward's factor: the finite differences are right
    assert c.error > c.tolerance
    for value_law in ("finite", "relative", "attention_kernel", "attention_gradient"):
        assert report.law(value_law).holds, value_law
    assert "bias_gradient" in str(report) and "DOES NOT HOLD" in str(report)


def test_a_bias_of_the_query_position_alone_fails_its_relative_claim_at_small_positions():
    bias = grape.python_bias(lambda head, q_pos, k_pos: 0.1 * q_pos.to(torch.float64) + 0.0 * k_pos,
                             name="query_only")
    report = grape.check(bias, trials=30, seed=1)
    law = report.law("relative")
    assert law.claimed and not law.holds and not report.passed
    c = law.counterexample
    m, n, s = (int(x) for x in re.match(r"m=\((\d+)\) n=\((\d+)\) s=\((-?\d+)\)", c.positions).groups())
    assert (m, n, abs(s)) == (0, 0, 1), c.positions  # shrunk from positions up to 2^20
    assert c.lhs == pytest.approx(0.1 * (m + s)) and c.rhs == pytest.approx(0.1 * m)
    assert report.law("finite").holds and report.law("attention_kernel").holds


def test_a_nan_bias_fails_the_finite_law_with_a_shrunk_counterexample():
    # NaN three keys before the query, at every position: a draw finds it in a block, shrinking keeps m - n = 3
    bias = grape.python_bias(
        lambda head, q_pos, k_pos: torch.where(q_pos == k_pos + 3, float("nan"), 0.0) * (q_pos - k_pos), name="nan")
    report = grape.check(bias, trials=20)
    c = report.law("finite").counterexample
    assert c is not None and c.positions == "m=(3) n=(0) head=0"
    assert math.isnan(c.lhs)


def test_the_tiled_attention_matches_a_dense_float64_reference():
    for causal in (True, False):
        for dtype, tol in ((torch.float32, 2e-5), (torch.float64, 1e-12)):
            torch.manual_seed(0)
            batch, t, kv_heads, dim = 2, 300, 2, 16  # 300: three 128-token blocks, the last of 44
            lam = torch.tensor([0.5, 1.0, 0.25, 2.0], dtype=dtype, requires_grad=True)
            q = torch.randn(batch, t, HEADS, dim, dtype=dtype, requires_grad=True)
            k = torch.randn(batch, t, kv_heads, dim, dtype=dtype, requires_grad=True)
            v = torch.randn(batch, t, kv_heads, dim, dtype=dtype, requires_grad=True)
            out = gt.attention(q, k, v, encoding=grape.python_bias(log_distance, [lam]), causal=causal)
            assert out.dtype == dtype and out.shape == q.shape
            w = torch.randn(out.shape, dtype=torch.float64)
            got = torch.autograd.grad((out.double() * w).sum(), (q, k, v, lam))
            ref_in = [x.detach().double().requires_grad_() for x in (q, k, v, lam)]
            ref = dense_reference(*ref_in[:3], log_distance_grid(ref_in[3], t), causal)
            want = torch.autograd.grad((ref * w).sum(), ref_in)
            what = "causal=%s %s" % (causal, dtype)
            assert_close(out, ref, tol, what + " out")
            for name, g, r in zip(("dq", "dk", "dv", "dlam"), got, want):
                assert g.dtype == dtype and g.shape == r.shape
                assert_close(g, r, tol, "%s %s" % (what, name))


def test_fewer_queries_than_keys_are_the_last_rows_of_the_whole_causal_call():
    # Decode and chunked prefill: Tq queries at the last Tq of Tk positions (bottom-right aligned),
    # against the dense float64 reference's last rows and gradients (the loss on those rows only).
    torch.manual_seed(3)
    tq, tk, dim = 37, 300, 16
    lam = torch.tensor([0.5, 1.0, 0.25, 2.0], requires_grad=True)
    q_all = torch.randn(1, tk, HEADS, dim)
    q = q_all[:, tk - tq:].clone().requires_grad_()
    k, v = (torch.randn(1, tk, 2, dim, requires_grad=True) for _ in range(2))
    out = gt.attention(q, k, v, encoding=grape.python_bias(log_distance, [lam]), causal=True)
    w = torch.randn(1, tq, HEADS, dim, dtype=torch.float64)
    got = torch.autograd.grad((out.double() * w).sum(), (q, k, v, lam))
    ref_in = [x.detach().double().requires_grad_() for x in (q_all, k, v, lam)]
    ref = dense_reference(*ref_in[:3], log_distance_grid(ref_in[3], tk), True)[:, tk - tq:]
    want = torch.autograd.grad((ref * w).sum(), ref_in)
    assert_close(out, ref, 2e-5, "out")
    assert_close(got[0], want[0][:, tk - tq:], 2e-5, "dq")
    for name, g, r in zip(("dk", "dv", "dlam"), got[1:], want[1:]):
        assert_close(g, r, 2e-5, name)
    with pytest.raises(grape.GrapeError, match=r"^grape: k: causal=True takes at least as many keys as queries"):
        gt.attention(q_all, k[:, :5], v[:, :5], encoding=grape.python_bias(log_distance, [lam]), causal=True)


def test_a_per_token_gate_trains_through_the_tiles_in_both_layouts():
    # content dependent: the bias reads g[head, k_pos], a per-token tensor the model computes
    torch.manual_seed(1)
    t, dim = 70, 8
    z = torch.randn(HEADS, t, dtype=torch.float64, requires_grad=True)
    g = torch.nn.functional.softplus(z)

    def gated(head, q_pos, k_pos, g):
        return -g[head, k_pos] * (q_pos - k_pos).clamp(min=0).to(g.dtype)

    bias = grape.python_bias(gated, [g], name="gated", claims=(), causal_only=True, max_position=t - 1, tile=32)
    q, k, v = (torch.randn(1, t, HEADS, dim, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = gt.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), encoding=bias, layout="bhtd")
    got = torch.autograd.grad(out.transpose(1, 2).sum(), (q, k, v, z))
    m = torch.arange(t).view(t, 1)
    n = torch.arange(t).view(1, t)
    grid = -torch.nn.functional.softplus(z)[:, None, :] * (m - n).clamp(min=0).double()
    ref = dense_reference(q, k, v, grid, causal=True)
    want = torch.autograd.grad(ref.sum(), (q, k, v, z))
    for name, a, b in zip(("dq", "dk", "dv", "dz"), got, want):
        assert_close(a, b, 1e-12, name)
    assert grape.check(bias, trials=20).passed


def test_tokens_without_a_batch_dimension_and_a_half_precision_input():
    torch.manual_seed(2)
    bias = grape.python_bias(log_distance, [torch.tensor([0.5, 1.0, 0.25, 2.0])])
    q, k, v = (torch.randn(37, HEADS, 8) for _ in range(3))
    flat = gt.attention(q, k, v, encoding=bias)
    batched = gt.attention(q[None], k[None], v[None], encoding=bias)
    assert torch.equal(flat, batched[0])
    half = gt.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), encoding=bias)
    ref = dense_reference(*(x.bfloat16().double()[None] for x in (q, k, v)),
                          log_distance_grid(torch.tensor([0.5, 1.0, 0.25, 2.0], dtype=torch.float64), 37), True)
    assert half.dtype == torch.bfloat16
    assert_close(half[None], ref, 1e-2, "bfloat16 out")  # bf16's rounding of the output


def _attention_on(encoding, **kw):
    q, k, v = (torch.randn(1, 4, 2, 8) for _ in range(3))
    return gt.attention(q, k, v, encoding=encoding, **kw)


@pytest.mark.parametrize("make,message", [
    (lambda: grape.python_bias(3), r"^grape: fn: must be callable"),
    (lambda: grape.python_bias(log_distance, params=[0.5]), r"^grape: params: item 0 must be a torch tensor"),
    (lambda: grape.python_bias(log_distance, params=torch.ones(2)), r"^grape: params: must be a list or tuple"),
    (lambda: grape.python_bias(log_distance, claims=("shift",)), r"^grape: claims: unknown law 'shift'"),
    (lambda: grape.python_bias(log_distance, tile=0), r"^grape: tile: must be a positive int"),
    (lambda: grape.python_bias(log_distance, max_position=-1), r"^grape: max_position:"),
    (lambda: _attention_on(grape.python_bias(lambda h, m, n: torch.zeros(5, 5, 5))),
     r"^grape: fn: returned shape \[5, 5, 5\], which does not broadcast to \[H, Tq, Tk\] = \[2, 4, 4\]"),
    (lambda: _attention_on(grape.python_bias(lambda h, m, n: m - n)), r"^grape: fn: must return a floating-point"),
    (lambda: _attention_on(grape.python_bias(lambda h, m, n: 1.0)), r"^grape: fn: must return a torch tensor"),
    (lambda: _attention_on(grape.python_bias(lambda h, m, n: (m - n)[5] * 1.0)), r"^grape: fn: raised IndexError"),
    (lambda: _attention_on(grape.python_bias(lambda h, m, n: m * 1.0), window=2), r"^grape: window: not taken"),
    (lambda: _attention_on(grape.python_bias(lambda h, m, n: m * 1.0), positions=torch.arange(4)),
     r"^grape: positions: not taken"),
    (lambda: _attention_on(grape.python_bias(lambda h, m, n: m * 1.0, causal_only=True), causal=False),
     r"^grape: causal: python_bias 'python_bias' is causal_only"),
    (lambda: grape.check(grape.python_bias(log_distance, [lam_values()]), trials=0), r"^grape: trials:"),
])
def test_bad_arguments_are_one_line_errors_naming_the_argument(make, message):
    with pytest.raises(grape.GrapeError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_built_in_names_are_still_checked_by_the_cli():
    assert grape.check("alibi", trials=5).law("bias_gradient").holds


def test_the_python_bias_lm_example_trains_and_moves_lambda():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
    try:
        import python_bias_lm
    finally:
        sys.path.pop(0)
    result = python_bias_lm.main(["--steps", "12"])
    losses, before, after = result["losses"], result["lam_before"], result["lam_after"]
    assert len(losses) == 12 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.1, losses  # falling
    assert losses[0] == pytest.approx(math.log(32), abs=0.5)  # a fresh model: about uniform over the vocabulary
    for b, a in zip(before, after):
        assert (a - b).abs().max().item() > 1e-4  # every layer's lambda moved
    assert result["report"].passed
