"""grape's rotary kernel, fused attention and bias tiles (ALiBi, FoX, GRAPE-A's gated bias) as differentiable
PyTorch ops.

    from grape.torch import rotate_qk
    q_rot, k_rot = rotate_qk(q, k, encoding, positions=pos)                 # grads for q and k
    q_rot, k_rot = rotate_qk(q, k, encoding, positions=pos, inv_freq=theta)  # and for theta

`inv_freq` (a float64 or float32 tensor of rotary_dim / 2 values) replaces the encoding's table, so
learned frequencies (GRAPE-M's non-contextual variant) train through the kernel: the backward
gives dL/dq, dL/dk (the rotation by minus the angle) and dL/d inv_freq (accumulated in float64).
GRAPE-M's rank-2 generator (rank2_rotate_qk: dL/da, dL/db, dL/domega) and RoPE in a learned
basis (basis_rotate_qk: dL/dB) train the same way; lift_qk is GRAPE-A's lift with its backward.
CPU tensors, float32/float16/bfloat16, as grape.rotate_qk takes them.
"""
import dataclasses as _dataclasses

import torch as _torch

import grape as _grape
from grape import _attention, _python_attention, _torch_attention as _kinds
from grape._python_encodings import PythonBias as _PythonBias
from grape import _python_rotations


def _threads():
    """The threads of every kernel call made here: torch's (torch.set_num_threads), which a PyPI torch
    keeps in an OpenMP runtime of its own, apart from grape's."""
    return _torch.get_num_threads()


class _RotateQK(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, inv_freq, encoding, positions, offsets):
        if inv_freq is not None and not isinstance(encoding, _grape.RotaryEncoding):
            raise _grape.GrapeError("grape: inv_freq: replaces a RotaryEncoding's table; %s has none"
                                    % type(encoding).__name__)
        if inv_freq is not None:
            encoding = encoding.with_inv_freq(_values(inv_freq))
        q_out, k_out = _grape.rotate_qk(q, k, encoding, positions=positions, offsets=offsets, threads=_threads())
        ctx.encoding = encoding
        ctx.positions = positions
        ctx.offsets = offsets
        ctx.inv_freq_meta = None if inv_freq is None else (inv_freq.dtype, inv_freq.device)
        ctx.save_for_backward(q, k)
        return q_out, k_out

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        q, k = ctx.saved_tensors
        grad_q, grad_k = _like(grad_q, q), _like(grad_k, k)
        dq, dk = _grape.rotate_qk_backward(grad_q, grad_k, ctx.encoding, positions=ctx.positions, offsets=ctx.offsets,
                                           threads=_threads())
        d_inv_freq = None
        if ctx.inv_freq_meta is not None and ctx.needs_input_grad[2]:
            g = _grape.inv_freq_grad(q, k, grad_q, grad_k, ctx.encoding, positions=ctx.positions,
                                     offsets=ctx.offsets, threads=_threads())
            dtype, device = ctx.inv_freq_meta
            d_inv_freq = _torch.tensor(g, dtype=dtype, device=device)
        return dq, dk, d_inv_freq, None, None, None


def _tensor(x, name):
    """x when it is a torch tensor the kernels can read (on the CPU), else a GrapeError naming it."""
    if not isinstance(x, _torch.Tensor):
        raise _grape.GrapeError(f"grape: {name}: must be a torch tensor (got {type(x).__name__})")
    return _grape._operand(x, name)


def _learned_table(inv_freq):
    """A learned frequency table: a 1-D tensor. Its length is checked where every path builds the
    encoding from it (grape.rotary or with_inv_freq: rotary_dim / 2 values, the encoding's; a partial
    rotary only where the encoding's rotary_dim says so)."""
    if inv_freq is not None and _tensor(inv_freq, "inv_freq").dim() != 1:
        raise _grape.GrapeError("grape: inv_freq: must be a 1-D tensor of rotary_dim / 2 frequencies (got shape %s)"
                                % list(inv_freq.shape))
    return inv_freq


def _values(inv_freq):
    """A frequency table tensor as the float64 values grape.rotary and with_inv_freq take."""
    return inv_freq.detach().to(_torch.float64).cpu().tolist()


def _like(grad, x):
    """grad laid out with x's strides: the kernels address gradients like the inputs."""
    if x.is_contiguous():
        return grad.contiguous()
    return grad.new_empty_strided(x.size(), x.stride()).copy_(grad)


@_dataclasses.dataclass(frozen=True)
class RotaryTable:
    """A rotary encoding's kernel parameters as plain Python values. rotate_qk takes it in place of
    the encoding; torch.compile traces it (it cannot trace into grape's C++ encoding objects), so
    pass RotaryTable.of(encoding) to code that is compiled with fullgraph=True. `sections`: M-RoPE's
    planes per position axis (empty: one axis). `rotary_dim`: the channels turned (None: all
    head_dim; fewer is a partial rotary); the table holds rotary_dim / 2 frequencies."""
    head_dim: int
    layout: str
    attention_factor: float
    inv_freq: tuple
    sections: tuple = ()
    rotary_dim: int = None

    @staticmethod
    def of(encoding):
        if isinstance(encoding, RotaryTable):
            return encoding
        return RotaryTable(encoding.head_dim, encoding.layout, float(encoding.attention_factor),
                           tuple(encoding.inv_freq), tuple(encoding.sections) if encoding.num_axes > 1 else (),
                           encoding.rotary_dim)

    @property
    def channels(self):
        """The channels turned: rotary_dim, or every one of head_dim."""
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    def encoding(self):
        """The grape encoding these values describe (grape.rotary, with_sections for M-RoPE)."""
        table = _grape.rotary(list(self.inv_freq), head_dim=self.head_dim, rotary_dim=self.channels,
                              layout=self.layout, attention_factor=self.attention_factor)
        return table.with_sections(list(self.sections)) if self.sections else table


