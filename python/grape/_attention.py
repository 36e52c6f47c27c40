"""Fused attention with the encoding inside (the C++ cpu::attention, its backward, and decode over
a paged KV cache) on NumPy arrays and PyTorch tensors. grape.torch.attention is the differentiable one."""
from . import _grape


def _index_array(x):
    from . import _index_array as index_array
    return index_array(x)


def _operand(x, name):
    from . import _operand as operand
    return operand(x, name)


# The layouts of q, k and v: grape's, and torch's scaled_dot_product_attention's.
LAYOUTS = {"bthd": "[batch, seq, heads, dim]", "bhtd": "[batch, heads, seq, dim]"}


def _swap_seq_heads(x):
    """[batch, seq, heads, dim] as [batch, heads, seq, dim] or back: a view, nothing copied."""
    return x.transpose(1, 2) if hasattr(x, "new_empty") else x.transpose(0, 2, 1, 3)


def relayout(x, layout):
    """[batch, seq, heads, dim] seen in `layout`, or `layout` seen as [batch, seq, heads, dim] (the swap
    is its own inverse): a view."""
    return _swap_seq_heads(x) if layout == "bhtd" else x


def _disagreement(q, k, v, heads, own_keys=False):
    """What makes the extents of q, k, v ([..., seq, heads, dim]) and the encoding's heads
    inconsistent, or None (also when one has too few dimensions: the module's checks name it).
    own_keys: K and V on tokens of their own, so only their lengths must agree."""
    if any(len(x.shape) < 3 for x in (q, k, v)):
        return None
    (sq, hq), (sk, hk), (sv, hv) = (tuple(x.shape[-3:-1]) for x in (q, k, v))
    if not (sk == sv if own_keys else sq == sk == sv):
        return f"the sequence lengths differ (q {sq}, k {sk}, v {sv})"
    if hk < 1 or hv < 1 or hq % hk or hq % hv:
        return f"k's {hk} and v's {hv} heads do not divide q's {hq}"
    if heads is not None and heads[1] != hq:
        return f"q has {hq} heads and {heads[0]} {heads[1]}"
    return None


def operands(layout, q, k, v, heads=None, own_keys=False):
    """q, k and v read in `layout` as the module takes them: [batch, seq, heads, dim] views (or
    [tokens, heads, dim] in "bthd"). heads: (argument, count) when the encoding fixes the query heads.
    Extents that disagree in `layout` but agree in the other one are refused, naming both: a tensor in
    the other layout would otherwise be read with its heads and tokens swapped."""
    if layout not in LAYOUTS:
        raise _grape.GrapeError("grape: layout: must be 'bthd' %s or 'bhtd' %s (got %r)"
                                % (LAYOUTS["bthd"], LAYOUTS["bhtd"], layout))
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(_operand(x, name).shape) != 4 and layout == "bhtd":
            raise _grape.GrapeError(f"grape: {name}: layout='bhtd' takes {LAYOUTS['bhtd']} (got shape {list(x.shape)})")
    if layout == "bhtd":
        q, k, v = (_swap_seq_heads(x) for x in (q, k, v))
    problem = _disagreement(q, k, v, heads, own_keys)
    if problem is None:
        return q, k, v
    other = "bhtd" if layout == "bthd" else "bthd"
    if all(len(x.shape) == 4 for x in (q, k, v)) and _disagreement(*(_swap_seq_heads(x) for x in (q, k, v)), heads,
                                                                  own_keys) is None:
        raise _grape.GrapeError(f"grape: q, k, v: read as {LAYOUTS[layout]} (layout='{layout}'), {problem}; read as "
                                f"{LAYOUTS[other]} they agree: pass layout='{other}'")
    _require_heads(heads, q.shape[-2])
    return q, k, v  # the module's own checks name what else disagrees


def _require_heads(heads, q_heads):
    if heads is not None and heads[1] != q_heads:
        raise _grape.GrapeError(f"grape: {heads[0]}: must match q's {q_heads} heads (got {heads[1]} heads)")


def _shape(x):
    if hasattr(x, "shape"):
        return tuple(x.shape)
    import numpy as np
    return np.shape(x)


