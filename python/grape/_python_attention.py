"""The fused, tiled attention for score biases written in Python: query blocks x key blocks, the bias
evaluated per tile, online softmax, and a backward that recomputes each tile from the saved
log-sum-exp and gets the bias parameters' gradients by autograd of fn per tile.

It is PyTorch, not grape's C++ kernel: the kernel cannot call back into Python per tile without a
rebuild, so this loop does in torch what the kernel does in C++ (docs/python.md, "Encodings written
in Python"). No T x T tensor exists in either direction: the largest is one tile per batch and head.
"""
import torch as _torch

from ._grape import GrapeError
from ._python_encodings import PythonBias


def compute_dtype(dtype):
    """Softmax and sums in float32, or float64 for float64 inputs."""
    return _torch.float64 if dtype == _torch.float64 else _torch.float32


def _blocks(length, size):
    return [(start, min(start + size, length)) for start in range(0, length, size)]


def _index_grid(heads, qs, qe, ks, ke, first):
    """fn's arguments for the tile of queries qs..qe and keys ks..ke; query i sits at position
    first + i (first = Tk - Tq: the queries are the last of the keys' tokens), key j at j."""
    return (_torch.arange(heads, dtype=_torch.int64).view(heads, 1, 1),
            _torch.arange(first + qs, first + qe, dtype=_torch.int64).view(1, qe - qs, 1),
            _torch.arange(ks, ke, dtype=_torch.int64).view(1, 1, ke - ks))


def _future_keys(qs, qe, ks, ke, first):
    """The causal mask of one tile (True: the key comes after the query), or None when no key does."""
    if ke - 1 <= first + qs:
        return None
    return _torch.arange(ks, ke).view(1, -1) > _torch.arange(first + qs, first + qe).view(-1, 1)


class _TiledBiasAttention(_torch.autograd.Function):
    """q [B, T, H, D], k and v [B, Tk, Hk, D] (Hk dividing H); fn's params follow as tensors, so that
    autograd hands their gradients on (a per-token gate computed by the model included)."""

    @staticmethod
    def forward(ctx, bias, causal, scale, q_block, k_block, q, k, v, *params):
        batch, tq, heads, dim = q.shape
        tk, kv_heads = k.shape[1], k.shape[2]
        group = heads // kv_heads
        first = tk - tq if causal else 0  # causal: bottom-right aligned, as decode's queries are
        work = compute_dtype(q.dtype)
        # [B, Hk, G, T, D]: query head h = kv_head * G + g reads key head h // G
        q5 = q.permute(0, 2, 1, 3).to(work).reshape(batch, kv_heads, group, tq, dim)
        k5 = k.permute(0, 2, 1, 3).to(work).unsqueeze(2)
        v5 = v.permute(0, 2, 1, 3).to(work).unsqueeze(2)
        out = _torch.empty_like(q5)
        lse = _torch.empty(batch, kv_heads, group, tq, dtype=work)
        values = [p.detach() for p in params]
        with _torch.no_grad():
            for qs, qe in _blocks(tq, q_block):
                qi = q5[..., qs:qe, :]
                row_max = _torch.full((batch, kv_heads, group, qe - qs), float("-inf"), dtype=work)
                row_sum = _torch.zeros_like(row_max)
                acc = _torch.zeros_like(qi)
                for ks, ke in _blocks(tk, k_block):
                    if causal and ks > first + qe - 1:
                        break  # this key block and the later ones lie after every query of the block
                    b = bias.tile_values(*_index_grid(heads, qs, qe, ks, ke, first), params=values)
                    s = (qi @ k5[..., ks:ke, :].transpose(-1, -2)) * scale + b.to(work).reshape(
                        kv_heads, group, qe - qs, ke - ks)
                    mask = _future_keys(qs, qe, ks, ke, first) if causal else None
                    if mask is not None:
                        s = s.masked_fill(mask, float("-inf"))
                    new_max = _torch.maximum(row_max, s.amax(-1))
                    shift = new_max.masked_fill(new_max == float("-inf"), 0.0)  # a row with no key yet stays 0
                    p = _torch.exp(s - shift.unsqueeze(-1))
                    keep = _torch.exp(row_max - shift)
                    row_sum = row_sum * keep + p.sum(-1)
                    acc = acc * keep.unsqueeze(-1) + p @ v5[..., ks:ke, :]
                    row_max = new_max
                out[..., qs:qe, :] = acc / row_sum.unsqueeze(-1)
                lse[..., qs:qe] = row_max + _torch.log(row_sum)
        ctx.meta = (bias, causal, scale, q_block, k_block, q.dtype, k.dtype, v.dtype)
        ctx.save_for_backward(q5, k5, v5, out, lse, *params)
        return out.reshape(batch, heads, tq, dim).permute(0, 2, 1, 3).to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        bias, causal, scale, q_block, k_block, q_dtype, k_dtype, v_dtype = ctx.meta
        q5, k5, v5, out, lse, *params = ctx.saved_tensors
        batch, kv_heads, group, tq, dim = q5.shape
        heads, tk, work = kv_heads * group, k5.shape[3], q5.dtype
        first = tk - tq if causal else 0
        do5 = grad_out.permute(0, 2, 1, 3).to(work).reshape(batch, kv_heads, group, tq, dim)
        delta = (do5 * out).sum(-1)  # rowsum(dO * O): the softmax backward's per-row term
        dq, dk, dv = _torch.zeros_like(q5), _torch.zeros_like(k5), _torch.zeros_like(v5)
        wanted = [i for i, p in enumerate(params) if ctx.needs_input_grad[8 + i]]
        leaves = [p.detach().requires_grad_(i in wanted) if p.is_floating_point() else p.detach()
                  for i, p in enumerate(params)]
        grads = {i: _torch.zeros(params[i].shape, dtype=_torch.float64) for i in wanted}
        for qs, qe in _blocks(tq, q_block):
            qi, doi = q5[..., qs:qe, :], do5[..., qs:qe, :]
            lse_i, delta_i = lse[..., qs:qe].unsqueeze(-1), delta[..., qs:qe].unsqueeze(-1)
            for ks, ke in _blocks(tk, k_block):
                if causal and ks > first + qe - 1:
                    break
                with _torch.enable_grad():
                    b = bias.tile_values(*_index_grid(heads, qs, qe, ks, ke, first), params=leaves).to(work)
                kj, vj = k5[..., ks:ke, :], v5[..., ks:ke, :]
                s = (qi @ kj.transpose(-1, -2)) * scale + b.detach().reshape(kv_heads, group, qe - qs, ke - ks)
                mask = _future_keys(qs, qe, ks, ke, first) if causal else None
                if mask is not None:
                    s = s.masked_fill(mask, float("-inf"))
                p = _torch.exp(s - lse_i)
                ds = p * (doi @ vj.transpose(-1, -2) - delta_i)  # dL/dlogit of the tile
                dv[..., ks:ke, :] += (p.transpose(-1, -2) @ doi).sum(2, keepdim=True)
                dq[..., qs:qe, :] += (ds @ kj) * scale
                dk[..., ks:ke, :] += (ds.transpose(-1, -2) @ qi).sum(2, keepdim=True) * scale
                if wanted and b.requires_grad:
                    tile_grad = ds.sum(0).reshape(heads, qe - qs, ke - ks)  # the bias is shared by the batch
                    got = _torch.autograd.grad(b, [leaves[i] for i in wanted], tile_grad, allow_unused=True)
                    for i, g in zip(wanted, got):
                        if g is not None:
                            grads[i] += g.to(_torch.float64)
        dq = dq.reshape(batch, heads, tq, dim).permute(0, 2, 1, 3).to(q_dtype)
        dk = dk.squeeze(2).permute(0, 2, 1, 3).to(k_dtype)
        dv = dv.squeeze(2).permute(0, 2, 1, 3).to(v_dtype)
        dparams = [grads[i].to(params[i].dtype) if i in grads else None for i in range(len(params))]
        return (None, None, None, None, None, dq, dk, dv, *dparams)