BuiltinSpec = _kinds.BuiltinSpec


@_dataclasses.dataclass(frozen=True)
class AlibiSlopes:
    """ALiBi's slopes as plain Python values (what plain() makes of an AlibiEncoding)."""
    slopes: tuple


@_dataclasses.dataclass(frozen=True)
class T5Buckets:
    """T5's buckets and table as plain Python values (what plain() makes of a T5Encoding); table:
    bucket-major, num_buckets * heads values, or empty with heads 0 (a config's buckets)."""
    num_buckets: int
    max_distance: int
    bidirectional: bool
    heads: int = 0
    table: tuple = ()


def plain(encoding):
    """The encoding as plain Python values, which torch.compile traces where it cannot trace into
    grape's C++ objects: RotaryTable, AlibiSlopes, T5Buckets, BuiltinSpec, or a pair of them;
    grape.torch.attention takes it wherever it takes the encoding (rotate_qk: a RotaryTable). None
    stays None."""
    if encoding is None or isinstance(encoding, (RotaryTable, AlibiSlopes, T5Buckets, BuiltinSpec)):
        return encoding
    if isinstance(encoding, tuple):
        return tuple(plain(e) for e in encoding)
    if isinstance(encoding, _grape.RotaryEncoding):
        return RotaryTable.of(encoding)
    if isinstance(encoding, _grape.BuiltinEncoding):
        return BuiltinSpec.of(encoding)
    if isinstance(encoding, _grape.AlibiEncoding):
        return AlibiSlopes(tuple(float(x) for x in encoding.slopes))
    if isinstance(encoding, _grape.T5Encoding):
        return T5Buckets(encoding.num_buckets, encoding.max_distance, bool(encoding.bidirectional), encoding.heads,
                         tuple(float(x) for x in encoding.table))
    raise _grape.GrapeError(f"grape: plain: takes a grape encoding (got {type(encoding).__name__})")


# torch >= 2.4: grape::rotate_qk and its backward are torch custom ops (torch.library), with fake
# implementations, so torch.compile keeps them in the graph instead of breaking it.
HAVE_CUSTOM_OPS = hasattr(getattr(_torch, "library", None), "custom_op")

if HAVE_CUSTOM_OPS:
    from typing import Tuple as _Tuple

    def _encoding_of(inv_freq, head_dim, rotary_dim, layout, attention_factor):
        return RotaryTable(head_dim, layout, attention_factor, tuple(_values(inv_freq)), (), rotary_dim).encoding()

    def _empty_like_strided(x):
        return _torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)

    def _pair_op(name, kernel):
        """grape::<name>: kernel(q, k, encoding, positions=...) -> (q', k'), outputs laid out like
        the inputs; the forward rotation and its backward (the rotation by minus the angle)."""
        @_torch.library.custom_op("grape::" + name, mutates_args=())
        def op(q: _torch.Tensor, k: _torch.Tensor, inv_freq: _torch.Tensor, positions: _torch.Tensor,
               head_dim: int, rotary_dim: int, layout: str,
               attention_factor: float) -> _Tuple[_torch.Tensor, _torch.Tensor]:
            return kernel(q, k, _encoding_of(inv_freq, head_dim, rotary_dim, layout, attention_factor),
                          positions=positions, threads=_threads())

        @op.register_fake
        def _(q, k, inv_freq, positions, head_dim, rotary_dim, layout, attention_factor):
            return _empty_like_strided(q), _empty_like_strided(k)

        return op

    _rotate_qk_op = _pair_op("rotate_qk", _grape.rotate_qk)
    _rotate_qk_backward_op = _pair_op("rotate_qk_backward", _grape.rotate_qk_backward)

    @_torch.library.custom_op("grape::inv_freq_grad", mutates_args=())
    def _inv_freq_grad_op(q: _torch.Tensor, k: _torch.Tensor, grad_q: _torch.Tensor, grad_k: _torch.Tensor,
                          inv_freq: _torch.Tensor, positions: _torch.Tensor, head_dim: int, rotary_dim: int,
                          layout: str, attention_factor: float) -> _torch.Tensor:
        enc = _encoding_of(inv_freq, head_dim, rotary_dim, layout, attention_factor)
        g = _grape.inv_freq_grad(q, k, grad_q, grad_k, enc, positions=positions, threads=_threads())
        return _torch.tensor(g, dtype=inv_freq.dtype, device=inv_freq.device)

    @_inv_freq_grad_op.register_fake
    def _(q, k, grad_q, grad_k, inv_freq, positions, head_dim, rotary_dim, layout, attention_factor):
        return inv_freq.new_empty(inv_freq.shape)

    def _setup_context(ctx, inputs, output):
        q, k, inv_freq, positions, *meta = inputs
        ctx.save_for_backward(q, k, inv_freq, positions)
        ctx.meta = meta

    def _backward(ctx, grad_q, grad_k):
        q, k, inv_freq, positions = ctx.saved_tensors
        grad_q, grad_k = _like(grad_q, q), _like(grad_k, k)
        dq, dk = _rotate_qk_backward_op(grad_q, grad_k, inv_freq, positions, *ctx.meta)
        d_inv_freq = None
        if ctx.needs_input_grad[2]:
            d_inv_freq = _inv_freq_grad_op(q, k, grad_q, grad_k, inv_freq, positions, *ctx.meta)
        return dq, dk, d_inv_freq, None, None, None, None, None

    _rotate_qk_op.register_autograd(_backward, setup_context=_setup_context)


