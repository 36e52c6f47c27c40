"""Fused attention with the encoding inside (the C++ cpu::attention, its backward, and decode over
a paged KV cache) on NumPy arrays and PyTorch tensors. grape.torch.attention is the differentiable one."""
from . import _grape


def _index_array(x):
    from . import _index_array as index_array
    return index_array(x)


def _new_like(x, shape, dtype=None):
    """A new C-contiguous array or tensor of x's kind (x's dtype unless given)."""
    if hasattr(x, "new_empty"):  # torch
        import torch
        return torch.empty(shape, dtype=x.dtype if dtype is None else dtype, device=x.device)
    import numpy as np
    return np.empty(shape, dtype=x.dtype if dtype is None else dtype)


def _tokens(q):
    return q.shape[0] * q.shape[1] if len(q.shape) == 4 else q.shape[0]


def _attention_options(positions, offsets, cu_seqlens, max_position, causal, window, scale, threads):
    return dict(positions=None if positions is None else _index_array(positions),
                offsets=None if offsets is None else _index_array(offsets),
                cu_seqlens=None if cu_seqlens is None else _index_array(cu_seqlens),
                max_position=max_position, causal=causal, window=window,
                scale=0.0 if scale is None else float(scale), threads=threads)


def _grape_a_arrays(grape_a):
    """GRAPE-A's (omega, key_gate, query_gate or None) as the module takes them, or None."""
    if grape_a is None:
        return None
    if not isinstance(grape_a, (tuple, list)) or len(grape_a) not in (2, 3):
        raise _grape.GrapeError("grape: grape_a: must be (omega, key_gate) or (omega, key_gate, query_gate)")
    omega, key_gate, query_gate = (tuple(grape_a) + (None,))[:3]
    return (omega, key_gate, query_gate)


def _grape_ap_arrays(grape_ap):
    """GRAPE-AP's (projections, norm_eps) as the module takes them (norm_eps defaults to 1e-6), or None."""
    if grape_ap is None:
        return None
    if isinstance(grape_ap, (tuple, list)):
        if len(grape_ap) != 2:
            raise _grape.GrapeError("grape: grape_ap: must be projections or (projections, norm_eps)")
        return (grape_ap[0], float(grape_ap[1]))
    return (grape_ap, 1e-6)


def _grape_m_arrays(grape_m):
    """Contextual GRAPE-M's (freqs, phases) as the module takes them, or None."""
    if grape_m is None:
        return None
    if not isinstance(grape_m, (tuple, list)) or len(grape_m) != 2:
        raise _grape.GrapeError("grape: grape_m: must be (freqs, phases)")
    return tuple(grape_m)


def _encoding_arrays(log_forget, grape_a, grape_ap, grape_m):
    """The module's arguments for the encodings given as arrays."""
    return dict(log_forget=log_forget, grape_a=_grape_a_arrays(grape_a), grape_ap=_grape_ap_arrays(grape_ap),
                grape_m=_grape_m_arrays(grape_m))


def attention(q, k, v, encoding=None, *, log_forget=None, grape_a=None, grape_ap=None, grape_m=None, causal=True,
              window=0, scale=None, positions=None, offsets=None, cu_seqlens=None, max_position=None,
              return_lse=False, threads=0):
    """O = softmax(scale * E(Q) E(K)^T + B + mask) V with the encoding inside the flash loop (blocks of
    256 queries, tiles of 128 keys, online softmax, float32 accumulation, never a T x T buffer).

    q [tokens, heads, d] or [batch, seq, heads, d]; k and v the same tokens, heads dividing q's (GQA);
    float32, float16 or bfloat16 (torch). encoding: None, a RotaryEncoding (one position axis, or
    M-RoPE's three sections with positions [3, tokens]), an
    AlibiEncoding, a T5Encoding with its table (grape.t5), a (RotaryEncoding, AlibiEncoding)
    pair (both: Q and K turned, the slopes' bias added), or a grape.encoding(name, ...) object (any
    built-in that enters attention, through its instance's kernels: xPos, GRAPE-M, M-RoPE with
    positions [axes, tokens], STRING, LieRE, GRAPE-A's lift, ...); or log_forget [heads, length] for FoX (its
    gates indexed by position); or grape_a = (omega [heads], key_gate [heads, length][, query_gate
    [heads, length]]) for GRAPE-A's gated bias -(i - j) * omega[h] * (key_gate[h, j] (+ query_gate[h, i]))
    (grape_a_key_gated / grape_a_qk_gated: omega = softplus(w) * slope, gates = softplus(z); float32,
    indexed by position); or grape_ap = projections [heads, length, P] or (projections, norm_eps) for
    GRAPE-AP's path-integral bias (grape_ap_relative: sum over the path n < l <= m of
    slope_h * log sigmoid(<p_m, R(l - m) p^_l> / P), causal, token l at position l); or
    grape_m = (freqs [planes] or [heads, planes], phases [rows, length]) for contextual GRAPE-M
    (each token's Q and K turned by Phi[row, position] * theta; rows 1 or the heads; float64 keeps a
    large phase exact: float32 holds 1e6 to 0.06). Positions:
    per-token ids, per-sequence offsets, or the index in the sequence; cu_seqlens packs sequences.
    causal masks keys after the query; window > 0 keeps keys fewer than `window` apart; scale
    defaults to 1/sqrt(d). Returns the output ([..., heads, v's d], q's dtype), and with return_lse
    also the float32 log-sum-exp [heads, tokens] that attention_backward needs.
    """
    out = _new_like(q, tuple(q.shape[:-1]) + (v.shape[-1],))
    lse = _new_like(q, (q.shape[-2], _tokens(q)), dtype=_float32_dtype(q))
    _grape._attention(encoding, q=q, k=k, v=v, out=out, lse=lse,
                      **_encoding_arrays(log_forget, grape_a, grape_ap, grape_m), **_attention_options(positions, offsets, cu_seqlens, max_position, causal, window, scale,
                                           threads))
    return (out, lse) if return_lse else out