def tiled_attention(q, k, v, bias, causal=True, scale=None, tile=None):
    """softmax(scale Q K^T + bias + mask) V through the tiled loop; q [B, T, H, D], k and v
    [B, Tk, Hk, D]. tile overrides the bias's (q_block, k_block)."""
    q_block, k_block = bias.tile if tile is None else tile
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return _TiledBiasAttention.apply(bias, bool(causal), scale, q_block, k_block, q, k, v, *bias.params)


_UNSUPPORTED = ("slopes", "inv_freq", "t5_table", "log_forget", "grape_a", "grape_ap", "grape_m", "positions",
                "offsets", "cu_seqlens", "key_positions", "key_offsets", "key_cu_seqlens")


def attention(q, k, v, bias, *, causal, window, scale, layout, operands, relayout, **others):
    """grape.torch.attention's branch for a PythonBias (see grape.torch.attention for the arguments)."""
    for name in _UNSUPPORTED:
        if others.get(name) is not None:
            raise GrapeError(f"grape: {name}: not taken with a python_bias encoding (its fn sees positions 0..T-1)")
    if window:
        raise GrapeError("grape: window: not taken with a python_bias encoding (mask in fn instead)")
    if bias.causal_only and not causal:
        raise GrapeError(f"grape: causal: python_bias {bias.name!r} is causal_only; pass causal=True")
    heads = None if bias.heads is None else ("encoding", bias.heads)
    q, k, v = operands(layout, q, k, v, heads)
    flat = q.dim() == 3
    if flat:  # [tokens, heads, dim]: one sequence
        q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() != 4:
            raise GrapeError(f"grape: {name}: must be [batch, seq, heads, dim] or [tokens, heads, dim] "
                             f"(got shape {list(x.shape)})")
        if not x.is_floating_point() or x.device.type != "cpu":
            raise GrapeError(f"grape: {name}: must be a floating-point CPU tensor (got {x.dtype} on {x.device})")
    if k.shape[:3] != v.shape[:3]:
        raise GrapeError(f"grape: v: must have k's batch, seq and heads (k {list(k.shape)}, v {list(v.shape)})")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise GrapeError(f"grape: k: must have q's batch and head_dim (q {list(q.shape)}, k {list(k.shape)})")
    if q.shape[2] % k.shape[2]:
        raise GrapeError(f"grape: k: its {k.shape[2]} heads must divide q's {q.shape[2]} (GQA)")
    if causal and q.shape[1] > k.shape[1]:
        raise GrapeError(f"grape: k: causal=True takes at least as many keys as queries, the queries the last of "
                         f"the keys' tokens (q {q.shape[1]}, k {k.shape[1]})")
    if len({q.dtype, k.dtype, v.dtype}) != 1:
        raise GrapeError(f"grape: q, k, v: must share a dtype (got {q.dtype}, {k.dtype}, {v.dtype})")
    out = tiled_attention(q, k, v, bias, causal=causal, scale=scale)
    return relayout(out.squeeze(0) if flat else out, layout)


__all__ = ["PythonBias", "attention", "tiled_attention", "compute_dtype"]