def _positions_tensor(q, positions, offsets):
    """The op's int64 positions: given ids, or offsets[b] + s, or s."""
    if positions is not None:
        return _torch.as_tensor(positions).to(_torch.int64).contiguous()
    seq = q.shape[1] if q.dim() == 4 else q.shape[0]
    s = _torch.arange(seq, dtype=_torch.int64)
    if q.dim() == 4:
        base = _torch.zeros(q.shape[0], dtype=_torch.int64) if offsets is None else _torch.as_tensor(offsets).to(_torch.int64)
        return (base[:, None] + s[None, :]).reshape(-1)
    return s


def rotate_qk(q, k, encoding, positions=None, offsets=None, inv_freq=None):
    """Differentiable grape.rotate_qk: returns (q_rot, k_rot); see the module's docstring."""
    q, k, inv_freq = _tensor(q, "q"), _tensor(k, "k"), _learned_table(inv_freq)
    if not q.is_contiguous() and q.stride(-1) != 1:
        q = q.contiguous()
    if not k.is_contiguous() and k.stride(-1) != 1:
        k = k.contiguous()
    # The custom op carries a table on one position axis; M-RoPE's sections or a built-in's instance
    # (grape.encoding) take the autograd.Function, which keeps them.
    table = RotaryTable.of(encoding) if isinstance(encoding, (RotaryTable, _grape.RotaryEncoding)) else None
    if HAVE_CUSTOM_OPS and table is not None and not table.sections:
        t = table
        if inv_freq is None:
            inv_freq = _torch.tensor(t.inv_freq, dtype=_torch.float64)
        return _rotate_qk_op(q, k, inv_freq, _positions_tensor(q, positions, offsets), t.head_dim, t.channels,
                             t.layout, t.attention_factor)
    if isinstance(encoding, RotaryTable):
        encoding = encoding.encoding()
    return _RotateQK.apply(q, k, inv_freq, encoding, positions, offsets)


class _GrapeMRotate(_torch.autograd.Function):
    """float32: the backward turns the gradients back and forms dL/dfreqs, dL/dphases in one pass from
    the saved outputs (grape_m_rotate_qk_backward_with_grads). float16/bfloat16: from the saved
    inputs, in two passes (their outputs' rounding would enter the parameter gradients)."""

    @staticmethod
    def forward(ctx, q, k, freqs, phases, positions, offsets, layout, angle_sign):
        q_out, k_out = _grape.grape_m_rotate_qk(q, k, freqs, phases=phases, positions=positions, offsets=offsets,
                                                layout=layout, angle_sign=angle_sign, threads=_threads())
        ctx.meta = dict(positions=positions, offsets=offsets, layout=layout, angle_sign=angle_sign)
        ctx.from_outputs = q.dtype == _torch.float32
        ctx.save_for_backward(*((q_out, k_out) if ctx.from_outputs else (q, k)), freqs, phases)
        return q_out, k_out

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        x_q, x_k, freqs, phases = ctx.saved_tensors  # the outputs (float32) or the inputs
        grad_q, grad_k = _like(grad_q, x_q), _like(grad_k, x_k)
        want_freqs = ctx.needs_input_grad[2]
        want_phases = phases is not None and ctx.needs_input_grad[3]
        want_params = want_freqs or want_phases
        if want_params and ctx.from_outputs:
            dq, dk, gf, gp = _grape.grape_m_rotate_qk_backward_with_grads(grad_q, grad_k, x_q, x_k, freqs,
                                                                          phases=phases, threads=_threads(),
                                                                          **ctx.meta)
        else:
            dq, dk = _grape.grape_m_rotate_qk_backward(grad_q, grad_k, freqs, phases=phases, threads=_threads(),
                                                       **ctx.meta)
            if want_params:
                gf, gp = _grape.grape_m_param_grads(x_q, x_k, grad_q, grad_k, freqs, phases=phases,
                                                    threads=_threads(), **ctx.meta)
        d_freqs = _torch.from_numpy(gf).to(dtype=freqs.dtype, device=freqs.device) if want_freqs else None
        d_phases = (_torch.from_numpy(_np_contiguous(gp)).to(dtype=phases.dtype, device=phases.device)
                    if want_phases else None)
        return dq, dk, d_freqs, d_phases, None, None, None, None


def _np_contiguous(a):
    import numpy as np
    return np.ascontiguousarray(a)


def grape_m_rotate_qk(q, k, freqs, phases=None, positions=None, offsets=None, layout="half_split", angle_sign=1):
    """Differentiable grape.grape_m_rotate_qk (GRAPE-M, learnable frequencies and contextual phases):
    returns (q_rot, k_rot); the backward gives dL/dq, dL/dk, dL/dfreqs ([planes] or [key_heads,
    planes]) and dL/dphases (shaped like phases), accumulated in float64. Train log-frequencies as
    the authors do with freqs = torch.exp(log_freq / scale); contextual phases are the exclusive
    cumulative sum of the model's omega, so their gradient flows on into it. angle_sign=-1: the
    authors' sign (grape.grape_m_rotate_qk)."""
    if q.stride(-1) != 1:
        q = q.contiguous()
    if k.stride(-1) != 1:
        k = k.contiguous()
    return _GrapeMRotate.apply(q, k, freqs, phases, positions, offsets, layout, angle_sign)


