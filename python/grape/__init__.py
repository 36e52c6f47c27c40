"""grape: position encodings as a group, a representation and an injection point.

The C++ library's checker and CPU kernels, on NumPy arrays and PyTorch tensors (no copies):

    import grape
    grape.list()                                   # the built-ins and the laws they claim
    report = grape.check("rope", trials=100, seed=1)
    enc = grape.from_config("config.json")         # a model's exact rotary encoding
    q_rot, k_rot = grape.rotate_qk(q, k, positions=pos, encoding=enc)
    out = grape.attention(q, k, v, enc, causal=True)  # the encoding inside the flash loop
    bias = grape.python_bias(fn, [lam])            # a score bias written in Python: grape.check(bias),
                                                   # grape.torch.attention(q, k, v, encoding=bias)
    rot = grape.python_rotation(angle, head_dim=64)  # a rotation written in Python: rot.apply(x),
                                                   # grape.check(rot), attention(..., encoding=rot)
    mine = grape.load_encoding("my_rope.hpp", "my_rope")  # a C++ encoding type of your own: mine.check(),
                                                   # attention(..., mine.make(head_dim=64)), ...

Bad input raises grape.GrapeError (a ValueError) with one line naming the argument.
`grape.torch` has autograd wrappers (gradients for q, k and the frequencies).
"""
import builtins as _builtins
import dataclasses as _dataclasses
import json as _json
import os as _os

from ._grape import (AlibiEncoding, BuiltinEncoding, GrapeError, RotaryCache, RotaryEncoding, T5Encoding, alibi,
                     alibi_slopes, rope, rotary)
from . import _grape
from ._check import BuiltinInfo, CheckReport, Counterexample, LawResult, check, inspect, list
from ._attention import attention, attention_backward, attention_decode, cpu_matmul_units, matmul_path, set_matmul_path
from ._grape_m import (grape_m_param_grads, grape_m_rotate_qk, grape_m_rotate_qk_backward,
                      grape_m_rotate_qk_backward_with_grads)
from ._python_encodings import PythonBias, python_bias
from ._python_rotations import PythonRotation, python_rotation
from ._load import LoadedEncoding, cmake_dir, load_encoding, load_encodings

__all__ = ["AlibiEncoding", "BuiltinInfo", "CheckReport", "Counterexample", "GrapeError", "LawResult",
           "RotaryEncoding", "T5Encoding", "check", "from_config", "list", "rope", "rotary", "rotate_qk",
           "rotate_qk_backward", "inv_freq_grad", "alibi_slopes", "alibi_bias", "alibi_slope_grad", "t5_bias",
           "fox_bias", "grape_a_bias", "add_sinusoidal", "t5", "RotaryCache", "QKNorm", "KVCacheWrite", "inspect", "alibi",
           "attention", "attention_backward", "attention_decode", "mrope", "encoding", "BuiltinEncoding",
           "grape_m_rotate_qk", "grape_m_rotate_qk_backward", "grape_m_rotate_qk_backward_with_grads",
           "grape_m_param_grads", "grape_ap_bias",
           "grape_ap_bias_grad", "lift_qk", "lift_qk_backward", "set_matmul_path", "matmul_path", "cpu_matmul_units",
           "python_bias", "PythonBias", "python_rotation", "PythonRotation", "load_encoding", "load_encodings",
           "LoadedEncoding", "cmake_dir"]


def encoding(name, **params):
    """Any built-in encoding (grape.list()) made from its parameters, as the C++ type takes them;
    those not given keep the type's defaults, e.g. grape.encoding("xpos", head_dim=64, scale_base=512)
    or grape.encoding("grape_m", head_dim=8, omega=0.1, a=[...], b=[...]). The BuiltinEncoding's
    .params shows every value. grape.rotate_qk and its backward (and grape.torch.rotate_qk, for q
    and k) take those that rotate Q and K (.rotates_qk: rope, rope_interleaved, xpos, grape_m,
    mrope, axial_2d, string_rope, liere_2d, and rope_alibi's rotation); enc.bias_tile(q_len, k_len)
    gives a score bias's tile (.has_bias_tile) and enc.add_embedding(x, positions) adds an absolute
    embedding (.has_embedding)."""
    return _grape._builtin_encoding(name, params)