def encoding_heads(encoding=None, *, slopes=None, t5_table=None, log_forget=None, grape_a=None, grape_ap=None,
                   grape_m=None):
    """(argument, count): the query heads the encoding fixes (ALiBi's slopes, a T5 table, FoX's,
    GRAPE-A's, GRAPE-AP's or contextual GRAPE-M's per-head rows), or None. The arrays as the callers
    take them (grape_a a tuple, grape_ap projections or a pair, grape_m a pair; a batch axis or not)."""
    def rows(name, x, axis):
        shape = _shape(x)
        return (name, shape[axis]) if len(shape) >= -axis else None

    if slopes is not None:
        return rows("slopes", slopes, -1)
    if t5_table is not None:
        return rows("t5_table", t5_table, -1)
    if log_forget is not None:
        return rows("log_forget", log_forget, -2)
    if grape_a is not None:
        return rows("omega", _grape_a_arrays(grape_a)[0], -1)
    if grape_ap is not None:
        return rows("projections", _grape_ap_arrays(grape_ap)[0], -3)
    if grape_m is not None:  # a row per head on either side sets the heads; both shared: any count
        freqs, phases = _grape_m_arrays(grape_m)
        given = [r for r in (rows("freqs", freqs, -2), rows("phases", phases, -2)) if r is not None and r[1] > 1]
        return given[0] if given else None
    if isinstance(encoding, tuple) and len(encoding) == 2:  # (rotary, ALiBi)
        encoding = encoding[1]
    if hasattr(encoding, "slopes"):  # an AlibiEncoding or grape.torch.AlibiSlopes
        return "slopes", len(encoding.slopes)
    if hasattr(encoding, "num_buckets") and encoding.heads > 0:  # T5 with a table
        return "table", encoding.heads
    return None


def _new_like(x, shape, dtype=None):
    """A new C-contiguous array or tensor of x's kind (x's dtype unless given)."""
    if hasattr(x, "new_empty"):  # torch
        import torch
        return torch.empty(shape, dtype=x.dtype if dtype is None else dtype, device=x.device)
    import numpy as np
    return np.empty(shape, dtype=x.dtype if dtype is None else dtype)


def _tokens(q):
    return q.shape[0] * q.shape[1] if len(q.shape) == 4 else q.shape[0]