class _Rank2Rotate(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, a, b, omega, positions, offsets):
        encoding = _grape.encoding("grape_m", head_dim=int(q.shape[-1]), omega=float(omega),
                                   a=a.detach().double().cpu().tolist(), b=b.detach().double().cpu().tolist())
        q_out, k_out = _grape.rotate_qk(q, k, encoding, positions=positions, offsets=offsets, threads=_threads())
        ctx.meta = (encoding, positions, offsets)
        ctx.save_for_backward(q, k, a, b, omega)
        return q_out, k_out

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        q, k, a, b, omega = ctx.saved_tensors
        encoding, positions, offsets = ctx.meta
        grad_q, grad_k = _like(grad_q, q), _like(grad_k, k)
        dq, dk = _grape.rotate_qk_backward(grad_q, grad_k, encoding, positions=positions, offsets=offsets,
                                           threads=_threads())
        grads = [None, None, None]
        if any(ctx.needs_input_grad[2:5]):
            pos = _positions_tensor(q, positions, offsets).reshape(-1)
            av, bv, w = a.detach().double().cpu().tolist(), b.detach().double().cpu().tolist(), float(omega)
            da, db = _torch.zeros(len(av), dtype=_torch.float64), _torch.zeros(len(bv), dtype=_torch.float64)
            dw = 0.0
            for x, g in ((q, grad_q), (k, grad_k)):
                ga, gb, gw = _grape._grape._rank2_param_grads(av, bv, w, _token_rows(x), _token_rows(g), pos)
                da += _torch.tensor(ga, dtype=_torch.float64)
                db += _torch.tensor(gb, dtype=_torch.float64)
                dw += gw
            values = (da, db, _torch.tensor(dw, dtype=_torch.float64))
            grads = [v.to(dtype=like.dtype, device=like.device).reshape(like.shape) if want else None
                     for want, v, like in zip(ctx.needs_input_grad[2:5], values, (a, b, omega))]
        return (dq, dk, *grads, None, None)


def _token_rows(x):
    """x as dense float32 [tokens, heads, dim]."""
    return x.detach().float().contiguous().reshape(-1, x.shape[-2], x.shape[-1])


def rank2_rotate_qk(q, k, a, b, omega=1.0, positions=None, offsets=None):
    """Differentiable GRAPE-M with a rank-2 generator (the built-in grape_m): every head of q and k
    ([tokens, heads, dim] or [batch, seq, heads, dim]) turns by exp(p * omega * (a b^T - b a^T)),
    p the token's position (positions / offsets / its index, as grape.rotate_qk takes them), through
    grape's kernel with exact phases. a and b are tensors of dim values, omega a float or a 0-d
    tensor; the backward gives dL/dq, dL/dk and dL/da, dL/db, dL/domega for those that require
    them (the closed form's reverse-mode derivative, float64, O(dim) per vector)."""
    if q.stride(-1) != 1:
        q = q.contiguous()
    if k.stride(-1) != 1:
        k = k.contiguous()
    if not isinstance(omega, _torch.Tensor):
        omega = _torch.tensor(float(omega), dtype=_torch.float64)
    for name, v in (("a", a), ("b", b)):
        if v.dim() != 1 or v.shape[0] != q.shape[-1]:
            raise _grape.GrapeError("grape: %s: must hold head_dim = %d values (got shape %s)"
                                    % (name, q.shape[-1], tuple(v.shape)))
    if omega.numel() != 1:
        raise _grape.GrapeError("grape: omega: must be one value (got shape %s)" % (tuple(omega.shape),))
    return _Rank2Rotate.apply(q, k, a, b, omega, positions, offsets)


def basis_rotate_qk(q, k, basis, inv_freq, positions=None, offsets=None):
    """Differentiable RoPE in a learned basis (STRING, the built-in string_rope with B trained):
    y = B R(p) B^T x for every head of q and k, R(p) turning planes (2j, 2j+1) of B^T x by
    p * inv_freq[j] with grape's kernel (exact phases). basis: [dim, dim], its columns the basis
    vectors; inv_freq: dim / 2 values. The two products with B are PyTorch matmuls in float32, so
    autograd gives dL/dB (the Euclidean gradient: keeping B orthogonal, e.g. by a
    parametrization, is the model's choice), and the rotation gives dL/dq, dL/dk and dL/d inv_freq."""
    d = _tensor(q, "q").shape[-1]
    if _tensor(basis, "basis").shape != (d, d):
        raise _grape.GrapeError("grape: basis: must be [head_dim, head_dim] = [%d, %d] (got %s)"
                                % (d, d, tuple(basis.shape)))
    b32 = basis.to(_torch.float32)
    table = RotaryTable(d, "interleaved", 1.0, tuple(_values(_learned_table(inv_freq))))
    q_rot, k_rot = rotate_qk(q.float() @ b32, k.float() @ b32, table, positions=positions, offsets=offsets,
                             inv_freq=inv_freq)
    return (q_rot @ b32.T).to(q.dtype), (k_rot @ b32.T).to(k.dtype)


class _LiftQK(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, encoding, positions, offsets):
        ctx.meta = (encoding, positions, offsets)
        ctx.save_for_backward(q, k)
        return _grape.lift_qk(q, k, encoding, positions=positions, offsets=offsets, threads=_threads())

    @staticmethod
    def backward(ctx, grad_q_lifted, grad_k_lifted):
        q, k = ctx.saved_tensors
        encoding, positions, offsets = ctx.meta
        dq, dk = _grape.lift_qk_backward(grad_q_lifted.contiguous(), grad_k_lifted.contiguous(), q, k, encoding,
                                         positions=positions, offsets=offsets, threads=_threads())
        return dq, dk, None, None, None