def mrope(head_dim, sections, base=10000.0, attention_factor=1.0):
    """M-RoPE (Qwen2-VL's multimodal RoPE): RoPE's table 1 / base^(2i/d) with its planes in
    consecutive sections, section k turning with position axis k; Qwen2-VL's mrope_section
    (t, h, w), e.g. (16, 24, 24) of head_dim 128, half-split layout. rotate_qk takes positions as
    [num_axes, tokens] int ids; a text token has t = h = w, which is RoPE.
    Equivalent to rope(head_dim, base, attention_factor=...).with_sections(sections)."""
    return rope(head_dim, base, attention_factor=attention_factor).with_sections(_builtins.list(sections))


def from_config(config, seq_len=None, precision="float32_reference"):
    """The encoding a Hugging Face style config builds: a path to config.json or the parsed dict.

    Rotary models give a RotaryEncoding (its table evaluated at seq_len, default the config's
    max_position_embeddings), ALiBi models an AlibiEncoding, T5 models a T5Encoding.
    precision: "float32_reference" (default: the float32 table transformers computes, bit for bit,
    the values the checkpoint was trained and is served with) or "float64" (the formulas in float64).
    Phases are exact either way. Qwen2-VL's mrope is read with 1-D token positions (text: t = h = w);
    .with_sections(config["rope_scaling"]["mrope_section"]) makes it take (t, h, w) positions.
    """
    if isinstance(config, dict):
        return _grape._config_from_text(_json.dumps(config), "<dict>", seq_len, precision)
    if isinstance(config, (str, _os.PathLike)):
        return _grape._config_from_file(_os.fspath(config), seq_len, precision)
    raise TypeError("grape: from_config: config must be a path or a dict (got %s)" % type(config).__name__)


