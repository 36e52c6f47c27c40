"""grape's rotary kernel and ALiBi tile as differentiable PyTorch ops.

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