def lift_qk(q, k, encoding, positions=None, offsets=None):
    """Differentiable grape.lift_qk (GRAPE-A's lift, grape.encoding("grape_a")): returns (q_lifted,
    k_lifted) with head_dim + 2 channels (K lifted per query head); the backward is the lift's
    transpose (grape.lift_qk_backward), dL/dk summed over each key head's query heads."""
    if q.stride(-1) != 1:
        q = q.contiguous()
    if k.stride(-1) != 1:
        k = k.contiguous()
    return _LiftQK.apply(q, k, encoding, positions, offsets)


class _AlibiBias(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, slopes, q_len, k_len, q_start, k_start):
        ctx.meta = (q_start, k_start, slopes.dtype, slopes.device)
        tile = _grape.alibi_bias(slopes, q_len, k_len, q_start, k_start, threads=_threads())
        return _torch.from_numpy(tile).to(slopes.device)

    @staticmethod
    def backward(ctx, grad_tile):
        q_start, k_start, dtype, device = ctx.meta
        g = _grape.alibi_slope_grad(grad_tile, q_start, k_start, threads=_threads())
        return _torch.tensor(g, dtype=dtype, device=device), None, None, None, None


def alibi_bias(slopes, q_len, k_len, q_start=0, k_start=0):
    """ALiBi's float32 tile [heads, q_len, k_len], differentiable in the slopes (learned ALiBi)."""
    return _AlibiBias.apply(slopes, q_len, k_len, q_start, k_start)


def _tiles_per_sequence(tile_of, gates, *more, sequence_dims=2):
    """tile_of(gates[n], *more[n]) (float32 NumPy [heads, seq] each, or [heads, seq, P] with
    sequence_dims=3; None passes through) for every leading index n of the tensors, stacked to a
    float32 [..., heads, seq, seq]."""
    shape = gates.shape
    lead = shape[:len(shape) - sequence_dims]
    flat = [None if g is None else g.detach().to(_torch.float32).cpu().reshape(-1, *g.shape[len(lead):])
            for g in (gates, *more)]
    tiles = [_torch.from_numpy(tile_of(*(None if f is None else f[n].numpy() for f in flat)))
             for n in range(flat[0].shape[0])]
    heads, seq = shape[len(lead)], shape[len(lead) + 1]
    return _torch.stack(tiles).reshape(*lead, heads, seq, seq)


def _mask_after_the_query(tile, value):
    """The tile with `value` above the diagonal (keys after the query), unless value is -inf (the
    kernels' own mask)."""
    if value == float("-inf"):
        return tile
    t = tile.shape[-1]
    return tile.masked_fill(_torch.ones(t, t, dtype=_torch.bool).triu(1), value)


class _FoxBias(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, log_forget, causal_mask_value):
        tile = _tiles_per_sequence(
            lambda lf: _grape.fox_bias(lf, causal_mask_value=causal_mask_value, threads=_threads()), log_forget)
        ctx.meta = (log_forget.dtype, log_forget.device)
        return tile.to(log_forget.device)

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


class _GrapeABias(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, omega, key_gate, query_gate, causal_mask_value):
        om = omega.detach().to(_torch.float32).cpu().numpy()
        tile = _mask_after_the_query(
            _tiles_per_sequence(lambda kg, qg: _grape.grape_a_bias(om, kg, qg, threads=_threads()), key_gate,
                                query_gate),
            causal_mask_value)
        ctx.save_for_backward(omega, key_gate, query_gate if query_gate is not None else key_gate.new_empty(0))
        ctx.has_query_gate = query_gate is not None
        return tile.to(device=key_gate.device, dtype=key_gate.dtype)

    @staticmethod
    def backward(ctx, grad_tile):
        # grape's kernel per sequence (cpu::gated_linear_grad, float64; grape_a_bias_grad keeps float64
        # inputs as they are); omega's gradient summed over the sequences.
        omega, key_gate, query_gate = ctx.saved_tensors
        lead, (heads, t) = key_gate.shape[:-2], key_gate.shape[-2:]
        kg = key_gate.detach().reshape(-1, heads, t)
        qg = query_gate.detach().reshape(-1, heads, t) if ctx.has_query_gate else None
        g = grad_tile.detach().reshape(-1, heads, t, t)
        parts = [_grape.grape_a_bias_grad(omega, kg[n], g[n], None if qg is None else qg[n])
                 for n in range(kg.shape[0])]
        d_omega = sum(_torch.from_numpy(p[0]) for p in parts)
        d_key = _torch.stack([_torch.from_numpy(p[1]) for p in parts]).reshape(*lead, heads, t)
        d_query = (_torch.stack([_torch.from_numpy(p[2]) for p in parts]).reshape(*lead, heads, t)
                   if ctx.has_query_gate else None)
        back = lambda d, like: d.to(device=like.device, dtype=like.dtype)
        return (back(d_omega, omega), back(d_key, key_gate),
                None if d_query is None else back(d_query, query_gate), None)


def grape_a_bias(omega, key_gate, query_gate=None, causal_mask_value=float("-inf")):
    """GRAPE-A's content-gated linear bias from grape's kernel (grape_a_key_gated, grape_a_qk_gated):
    b[.., h, i, j] = -(i - j) * omega[h] * (key_gate[.., h, j] (+ query_gate[.., h, i])) for j <= i,
    causal_mask_value above the diagonal. omega [heads]; gates [..., heads, seq] (softplus outputs).
    Differentiable in all three (the backward is grape's kernel in float64, grape.grape_a_bias_grad)."""
    return _GrapeABias.apply(omega, key_gate, query_gate, causal_mask_value)


