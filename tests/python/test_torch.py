"""grape.torch.rotate_qk's gradients against an independent float64 PyTorch RoPE and its autograd,
and the frequency gradient against float64 central finite differences."""
import numpy as np
import pytest
import torch

import grape
from conftest import default_inv_freq
from grape.torch import rotate_qk

torch.manual_seed(20261204)


def rope_torch(x, inv_freq, positions):
    """Half-split RoPE in float64 torch: what autograd differentiates independently of grape."""
    angle = positions.double()[:, None] * inv_freq.double()[None, :]  # [tokens, planes]
    cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
    half = inv_freq.numel()
    a, b = x[..., :half].double(), x[..., half:2 * half].double()
    return torch.cat([a * cos - b * sin, a * sin + b * cos, x[..., 2 * half:].double()], dim=-1)


def loss_of(q_rot, k_rot, wq, wk):
    return (q_rot.double() * wq).sum() + (k_rot.double() * wk).sum()


def test_q_and_k_gradients_match_float64_autograd():
    enc = grape.rope(head_dim=32, rotary_dim=24)
    positions = torch.tensor([0, 3, 9, 70000, 5], dtype=torch.int64)
    q = torch.randn(5, 4, 32, requires_grad=True)
    k = torch.randn(5, 2, 32, requires_grad=True)
    wq, wk = torch.randn(5, 4, 32, dtype=torch.float64), torch.randn(5, 2, 32, dtype=torch.float64)
    loss_of(*rotate_qk(q, k, enc, positions=positions), wq, wk).backward()

    q64 = q.detach().double().requires_grad_()
    k64 = k.detach().double().requires_grad_()
    theta = torch.tensor(default_inv_freq(24))
    loss_of(rope_torch(q64, theta, positions), rope_torch(k64, theta, positions), wq, wk).backward()
    torch.testing.assert_close(q.grad.double(), q64.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(k.grad.double(), k64.grad, atol=1e-5, rtol=0)


def test_learned_frequencies_get_their_gradient():
    d = 16
    theta = torch.tensor(default_inv_freq(d), dtype=torch.float64, requires_grad=True)
    enc = grape.rope(head_dim=d)
    positions = torch.arange(12, dtype=torch.int64) * 3
    q, k = torch.randn(12, 3, d), torch.randn(12, 1, d)
    wq, wk = torch.randn(12, 3, d, dtype=torch.float64), torch.randn(12, 1, d, dtype=torch.float64)
    loss_of(*rotate_qk(q, k, enc, positions=positions, inv_freq=theta), wq, wk).backward()
    assert theta.grad.dtype == torch.float64 and theta.grad.shape == (d // 2,)

    def reference_loss(t):
        return loss_of(rope_torch(q, t, positions), rope_torch(k, t, positions), wq, wk).item()

    fd = []
    for i in range(d // 2):
        h = 1e-6 * float(theta[i].detach())
        plus, minus = theta.detach().clone(), theta.detach().clone()
        plus[i] += h
        minus[i] -= h
        fd.append((reference_loss(plus) - reference_loss(minus)) / (2 * h))
    fd = torch.tensor(fd, dtype=torch.float64)
    scale = fd.abs().max()
    torch.testing.assert_close(theta.grad, fd, atol=1e-4 * float(scale), rtol=0)


def test_half_precision_tensors_flow_through_autograd():
    enc = grape.rope(head_dim=16)
    q = torch.randn(2, 3, 2, 16, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 3, 1, 16, dtype=torch.bfloat16, requires_grad=True)
    q_rot, k_rot = rotate_qk(q, k, enc, offsets=torch.tensor([0, 40], dtype=torch.int64))
    (q_rot.float().square().sum() + k_rot.float().square().sum()).backward()
    # a rotation preserves norms: d/dx |R x|^2 = 2 x (up to bf16 rounding of R x)
    torch.testing.assert_close(q.grad.float(), 2 * q.detach().float(), atol=0.05, rtol=0.02)
    assert q.grad.dtype == torch.bfloat16 and k.grad.shape == k.shape


def test_wrong_input_raises_value_error_not_a_crash():
    enc = grape.rope(head_dim=16)
    with pytest.raises(ValueError, match="dtype must be float32"):
        rotate_qk(torch.randn(2, 1, 16, dtype=torch.float64), torch.randn(2, 1, 16, dtype=torch.float64), enc)


def test_fox_bias_gradient_matches_float64_autograd_of_the_prefix_sums():
    from grape.torch import fox_bias
    g = torch.Generator().manual_seed(5)
    lf = torch.nn.functional.logsigmoid(torch.randn(2, 3, 9, generator=g, dtype=torch.float64))
    lf32 = lf.float().requires_grad_(True)
    weights = torch.randn(2, 3, 9, 9, generator=g, dtype=torch.float64)
    tile = fox_bias(lf32)
    mask = torch.ones(9, 9, dtype=torch.bool).triu(1)
    assert torch.isinf(tile[..., mask]).all() and (tile[..., mask] < 0).all()
    (tile.masked_fill(mask, 0).double() * weights).sum().backward()
    # independent: b[i, j] = c[i] - c[j], c = cumsum(lf), float64 autograd
    lf64 = lf32.detach().double().requires_grad_(True)
    c = lf64.cumsum(-1)
    ref = (c[..., :, None] - c[..., None, :]).masked_fill(mask, 0)
    (ref * weights).sum().backward()
    np.testing.assert_allclose(tile.masked_fill(mask, 0).double().detach(), ref.detach(), atol=1e-6)
    np.testing.assert_allclose(lf32.grad.double(), lf64.grad, rtol=1e-6, atol=1e-6)


def test_grape_a_bias_is_the_papers_formula_and_differentiable():
    from grape.torch import grape_a_bias
    g = torch.Generator().manual_seed(6)
    heads, t = 3, 7
    omega = torch.rand(heads, generator=g, dtype=torch.float64)
    kg = torch.nn.functional.softplus(torch.randn(2, heads, t, generator=g, dtype=torch.float64))
    qg = torch.nn.functional.softplus(torch.randn(2, heads, t, generator=g, dtype=torch.float64))
    # float32 values throughout, so the float64 formula below sees what the kernel sees
    omega, kg, qg = (x.float().double() for x in (omega, kg, qg))
    weights = torch.randn(2, heads, t, t, generator=g, dtype=torch.float64)
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    for with_query in (False, True):
        b = grape_a_bias(omega, kg, qg if with_query else None).numpy()
        for n in range(2):
            for h in range(heads):
                for i in range(t):
                    for j in range(t):
                        if j > i:
                            assert b[n, h, i, j] == float("-inf")
                        else:
                            rate = kg[n, h, j].item() + (qg[n, h, i].item() if with_query else 0.0)
                            assert b[n, h, i, j] == pytest.approx(-(i - j) * omega[h].item() * rate, rel=1e-6)
        # gradients against float64 autograd of the formula written with torch operations
        leaves = [x.clone().requires_grad_(True) for x in (omega, kg, qg)]
        tile = grape_a_bias(leaves[0], leaves[1], leaves[2] if with_query else None, causal_mask_value=0.0)
        (tile * weights).sum().backward()
        ref_leaves = [x.clone().requires_grad_(True) for x in (omega, kg, qg)]
        dist = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).double()
        rate = ref_leaves[1][..., None, :] + (ref_leaves[2][..., :, None] if with_query else 0.0)
        ref = (-dist * ref_leaves[0][:, None, None] * rate).masked_fill(mask, 0.0)
        (ref * weights).sum().backward()
        for got, want in zip(leaves[:3 if with_query else 2], ref_leaves[:3 if with_query else 2]):
            np.testing.assert_allclose(got.grad, want.grad, rtol=1e-12, atol=1e-12)
    with pytest.raises(grape.GrapeError, match="key_gate: must have omega's 3 heads"):
        grape_a_bias(omega, kg[:, :2])
    with pytest.raises(grape.GrapeError, match=r"key_gate\[4\]: must be finite"):
        bad = kg.clone()
        bad[0, 0, 4] = float("nan")
        grape_a_bias(omega, bad)


@pytest.mark.skipif(not grape.torch.HAVE_CUSTOM_OPS,
                    reason="torch.library.custom_op needs torch >= 2.4 (Debian's torch is 1.13); "
                           "scripts/test_pypi_torch.sh runs this")
def test_rotate_qk_is_a_custom_op_that_torch_compile_keeps_in_one_graph():
    enc = grape.rope(head_dim=32, base=500000.0)
    g = torch.Generator().manual_seed(9)
    q = torch.randn(2, 6, 4, 32, generator=g, requires_grad=True)
    k = torch.randn(2, 6, 2, 32, generator=g, requires_grad=True)
    theta = torch.tensor(enc.inv_freq, requires_grad=True)
    offsets = torch.tensor([0, 1000])

    def loss(q, k, theta, table):
        q_rot, k_rot = rotate_qk(q, k, table, offsets=offsets, inv_freq=theta)
        return (q_rot[:, :, :2] * k_rot).square().sum() + q_rot.sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")  # fullgraph: a break would raise
    other = grape.rope(head_dim=32, base=700.0)
    for e, th in ((enc, theta), (other, None), (enc, theta)):  # another table: recompiled, not reused
        table = grape.torch.RotaryTable.of(e)
        eager = loss(q, k, th, e)
        got = compiled(q, k, th, table)
        assert torch.allclose(got, eager)
        wrt = (q, k) if th is None else (q, k, th)
        for a, b in zip(torch.autograd.grad(got, wrt), torch.autograd.grad(eager, wrt)):
            assert torch.allclose(a, b)
    positions = torch.arange(12)
    torch.library.opcheck(torch.ops.grape.rotate_qk.default,
                          (q.detach().reshape(12, 4, 32), k.detach().reshape(12, 2, 32), theta.detach(), positions,
                           32, 32, "half_split", 1.0))


def test_a_rotary_table_rotates_like_its_encoding():
    enc = grape.from_config({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
                             "rope_theta": 500000.0, "max_position_embeddings": 8192,
                             "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}})
    table = grape.torch.RotaryTable.of(enc)
    assert (table.head_dim, table.layout, len(table.inv_freq)) == (64, "half_split", 32)
    assert table.attention_factor == enc.attention_factor != 1.0
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(7, 4, 64, generator=g), torch.randn(7, 2, 64, generator=g)
    pos = torch.tensor([0, 1, 5, 100, 4000, 70000, 2**31 - 1])
    a, b = rotate_qk(q, k, enc, positions=pos), rotate_qk(q, k, table, positions=pos)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("threads", [1, 2])
def test_kernels_run_on_torchs_thread_count(monkeypatch, threads):
    """grape.torch's kernel calls take torch.get_num_threads(): a PyPI torch keeps its thread count in
    an OpenMP runtime of its own, which grape's kernels would not see."""
    seen = []

    def spy(name):
        kernel = getattr(grape, name)

        def call(*args, **kwargs):
            seen.append((name, kwargs.get("threads")))
            return kernel(*args, **kwargs)

        monkeypatch.setattr(grape, name, call)

    for name in ("attention", "attention_backward", "alibi_bias", "alibi_slope_grad"):
        spy(name)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        q, k, v = (torch.randn(16, 2, 8, requires_grad=True) for _ in range(3))
        slopes = torch.tensor([0.5, 0.25], requires_grad=True)
        grape.torch.attention(q, k, v, slopes=slopes).sum().backward()
        grape.torch.alibi_bias(slopes, 4, 4).sum().backward()
    finally:
        torch.set_num_threads(before)
    assert sorted({name for name, _ in seen}) == ["alibi_bias", "alibi_slope_grad", "attention", "attention_backward"]
    assert all(t == threads for _, t in seen), seen