def _empty_like(x):
    """A new array or tensor with x's dtype, shape and strides (the kernels address in and out alike)."""
    if hasattr(x, "new_empty_strided"):  # torch
        return x.new_empty_strided(x.size(), x.stride())
    import numpy as np
    if x.size == 0 or min(x.strides, default=0) < 0:
        return np.empty_like(x)  # (negative strides: the kernel call refuses x itself)
    span = x.itemsize + sum((n - 1) * s for n, s in zip(x.shape, x.strides))
    return np.lib.stride_tricks.as_strided(np.empty(span // x.itemsize, x.dtype), x.shape, x.strides)


def _operand(x, name):
    """x itself when it is an array or tensor the module can read (NumPy, or a torch tensor on the CPU), else
    a GrapeError naming the argument: a list has no strides to read, and a meta or CUDA tensor no CPU memory."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise GrapeError(f"grape: {name}: must be a NumPy array or a torch tensor (got {type(x).__name__})")
    device = getattr(getattr(x, "device", None), "type", "cpu")  # NumPy 2's .device is the string "cpu"
    if device != "cpu":
        raise GrapeError(f"grape: {name}: must be on the CPU, where grape's kernels run (got a {device} tensor)")
    return x


def _index_array(x):
    """Lists and tuples of positions become int64 arrays; arrays and tensors pass unchanged."""
    if isinstance(x, (_builtins.list, tuple, range)):
        import numpy as np
        return np.asarray(x, dtype=np.int64)
    return x


@_dataclasses.dataclass
class QKNorm:
    """Per-head RMSNorm of Q and K before the rotation (Qwen3, Gemma 3): x / sqrt(mean(x^2) + eps) * w,
    w = weight or 1 + weight with unit_offset (Gemma). Weights: float32 [head_dim]; None skips that side."""
    q_weight: object = None
    k_weight: object = None
    eps: float = 1e-6
    unit_offset: bool = False


@_dataclasses.dataclass
class KVCacheWrite:
    """The paged KV-cache write fused into rotate_qk: token t's rotated K heads go to slot
    slot_mapping[t] (int64, -1 skips the token) of k_cache, and its V heads (values, laid out like k)
    unchanged to the same slot of v_cache. Caches: "NHD" [blocks, block_size, heads, dim] or "HND"
    [blocks, heads, block_size, dim], the storage type of q and k."""
    slot_mapping: object
    k_cache: object
    v_cache: object = None
    values: object = None
    layout: str = "NHD"


def _call(q, k, encoding, positions, offsets, cu_seqlens, max_position, threads, out, backward, cache=None,
          qk_norm=None, kv_cache=None):
    positions, offsets, cu_seqlens = _index_array(positions), _index_array(offsets), _index_array(cu_seqlens)
    if not isinstance(encoding, (RotaryEncoding, BuiltinEncoding)):
        raise TypeError("grape: encoding: must be a grape.RotaryEncoding (grape.rope, grape.rotary or "
                        "grape.from_config) or a grape.BuiltinEncoding (grape.encoding), got %s"
                        % type(encoding).__name__)
    for name, x in (("q", q), ("k", k)):
        if x is not None:
            _operand(x, name)
    if out is None:
        q_out = None if q is None else _empty_like(q)
        k_out = None if k is None else _empty_like(k)
    else:
        q_out, k_out = out
    if isinstance(encoding, BuiltinEncoding):
        for name, given in (("cache", cache), ("qk_norm", qk_norm), ("kv_cache", kv_cache)):
            if given is not None:
                raise GrapeError("grape: %s: takes a RotaryEncoding; a built-in's instance rotation has no %s"
                                 % (name, name))
        _grape._rotate_qk_builtin(encoding, q, q_out, k, k_out, positions, offsets, cu_seqlens, max_position,
                                  threads, backward)
        return q_out, k_out
    norm = qk_norm or QKNorm()
    kv = kv_cache or KVCacheWrite(None, None)
    _grape._rotate_qk(encoding, q, q_out, k, k_out, positions, offsets, cu_seqlens, max_position, threads,
                      backward, cache, norm.q_weight, norm.k_weight, norm.eps, norm.unit_offset,
                      _index_array(kv.slot_mapping), kv.k_cache, kv.v_cache, kv.values, kv.layout)
    return q_out, k_out


def rotate_qk(q, k, encoding, positions=None, offsets=None, cu_seqlens=None, max_position=None, threads=0,
              out=None, cache=None, qk_norm=None, kv_cache=None):
    """Rotates q and k ([tokens, heads, dim] or [batch, seq, heads, dim], float32/float16/bfloat16,
    channels contiguous) by the encoding's angles with exact phases, float32 arithmetic.

    positions: int32/int64 [num_axes x tokens] position ids; offsets: int64 [batch], position =
    offsets[b] + s; neither: position = s. cu_seqlens: int64 [batch + 1] for packed sequences.
    q or k may be None. out: (q_out, k_out) to write into (same dtype, shape and strides; may be
    q and k themselves), else new arrays. cache: a grape.RotaryCache of this encoding (cos/sin
    rows instead of on the fly; same results). qk_norm: a grape.QKNorm applied before the rotation;
    kv_cache: a grape.KVCacheWrite that also writes rotated K (and V) into a paged cache.
    Returns (q_out, k_out).
    """
    return _call(q, k, encoding, positions, offsets, cu_seqlens, max_position, threads, out, False, cache, qk_norm,
                 kv_cache)


def rotate_qk_backward(grad_q, grad_k, encoding, positions=None, offsets=None, cu_seqlens=None, threads=0,
                       out=None):
    """dL/dq and dL/dk from dL/d(rotated q) and dL/d(rotated k): the rotation by minus the angle."""
    return _call(grad_q, grad_k, encoding, positions, offsets, cu_seqlens, None, threads, out, True)


def _empty_with(x, heads, dim):
    """A new dense array or tensor of x's dtype with x's leading axes, `heads` heads of `dim` channels."""
    shape = tuple(x.shape[:-2]) + (heads, dim)
    if hasattr(x, "new_empty"):  # torch
        return x.new_empty(shape)
    import numpy as np
    return np.empty(shape, dtype=x.dtype)


def lift_qk(q, k, encoding, positions=None, offsets=None, cu_seqlens=None, max_position=None, threads=0):
    """GRAPE-A's lift (grape.encoding("grape_a"), .lifts_qk): q and k ([tokens, heads, dim] or
    [batch, seq, heads, dim], float32/float16/bfloat16) become q_lifted = rho_h(m) [q_h; 1; 0] and
    k_lifted = rho_h(n)^-T [k; 0; 1] with dim + 2 channels, K lifted once per query head (k_lifted
    has q's heads), so that any attention's q_lifted . k_lifted is q.k + slope_h (n - m). Positions as
    grape.rotate_qk takes them. Returns (q_lifted, k_lifted)."""
    positions, offsets, cu_seqlens = _index_array(positions), _index_array(offsets), _index_array(cu_seqlens)
    q, k = _operand(q, "q"), _operand(k, "k")
    heads, dim = q.shape[-2], q.shape[-1] + 2
    q_lifted, k_lifted = _empty_with(q, heads, dim), _empty_with(k, heads, dim)
    _grape._lift_qk_builtin(encoding, q, k, q_lifted, k_lifted, positions, offsets, cu_seqlens, max_position,
                            threads, False)
    return q_lifted, k_lifted


def lift_qk_backward(grad_q_lifted, grad_k_lifted, q, k, encoding, positions=None, offsets=None, cu_seqlens=None,
                     threads=0):
    """dL/dq and dL/dk (shaped like the forward's q and k; dL/dk summed over each key head's query
    heads) from dL/d(q_lifted) and dL/d(k_lifted)."""
    positions, offsets, cu_seqlens = _index_array(positions), _index_array(offsets), _index_array(cu_seqlens)
    grad_q, grad_k = _empty_with(q, q.shape[-2], q.shape[-1]), _empty_with(k, k.shape[-2], k.shape[-1])
    _grape._lift_qk_builtin(encoding, grad_q, grad_k, grad_q_lifted, grad_k_lifted, positions, offsets, cu_seqlens,
                            None, threads, True)
    return grad_q, grad_k


def inv_freq_grad(q, k, grad_q, grad_k, encoding, positions=None, offsets=None, cu_seqlens=None, threads=0):
    """dL/d inv_freq[i] (float64 list, rotary_dim / 2 values), summed over tokens and heads: q and k
    are the forward inputs, grad_q and grad_k dL/d(rotated q and k) with the same strides."""
    return _grape._inv_freq_grad(encoding, q, grad_q, k, grad_k, positions, offsets, cu_seqlens, threads)


def _float32(x):
    """A C-contiguous float32 NumPy view or copy of x (a list, an array or a CPU tensor)."""
    import numpy as np
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().float().numpy()
    return np.ascontiguousarray(x, dtype=np.float32)


def _float32_or_64(x):
    """A C-contiguous NumPy array of x: float64 kept, anything else as float32."""
    import numpy as np
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu()
        x = x.numpy() if str(x.dtype) == "torch.float64" else x.float().numpy()
    x = np.asarray(x)
    return np.ascontiguousarray(x, dtype=np.float64 if x.dtype == np.float64 else np.float32)


def alibi_bias(slopes, q_len, k_len, q_start=0, k_start=0, threads=0):
    """ALiBi's tile b_h(i, j) = -slopes[h] * |i - j| for query positions q_start.. and key
    positions k_start..: float32 [heads, q_len, k_len]. slopes: an AlibiEncoding or per-head values."""
    if isinstance(slopes, AlibiEncoding):
        slopes = slopes.slopes
    return _grape._alibi_tile(_float32(slopes).reshape(-1), q_len, k_len, q_start, k_start, threads)


def alibi_slope_grad(grad_tile, q_start=0, k_start=0, threads=0):
    """dL/dslope_h = sum over the tile of grad_tile[h, i, j] * (-|i - j|), in float64."""
    return _grape._alibi_slope_grad(_float32(grad_tile), q_start, k_start, threads)


def t5(table, max_distance=128, bidirectional=True):
    """T5's relative buckets with their table [num_buckets, heads] (a list, an array or a tensor;
    kept in float64): bucket(j - i) as T5 computes it, max_distance >= num_buckets. The encoding
    grape.attention takes for T5; its bias gradient is dL/dtable, flattened bucket-major."""
    import numpy as np
    if hasattr(table, "detach"):  # torch
        table = table.detach().cpu().double().numpy()
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2:
        raise GrapeError(f"grape: table: must be [num_buckets, heads] (got {t.ndim} dimensions)")
    return _grape._t5(t.ravel().tolist(), int(t.shape[1]), int(max_distance), bool(bidirectional))


def t5_bias(table, q_len, k_len, max_distance=128, bidirectional=True, q_start=0, k_start=0, threads=0):
    """T5's tile b_h(i, j) = table[bucket(j - i), h], table float32 [num_buckets, heads]."""
    return _grape._t5_tile(_float32(table), q_len, k_len, max_distance, bidirectional, q_start, k_start, threads)


def fox_bias(log_forget, q_len=None, k_len=None, q_start=0, k_start=0, causal_mask_value=float("-inf"),
             threads=0):
    """FoX's tile b_h(i, j) = sum_{l=j+1..i} log_forget[h, l] (prefix sums in float64), keys after the
    query get causal_mask_value. log_forget float32 [heads, seq_len]; default tile: the whole sequence."""
    lf = _float32(log_forget)
    seq = lf.shape[-1] if lf.ndim == 2 else 0
    return _grape._fox_tile(lf, seq if q_len is None else q_len, seq if k_len is None else k_len, q_start, k_start,
                            causal_mask_value, threads)


def grape_a_bias(omega, key_gate, query_gate=None, threads=0):
    """GRAPE-A's gated linear tile b_h(i, j) = -(i - j) * omega[h] * (key_gate[h, j] (+ query_gate[h, i]))
    for j <= i, -inf above the diagonal (grape_a_key_gated / grape_a_qk_gated). omega float32 [heads],
    gates float32 [heads, seq_len] (softplus outputs) -> float32 [heads, seq_len, seq_len]."""
    return _grape._grape_a_tile(_float32(omega), _float32(key_gate),
                                None if query_gate is None else _float32(query_gate), threads)


def grape_a_bias_grad(omega, key_gate, grad_tile, query_gate=None):
    """dL/d omega, dL/d key_gate and dL/d query_gate (None when key-gated; float64 [heads],
    [heads, seq_len], [heads, seq_len]) from dL/d(grape_a_bias tile) ([heads, seq_len, seq_len]; the
    entries above the diagonal are not read). Inputs float32 or float64; float64 throughout."""
    import numpy as np
    kg = _float32_or_64(key_gate)
    heads, seq = kg.shape if kg.ndim == 2 else (0, 0)
    out = np.empty(heads * (1 + seq * (1 if query_gate is None else 2)), dtype=np.float64)
    _grape._grape_a_grad(_float32_or_64(omega), kg, None if query_gate is None else _float32_or_64(query_gate),
                         _float32_or_64(grad_tile), out)
    d_query = None if query_gate is None else out[heads + heads * seq:].reshape(heads, seq)
    return out[:heads], out[heads:heads + heads * seq].reshape(heads, seq), d_query


def grape_ap_bias(projections, norm_eps=1e-6, threads=0):
    """GRAPE-AP's path-integral tile with both sides rotated (grape_ap_relative):
    b_h(m, n) = sum_{n<l<=m} slope_h * log sigmoid(<p_m, R(l - m) p^_l> / P), -inf above the diagonal,
    p^ = p / sqrt(mean(p^2) + norm_eps). projections float32 [heads, seq_len, P] -> float32
    [heads, seq_len, seq_len], each entry summed in float64 and rounded once."""
    return _grape._grape_ap_tile(_float32(projections), norm_eps, threads)


def grape_ap_bias_grad(projections, grad_tile, norm_eps=1e-6):
    """dL/d projections (float64 [heads, seq_len, P]) from dL/d(grape_ap_bias tile) ([heads, seq_len,
    seq_len]; the entries above the diagonal are not read). Float64 throughout."""
    import numpy as np
    p = _float32(projections)
    out = np.empty(p.shape, dtype=np.float64)
    _grape._grape_ap_grad(p, norm_eps, _float32(grad_tile), out)
    return out


def add_sinusoidal(x, positions, base=10000.0, threads=0):
    """x[t] += PE(positions[t]) in place (x float32 [tokens, dim]; PE pairs interleaved, exact phases)."""
    _grape._add_sinusoidal(x, positions, base, threads)
    return x