class _GrapeAPBias(_torch.autograd.Function):

    @staticmethod
    def forward(ctx, projections, norm_eps, causal_mask_value):
        tiles = _mask_after_the_query(
            _tiles_per_sequence(lambda p: _grape.grape_ap_bias(p, norm_eps, threads=_threads()), projections,
                                sequence_dims=3),
            causal_mask_value)
        ctx.save_for_backward(projections)
        ctx.norm_eps = norm_eps
        return tiles.to(device=projections.device, dtype=projections.dtype)

    @staticmethod
    def backward(ctx, grad_tile):
        (projections,) = ctx.saved_tensors
        shape = projections.shape
        flat_p = projections.detach().to(_torch.float32).cpu().reshape(-1, *shape[-3:])
        flat_g = grad_tile.detach().to(_torch.float32).cpu().reshape(-1, shape[-3], shape[-2], shape[-2])
        grads = [_torch.from_numpy(_grape.grape_ap_bias_grad(p.numpy(), g.numpy(), ctx.norm_eps))
                 for p, g in zip(flat_p, flat_g)]
        d = _torch.stack(grads).reshape(shape)
        return d.to(device=projections.device, dtype=projections.dtype), None, None


def grape_ap_bias(projections, norm_eps=1e-6, causal_mask_value=float("-inf")):
    """GRAPE-AP's path-integral bias from grape's kernel (grape_ap_relative: both sides rotated):
    projections [..., heads, seq, P] -> [..., heads, seq, seq], causal_mask_value above the diagonal;
    differentiable in the projections (the backward in float64, grape.grape_ap_bias_grad)."""
    return _GrapeAPBias.apply(projections, norm_eps, causal_mask_value)


# Per keyword: which of its tensors hold per-token values (indexed by position), with their number
# of dimensions without a batch dimension.
_PER_TOKEN = {"grape_a": {1: 2, 2: 2}, "grape_ap": {0: 3}, "grape_m": {1: 2}}


def _encoding_tensors(name, value):
    """grape_a's, grape_ap's or grape_m's tensors, and what follows them (GRAPE-AP's norm_eps), read
    as grape.attention reads them (the same checks and messages)."""
    if name == "grape_a":
        return _attention._grape_a_arrays(value), ()
    if name == "grape_ap":
        projections, norm_eps = _attention._grape_ap_arrays(value)
        return (projections,), (norm_eps,)
    return _attention._grape_m_arrays(value), ()


def attention(q, k, v, encoding=None, *, slopes=None, inv_freq=None, t5_table=None, log_forget=None, grape_a=None,
              grape_ap=None, grape_m=None, bias_params=None, causal=True, window=0, scale=None, positions=None, offsets=None,
              cu_seqlens=None, key_positions=None, key_offsets=None, key_cu_seqlens=None, layout="bthd"):
    """Differentiable grape.attention (the encoding inside the flash loop, the backward from the
    saved log-sum-exp: no T x T tensor in either direction). Gradients for q, k, v and for one
    learnable encoding parameter:
      slopes [heads]      ALiBi with these slopes (learned ALiBi); with a RotaryEncoding as
                          `encoding`, RoPE and ALiBi together;
      inv_freq [d/2]      the rotary `encoding` (alone or the first of a (rotary, ALiBi) pair) with
                          this frequency table (learned frequencies); also a grape.encoding(...) or
                          loaded encoding that rotates by planes on one axis (its .inv_freq);
      t5_table [num_buckets, heads]  the T5Encoding `encoding`'s buckets with this table;
      log_forget [heads, length] or [batch, heads, seq]  FoX's log forget gates (per sequence with a
                          batch dimension: q, k, v then [batch, seq, heads, d]);
      grape_a = (omega [heads], key_gate[, query_gate])  GRAPE-A's gated bias
                          -(i - j) * omega[h] * (key_gate[h, j] (+ query_gate[h, i])), gates [heads, length]
                          or [batch, heads, seq] as log_forget; gradients for all of them (omega =
                          softplus(w) * slope and the gates = softplus(z) come from the caller's
                          autograd, so w and z train too);
      grape_ap = projections [heads, length, P] or [batch, heads, seq, P], or (projections, norm_eps)
                          GRAPE-AP's path-integral bias (grape_ap_relative); gradient for the projections;
      grape_m = (freqs [planes] or [heads, planes], phases [rows, length] or [batch, rows, seq])
                          contextual GRAPE-M (Q and K turned by phases[row, position] * freqs);
                          gradients for both (phases = cumsum(omega) from the caller's autograd).
      bias_params [n]     the score bias's own parameters of `encoding`, a grape.encoding(...) or
                          grape.load_encoding(...).make(...) object whose bias declares them
                          (encoding.bias_params: ALiBi's slopes, a log-distance bias's);
    Otherwise `encoding` (as grape.attention takes it, a grape.encoding(...) object included) is
    fixed: gradients for q, k and v. A grape.python_bias(fn, params) as `encoding` runs a tiled loop
    written in torch instead of the C++ kernel (fn evaluated per 128 x 128 tile; gradients for q, k,
    v and fn's params; causal, scale and layout only; docs/python.md, "Encodings written in Python").
    A grape.python_rotation(...) as `encoding` rotates Q and K in torch (at `positions`, [seq] or
    [seq, axes], default 0..seq-1) and runs this attention with no encoding: exact, with gradients for
    q, k, v and the rotation's params; causal, window, scale and layout as usual.
    layout: "bthd" (grape's [batch, seq, heads, dim], or [tokens, heads, dim]) or "bhtd"
    (scaled_dot_product_attention's [batch, heads, seq, dim]) for q, k, v and the output (with
    "bhtd" a view of a [batch, seq, heads, dim] tensor); extents that only the other layout explains
    are refused. key_positions, key_offsets or key_cu_seqlens put k and v on tokens of their own, as
    grape.attention says (dk and dv then have k's and v's shapes).
    On torch >= 2.4 this is the custom op grape::attention (and its backward); code compiled with
    torch.compile(fullgraph=True) passes plain(encoding), plain values it can trace.
    """
    if bias_params is not None and not isinstance(encoding, (_grape.BuiltinEncoding, BuiltinSpec)):
        raise _grape.GrapeError("grape: attention: bias_params: the score bias parameters of a grape.encoding(...) or "
                                "grape.load_encoding(...).make(...) object; pass that object as encoding")
    if isinstance(encoding, _PythonBias):  # a bias written in Python: the tiled loop in torch (_python_attention)
        return _python_attention.attention(
            q, k, v, encoding, causal=causal, window=window, scale=scale, layout=layout, operands=_attention.operands,
            relayout=_attention.relayout, slopes=slopes, inv_freq=inv_freq, t5_table=t5_table, log_forget=log_forget,
            grape_a=grape_a, grape_ap=grape_ap, grape_m=grape_m, positions=positions, offsets=offsets,
            cu_seqlens=cu_seqlens, key_positions=key_positions, key_offsets=key_offsets, key_cu_seqlens=key_cu_seqlens)
    if isinstance(encoding, _python_rotations.PythonRotation):  # Q and K rotated in torch, then no encoding
        return _python_rotations.attention(
            q, k, v, encoding, causal=causal, window=window, scale=scale, layout=layout, positions=positions,
            fused=attention, slopes=slopes, inv_freq=inv_freq, t5_table=t5_table, log_forget=log_forget,
            grape_a=grape_a, grape_ap=grape_ap, grape_m=grape_m, offsets=offsets, cu_seqlens=cu_seqlens,
            key_positions=key_positions, key_offsets=key_offsets, key_cu_seqlens=key_cu_seqlens)
    heads = _attention.encoding_heads(encoding, slopes=slopes, t5_table=t5_table, log_forget=log_forget,
                                      grape_a=grape_a, grape_ap=grape_ap, grape_m=grape_m)
    keys = dict(key_positions=key_positions, key_offsets=key_offsets, key_cu_seqlens=key_cu_seqlens)
    q, k, v = _attention.operands(layout, _tensor(q, "q"), _tensor(k, "k"), _tensor(v, "v"), heads,
                                  any(x is not None for x in keys.values()))
    out = _attention_bthd(q, k, v, encoding, slopes=slopes, inv_freq=_learned_table(inv_freq), t5_table=t5_table,
                          log_forget=log_forget, grape_a=grape_a, grape_ap=grape_ap, grape_m=grape_m,
                          bias_params=bias_params, causal=causal,
                          window=window, scale=scale, positions=positions, offsets=offsets, cu_seqlens=cu_seqlens,
                          **keys)
    return _attention.relayout(out, layout)