def _attention_options(positions, offsets, cu_seqlens, max_position, causal, window, scale, threads, keys=None):
    index = lambda x: None if x is None else _index_array(x)  # noqa: E731
    keys = keys or {}
    return dict(positions=index(positions), offsets=index(offsets), cu_seqlens=index(cu_seqlens),
                key_positions=index(keys.get("key_positions")), key_offsets=index(keys.get("key_offsets")),
                key_cu_seqlens=index(keys.get("key_cu_seqlens")),
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
              window=0, scale=None, positions=None, offsets=None, cu_seqlens=None, key_positions=None, key_offsets=None,
              key_cu_seqlens=None, max_position=None, layout="bthd", return_lse=False, threads=0):
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
    K and V on tokens of their own (new queries against cached keys, a query chunk against another
    part of the sequence): give key_positions, key_offsets or key_cu_seqlens, which place k's and v's
    tokens as positions, offsets and cu_seqlens place q's (the same batch; each sequence's keys may
    be more or fewer than its queries; `causal` then aligns the ends: query i of q_len sees key j of
    k_len when j - (k_len - q_len) <= i). CPU only: the CUDA kernels refuse it.
    causal masks keys after the query; window > 0 keeps keys fewer than `window` apart; scale
    defaults to 1/sqrt(d). layout: "bthd" (grape's [batch, seq, heads, dim], or [tokens, heads, d])
    or "bhtd" (scaled_dot_product_attention's [batch, heads, seq, dim]) for q, k, v and the output.
    Returns the output ([..., heads, v's d] in `layout`, q's dtype; with "bhtd" a view of a
    [batch, seq, heads, d] array), and with return_lse also the float32 log-sum-exp [heads, tokens]
    that attention_backward needs.
    """
    arrays = _encoding_arrays(log_forget, grape_a, grape_ap, grape_m)
    keys = dict(key_positions=key_positions, key_offsets=key_offsets, key_cu_seqlens=key_cu_seqlens)
    own_keys = any(x is not None for x in keys.values())
    q, k, v = operands(layout, q, k, v, encoding_heads(encoding, **arrays), own_keys)
    out = _new_like(q, tuple(q.shape[:-1]) + (v.shape[-1],))
    lse = _new_like(q, (q.shape[-2], _tokens(q)), dtype=_float32_dtype(q))
    _grape._attention(encoding, q=q, k=k, v=v, out=out, lse=lse, **arrays,
                      **_attention_options(positions, offsets, cu_seqlens, max_position, causal, window, scale, threads,
                                           keys))
    out = relayout(out, layout)
    return (out, lse) if return_lse else out


def attention_backward(grad_out, q, k, v, out, lse, encoding=None, *, log_forget=None, grape_a=None, grape_ap=None,
                       grape_m=None, causal=True, window=0, scale=None, positions=None, offsets=None,
                       cu_seqlens=None, key_positions=None, key_offsets=None, key_cu_seqlens=None, max_position=None,
                       layout="bthd", bias_grad=False, inv_freq_grad=False, threads=0):
    """The backward of attention() from its output and log-sum-exp (same arguments): returns
    (dq, dk, dv, d_bias, d_inv_freq). d_bias (bias_grad=True): dL/dslopes for ALiBi (alone or in a
    pair), dL/dtable [num_buckets * heads] for T5, dL/dlog_forget [heads * length] for FoX,
    dL/d(omega, key_gate[, query_gate]) [heads + heads * length (+ heads * length)] for GRAPE-A,
    dL/dprojections [heads * length * P] for GRAPE-AP, dL/dphases [rows * length] for contextual
    GRAPE-M; d_inv_freq (inv_freq_grad=True): dL/dtheta_i of a rotary encoding (alone or in a pair),
    or contextual GRAPE-M's dL/dfreqs [rows * planes].
    Both float64 lists, or None when not asked. Tiles are recomputed: no T x T buffer. grad_out,
    out and the returned dq, dk, dv are in `layout`, as q, k, v.
    """
    arrays = _encoding_arrays(log_forget, grape_a, grape_ap, grape_m)
    keys = dict(key_positions=key_positions, key_offsets=key_offsets, key_cu_seqlens=key_cu_seqlens)
    q, k, v = operands(layout, q, k, v, encoding_heads(encoding, **arrays), any(x is not None for x in keys.values()))
    grad_out, out = (_dense(relayout(_operand(x, name), layout)) for name, x in (("grad_out", grad_out), ("out", out)))
    grads = [_new_like(x, tuple(x.shape)) for x in (q, k, v)]
    d_bias, d_freq = _grape._attention_backward(
        encoding, q=q, k=k, v=v, out=out, lse=lse, grad_out=grad_out, grad_q=grads[0], grad_k=grads[1],
        grad_v=grads[2], bias_grad=bias_grad, inv_freq_grad=inv_freq_grad, **arrays,
        **_attention_options(positions, offsets, cu_seqlens, max_position, causal, window, scale, threads, keys))
    return (*(relayout(g, layout) for g in grads), d_bias, d_freq)


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
    q, k_cache, v_cache = (_operand(x, name) for name, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)))
    arrays = _encoding_arrays(log_forget, grape_a, grape_ap, grape_m)
    if len(q.shape) == 3:  # [batch, heads, d]; the module refuses any other shape
        _require_heads(encoding_heads(encoding, **arrays), q.shape[1])
    out = _new_like(q, (q.shape[0], q.shape[1], v_cache.shape[-1]))
    lse = _new_like(q, (q.shape[1], q.shape[0]), dtype=_float32_dtype(q)) if return_lse else None
    _grape._attention_decode(encoding, q=q, k_cache=k_cache, v_cache=v_cache, layout=layout, block_table=block_table,
                             seq_lens=_index_array(seq_lens),
                             q_positions=None if q_positions is None else _index_array(q_positions), out=out,
                             lse=lse, max_position=max_position, window=window,
                             scale=0.0 if scale is None else float(scale), threads=threads, **arrays)
    return (out, lse) if return_lse else out


def _dense(x):
    """x C-contiguous (a copy only when it is not): the module reads the output and its gradient densely."""
    if hasattr(x, "contiguous"):
        return x.contiguous()
    import numpy as np
    return np.ascontiguousarray(x)


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
