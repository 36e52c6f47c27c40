"""grape's rotary kernel and bias tiles (ALiBi, FoX, GRAPE-A's gated bias) as differentiable PyTorch ops.

    from grape.torch import rotate_qk
    q_rot, k_rot = rotate_qk(q, k, encoding, positions=pos)                 # grads for q and k
    q_rot, k_rot = rotate_qk(q, k, encoding, positions=pos, inv_freq=theta)  # and for theta

`inv_freq` (a float64 or float32 tensor of rotary_dim / 2 values) replaces the encoding's table, so
learned frequencies (GRAPE-M's non-contextual variant) train through the kernel: the backward
gives dL/dq, dL/dk (the rotation by minus the angle) and dL/d inv_freq (accumulated in float64).
CPU tensors, float32/float16/bfloat16, as grape.rotate_qk takes them.
"""
import torch as _torch

import grape as _grape


class _RotateQK(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, inv_freq, encoding, positions, offsets):
        if inv_freq is not None:
            encoding = encoding.with_inv_freq(inv_freq.detach().to(_torch.float64).cpu().tolist())
        q_out, k_out = _grape.rotate_qk(q, k, encoding, positions=positions, offsets=offsets)
        ctx.encoding = encoding
        ctx.positions = positions
        ctx.offsets = offsets
        ctx.inv_freq_meta = None if inv_freq is None else (inv_freq.dtype, inv_freq.device)
        ctx.save_for_backward(q, k)
        return q_out, k_out

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        q, k = ctx.saved_tensors
        # The kernels address gradients like the inputs: same strides.
        grad_q = grad_q.contiguous() if q.is_contiguous() else grad_q.new_empty_strided(q.size(), q.stride()).copy_(grad_q)
        grad_k = grad_k.contiguous() if k.is_contiguous() else grad_k.new_empty_strided(k.size(), k.stride()).copy_(grad_k)
        dq, dk = _grape.rotate_qk_backward(grad_q, grad_k, ctx.encoding, positions=ctx.positions, offsets=ctx.offsets)
        d_inv_freq = None
        if ctx.inv_freq_meta is not None and ctx.needs_input_grad[2]:
            g = _grape.inv_freq_grad(q, k, grad_q, grad_k, ctx.encoding, positions=ctx.positions,
                                     offsets=ctx.offsets)
            dtype, device = ctx.inv_freq_meta
            d_inv_freq = _torch.tensor(g, dtype=dtype, device=device)
        return dq, dk, d_inv_freq, None, None, None


def rotate_qk(q, k, encoding, positions=None, offsets=None, inv_freq=None):
    """Differentiable grape.rotate_qk: returns (q_rot, k_rot); see the module's docstring."""
    if not q.is_contiguous() and q.stride(-1) != 1:
        q = q.contiguous()
    if not k.is_contiguous() and k.stride(-1) != 1:
        k = k.contiguous()
    return _RotateQK.apply(q, k, inv_freq, encoding, positions, offsets)


class _AlibiBias(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, slopes, q_len, k_len, q_start, k_start):
        ctx.meta = (q_start, k_start, slopes.dtype, slopes.device)
        return _torch.from_numpy(_grape.alibi_bias(slopes, q_len, k_len, q_start, k_start)).to(slopes.device)

    @staticmethod
    def backward(ctx, grad_tile):
        q_start, k_start, dtype, device = ctx.meta
        g = _grape.alibi_slope_grad(grad_tile, q_start, k_start)
        return _torch.tensor(g, dtype=dtype, device=device), None, None, None, None


def alibi_bias(slopes, q_len, k_len, q_start=0, k_start=0):
    """ALiBi's float32 tile [heads, q_len, k_len], differentiable in the slopes (learned ALiBi)."""
    return _AlibiBias.apply(slopes, q_len, k_len, q_start, k_start)


class _FoxBias(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, log_forget, causal_mask_value):
        lf = log_forget.detach().to(_torch.float32).cpu()
        flat = lf.reshape(-1, lf.shape[-2], lf.shape[-1])
        tiles = [_torch.from_numpy(_grape.fox_bias(f.numpy(), causal_mask_value=causal_mask_value)) for f in flat]
        ctx.meta = (log_forget.dtype, log_forget.device)
        return _torch.stack(tiles).reshape(*lf.shape, lf.shape[-1]).to(log_forget.device)

    @staticmethod
    def backward(ctx, grad_tile):
        # b[i, j] = sum_{l=j+1..i} lf[l], so dL/dlf[l] = sum_{i >= l} sum_{j < l} G[i, j].
        dtype, device = ctx.meta
        t = grad_tile.shape[-1]
        ones = _torch.ones(t, t, dtype=_torch.bool, device=grad_tile.device)
        g = grad_tile.to(_torch.float64).masked_fill(ones.triu(1), 0.0)  # keys after the query: no gradient
        below = _torch.nn.functional.pad(g.cumsum(-1)[..., :-1], (1, 0))  # [.., i, l] = sum_{j < l} G[i, j]
        d = below.masked_fill(~ones.tril(), 0.0).sum(-2)                   # over i >= l
        return d.to(dtype=dtype, device=device), None


def fox_bias(log_forget, causal_mask_value=float("-inf")):
    """FoX's tile b[.., h, i, j] = sum_{l=j+1..i} log_forget[.., h, l] from grape's kernel (float64
    prefix sums), differentiable in the log forget gates. log_forget [..., heads, seq] -> [..., heads, seq, seq]."""
    return _FoxBias.apply(log_forget, causal_mask_value)


def grape_a_bias(omega, key_gate, query_gate=None, causal_mask_value=float("-inf")):
    """GRAPE-A's content-gated linear bias (include/grape/encodings/grape_a_gated.hpp), as torch
    operations: b[.., h, i, j] = -(i - j) * omega[h] * (key_gate[.., h, j] (+ query_gate[.., h, i]))
    for j <= i, causal_mask_value above the diagonal. omega [heads]; gates [..., heads, seq]
    (softplus outputs). Differentiable in all three."""
    t = key_gate.shape[-1]
    idx = _torch.arange(t, device=key_gate.device)
    dist = (idx[:, None] - idx[None, :]).to(key_gate.dtype)           # i - j
    rate = key_gate[..., None, :]                                     # [.., h, 1, j]
    if query_gate is not None:
        rate = rate + query_gate[..., :, None]                        # [.., h, i, 1]
    bias = -dist * omega[:, None, None] * rate
    return bias.masked_fill(dist < 0, causal_mask_value)