def _attention_bthd(q, k, v, encoding, *, slopes, inv_freq, t5_table, log_forget, grape_a, grape_ap, grape_m, causal,
                    window, scale, positions, offsets, cu_seqlens, key_positions=None, key_offsets=None,
                    key_cu_seqlens=None, runner=None, bias_params=None):
    """attention() with q, k, v as [batch, seq, heads, dim] (or [tokens, heads, dim]). runner(q, k, v,
    kind, params, spec, options) runs the call a kind resolves to (grape.distributed's ring; by default
    the fused attention op)."""
    given = [(n, p) for n, p in (("slopes", slopes), ("inv_freq", inv_freq), ("t5_table", t5_table),
                                 ("log_forget", log_forget), ("bias_params", bias_params)) if p is not None]
    if len(given) > 1:
        raise _grape.GrapeError("grape: attention: give at most one of slopes, inv_freq, t5_table, log_forget, "
                                "bias_params")
    learned, param = given[0] if given else (None, None)
    options = dict(positions=_index_tensor(positions), offsets=_index_tensor(offsets),
                   cu_seqlens=_index_tensor(cu_seqlens), key_positions=_index_tensor(key_positions),
                   key_offsets=_index_tensor(key_offsets), key_cu_seqlens=_index_tensor(key_cu_seqlens),
                   causal=bool(causal), window=int(window), scale=None if scale is None else float(scale))

    def call(kind, params, spec=_kinds.Spec(), **changed):
        opts = dict(options, **changed)
        if runner is not None:
            return runner(q, k, v, kind, params, spec, opts)
        return _kinds.kind_attention(q, k, v, kind, params, spec, tuple(opts[n] for n in _kinds.OPTIONS))

    def per_batch_element(kind, tensors, batched, spec=_kinds.Spec()):
        """One sequence of per-token values per batch element (tensors[i] [batch, heads, seq, ...] for
        i in batched), in one call: the sequences laid end to end ([heads, batch·seq, ...]) and
        element b's tokens at positions b·seq + i, so that each reads its own values. The encodings
        take positions only as indices into these values and through differences within a sequence,
        so the result is the per-element one; one call instead of one per element removes the
        per-call costs that small training shapes pay batch times (docs/performance.md)."""
        batch, seq = tensors[batched[0]].shape[0], tensors[batched[0]].shape[2]
        if q.dim() != 4 or q.shape[0] != batch or offsets is not None or cu_seqlens is not None or any(
                options[n] is not None for n in ("key_positions", "key_offsets", "key_cu_seqlens")):
            raise _grape.GrapeError(f"grape: attention: {kind}'s per-token values [batch, heads, seq, ...] need q, k, "
                                    "v [batch, seq, heads, d] with the same batch and no offsets, cu_seqlens or key tokens")
        end_to_end = [x.movedim(0, 1).reshape(x.shape[1], batch * seq, *x.shape[3:]) if i in batched else x
                      for i, x in enumerate(tensors)]
        starts = _torch.arange(batch, dtype=_torch.int64) * seq
        if options["positions"] is None:
            return call(kind, end_to_end, spec, offsets=starts)
        rows = options["positions"].reshape(batch, -1)
        return call(kind, end_to_end, spec, positions=(rows + starts[:, None]).reshape(-1))

    arrays = [(n, a) for n, a in (("grape_a", grape_a), ("grape_ap", grape_ap), ("grape_m", grape_m)) if a is not None]
    if arrays:
        name, value = arrays[0]
        if given or encoding is not None or len(arrays) > 1:
            raise _grape.GrapeError(f"grape: attention: {name} is the encoding; give no other")
        tensors, fixed = _encoding_tensors(name, value)
        tensors = [_torch.as_tensor(x) for x in tensors if x is not None]
        spec = _kinds.Spec(norm_eps=fixed[0]) if fixed else _kinds.Spec()
        batched = [i for i, dims in _PER_TOKEN[name].items() if i < len(tensors) and tensors[i].dim() == dims + 1]
        if batched:  # one sequence of per-token values per batch element
            return per_batch_element(name, tensors, batched, spec)
        return call(name, tensors, spec)
    if learned == "log_forget":
        if log_forget.dim() == 3:  # one gate sequence per batch element
            return per_batch_element("fox", [log_forget], [0])
        return call("fox", [log_forget])
    if learned == "inv_freq" and isinstance(encoding, (BuiltinSpec, _grape.BuiltinEncoding)):
        # A rotation by planes on one axis (rope, rope_alibi, a loaded type's): checked by with_inv_freq.
        return call("builtin_freq", [inv_freq], _kinds.Spec(builtin=BuiltinSpec.of(encoding).json))
    rotary = _rotary_table(encoding[0] if isinstance(encoding, tuple) and len(encoding) == 2 else encoding)
    if learned == "inv_freq" and rotary is None:
        raise _grape.GrapeError("grape: attention: inv_freq replaces a RotaryEncoding's table; pass the encoding")
    if learned == "slopes" and not (encoding is None or (rotary is not None and not isinstance(encoding, tuple))):
        raise _grape.GrapeError("grape: attention: slopes make the ALiBi bias; encoding must be None or a "
                                "RotaryEncoding to compose with")
    if learned == "t5_table" and (not isinstance(encoding, (_grape.T5Encoding, T5Buckets)) or t5_table.dim() != 2):
        raise _grape.GrapeError("grape: attention: t5_table [num_buckets, heads] fills a T5Encoding's buckets; "
                                "pass the encoding (grape.t5 or a config's)")
    if rotary is not None:
        spec = _kinds.Spec(head_dim=rotary.head_dim, rotary_dim=rotary.channels, layout=rotary.layout,
                           attention_factor=rotary.attention_factor, sections=rotary.sections)
        table = inv_freq if learned == "inv_freq" else _torch.tensor(rotary.inv_freq, dtype=_torch.float64)
        if learned == "slopes":
            return call("rotary+alibi", [table, slopes], spec)
        if isinstance(encoding, tuple):
            if not isinstance(encoding[1], (_grape.AlibiEncoding, AlibiSlopes)):
                return _kinds.refuse(q, k, v, encoding, options)
            return call("rotary+alibi", [table, _torch.tensor(encoding[1].slopes, dtype=_torch.float64)], spec)
        return call("rotary", [table], spec)
    if learned == "slopes":
        return call("alibi", [slopes])
    if isinstance(encoding, (_grape.AlibiEncoding, AlibiSlopes)):
        return call("alibi", [_torch.tensor(encoding.slopes, dtype=_torch.float64)])
    if isinstance(encoding, (_grape.T5Encoding, T5Buckets)) and (learned == "t5_table" or encoding.heads > 0):
        table = t5_table if learned == "t5_table" else _torch.tensor(
            encoding.table, dtype=_torch.float64).reshape(encoding.num_buckets, encoding.heads)
        return call("t5", [table], _kinds.Spec(t5_max_distance=encoding.max_distance,
                                                t5_bidirectional=encoding.bidirectional))
    if encoding is None:
        return call("none", [])
    if isinstance(encoding, (BuiltinSpec, _grape.BuiltinEncoding)):
        # A BuiltinSpec (torch.compile's plain values) is checked inside the op, by with_bias_params.
        if learned == "bias_params" and isinstance(encoding, _grape.BuiltinEncoding):
            count = len(encoding.bias_params)
            if count == 0 or tuple(bias_params.shape) != (count,):
                raise _grape.GrapeError(f"grape: attention: bias_params: must be [{count}] for this encoding's score "
                                        f"bias (got {list(bias_params.shape)})" if count else
                                        "grape: attention: bias_params: this encoding's score bias has no parameters")
        return call("builtin", [bias_params] if learned == "bias_params" else [],
                    _kinds.Spec(builtin=BuiltinSpec.of(encoding).json))
    if isinstance(encoding, T5Buckets):
        raise _grape.GrapeError("grape: encoding: these T5 buckets have no table (a config holds none): give "
                                "t5_table, or build one with grape.t5(table, ...)")
    return _kinds.refuse(q, k, v, encoding, options)


def _index_tensor(x):
    """Positions, offsets or cu_seqlens as an int64 tensor (None stays None)."""
    return None if x is None else _torch.as_tensor(_grape._index_array(x)).to(_torch.int64)


def _rotary_table(encoding):
    """A rotary encoding as a RotaryTable (the op's plain values), else None."""
    if isinstance(encoding, (RotaryTable, _grape.RotaryEncoding)):
        return RotaryTable.of(encoding)
    return None