def attention_backward(grad_out, q, k, v, out, lse, encoding=None, *, log_forget=None, grape_a=None, grape_ap=None,
                       grape_m=None, causal=True, window=0, scale=None, positions=None, offsets=None,
                       cu_seqlens=None, max_position=None, bias_grad=False, inv_freq_grad=False, threads=0):
    """The backward of attention() from its output and log-sum-exp (same arguments): returns
    (dq, dk, dv, d_bias, d_inv_freq). d_bias (bias_grad=True): dL/dslopes for ALiBi (alone or in a
    pair), dL/dtable [num_buckets * heads] for T5, dL/dlog_forget [heads * length] for FoX,
    dL/d(omega, key_gate[, query_gate]) [heads + heads * length (+ heads * length)] for GRAPE-A,
    dL/dprojections [heads * length * P] for GRAPE-AP, dL/dphases [rows * length] for contextual
    GRAPE-M; d_inv_freq (inv_freq_grad=True): dL/dtheta_i of a rotary encoding (alone or in a pair),
    or contextual GRAPE-M's dL/dfreqs [rows * planes].
    Both float64 lists, or None when not asked. Tiles are recomputed: no T x T buffer.
    """
    grads = [_new_like(q, tuple(x.shape)) for x in (q, k, v)]
    if hasattr(grad_out, "contiguous"):
        grad_out = grad_out.contiguous()
    d_bias, d_freq = _grape._attention_backward(
        encoding, q=q, k=k, v=v, out=out, lse=lse, grad_out=grad_out, grad_q=grads[0], grad_k=grads[1],
        grad_v=grads[2], bias_grad=bias_grad, inv_freq_grad=inv_freq_grad,
        **_encoding_arrays(log_forget, grape_a, grape_ap, grape_m), **_attention_options(positions, offsets, cu_seqlens, max_position, causal, window, scale, threads))
    return (*grads, d_bias, d_freq)


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, encoding=None, *, log_forget=None, grape_a=None,
                     grape_ap=None, grape_m=None, q_positions=None, layout="NHD", window=0, scale=None,
                     max_position=None, return_lse=False, threads=0):
    """Decode: one query token per sequence against a paged KV cache, the encoding inside.

    q [batch, heads, d] (C-contiguous); k_cache, v_cache as rotate_qk's kv_cache write fills them
    (K already rotated): NHD [blocks, block_size, kv_heads, d] or HND [blocks, kv_heads, block_size, d];
    block_table int32 [batch, max_blocks] (sequence b's blocks in order); seq_lens int64 [batch]
    (cached tokens, the new one included). Token j of a sequence has position j; the query has
    q_positions[b] (default seq_lens[b] - 1). encoding: as attention() takes it (a rotation turns
    the query only, K being turned in the cache; a grape.encoding(...) object on one position axis,
    not a lift), log_forget for FoX, grape_a for gated GRAPE-A,
    grape_ap for GRAPE-AP or grape_m for contextual GRAPE-M. Returns [batch, heads, v's d] (and the float32
    log-sum-exp [heads, batch] with return_lse).
    """
    out = _new_like(q, (q.shape[0], q.shape[1], v_cache.shape[-1]))
    lse = _new_like(q, (q.shape[1], q.shape[0]), dtype=_float32_dtype(q)) if return_lse else None
    _grape._attention_decode(encoding, q=q, k_cache=k_cache, v_cache=v_cache, layout=layout, block_table=block_table,
                             seq_lens=_index_array(seq_lens),
                             q_positions=None if q_positions is None else _index_array(q_positions), out=out,
                             lse=lse, max_position=max_position, window=window,
                             scale=0.0 if scale is None else float(scale), threads=threads,
                             **_encoding_arrays(log_forget, grape_a, grape_ap, grape_m))
    return (out, lse) if return_lse else out


def _float32_dtype(x):
    if hasattr(x, "new_empty"):
        import torch
        return torch.float32
    import numpy as np
    return np.float32


def set_matmul_path(path):
    """The matrix instructions of the attention products, process-wide: "auto" (bf16 storage on
    AVX512-BF16 dot products where the CPU has them, everything else in float32), "f32" (every call in
    float32) or "avx512bf16" (bf16 storage on AVX512-BF16; an error at the next bf16 call on a CPU
    without it). The environment variable GRAPE_CPU_MATMUL gives the initial value."""
    _grape._set_matmul_path(str(path))


def matmul_path(dtype="bfloat16"):
    """The path a call with this storage ("float32", "float16" or "bfloat16") takes now:
    "f32" or "avx512bf16"."""
    return _grape._matmul_path(str(dtype).replace("torch.", ""))


def cpu_matmul_units():
    """What this CPU has: {"avx512_bf16": bool, "amx_bf16": bool, "avx512_fp16": bool} (AMX and
    AVX512-FP16 are reported, not used yet)."""
    return _grape._cpu_matmul_units()
