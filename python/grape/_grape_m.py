"""GRAPE-M's learnable and contextual rotations, as the GRAPE paper's authors train them.

Plane j of a head turns by p * freqs[row, j]: freqs is [planes] (shared by every head) or
[key_heads, planes] (one row per key head; a query head uses its key head's row). p is the token's
integer position (positions / offsets / its index, as grape.rotate_qk takes them: non-contextual
GRAPE-M) or its real phase (contextual GRAPE-M, phases[t] = sum of omega over the tokens before t),
shaped like q's tokens ([batch, seq] or [tokens]) or with a last axis of key heads. Angles with
real phases are formed in float64, so a large phase keeps float32 accuracy. Sign: Hugging Face's
(y0 = x0 cos - x1 sin) by default; angle_sign=-1 turns by minus the angle, as the authors'
apply_rotary_emb does, so their trained parameters give their outputs (docs/grape-paper.md).
"""
import numpy as _np

from . import _grape
from ._grape import GrapeError


def _float64(x):
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().double().numpy()
    return _np.ascontiguousarray(_np.asarray(x, dtype=_np.float64))


def _freq_rows(freqs):
    f = _float64(freqs)
    if f.ndim == 1:
        return f[None, :]
    if f.ndim != 2:
        raise GrapeError("grape: freqs: must be [planes] or [key_heads, planes] (got %d dimensions)" % f.ndim)
    return f


def _tokens_shape(q, k):
    return tuple((q if q is not None else k).shape[:-2])


def _phase_rows(phases, q, k):
    """phases as float64 [rows, tokens], and whether it had a key-head axis."""
    if phases is None:
        return None, False
    p = _float64(phases)
    tokens = _tokens_shape(q, k)
    if p.shape == tokens:
        return p.reshape(1, -1), False
    if p.ndim == len(tokens) + 1 and p.shape[:-1] == tokens:
        return _np.ascontiguousarray(_np.moveaxis(p, -1, 0).reshape(p.shape[-1], -1)), True
    raise GrapeError("grape: phases: must be shaped like q's tokens %s, or that plus a key-head axis (got %s)"
                     % (tokens, tuple(p.shape)))


def _outputs(q, k, out):
    from . import _empty_like
    if out is not None:
        return out
    return (None if q is None else _empty_like(q)), (None if k is None else _empty_like(k))


def _index(x):
    from . import _index_array
    return _index_array(x)


def _rotate(q, k, freqs, phases, positions, offsets, cu_seqlens, max_position, layout, angle_sign, threads, out,
            backward):
    q_out, k_out = _outputs(q, k, out)
    rows, _ = _phase_rows(phases, q, k)
    _grape._grape_m_rotate_qk(q, q_out, k, k_out, _freq_rows(freqs), rows, _index(positions), _index(offsets),
                              _index(cu_seqlens), max_position, layout, angle_sign, threads, backward)
    return q_out, k_out


def grape_m_rotate_qk(q, k, freqs, phases=None, positions=None, offsets=None, cu_seqlens=None, max_position=None,
                      layout="half_split", angle_sign=1, threads=0, out=None):
    """Rotates q and k ([tokens, heads, dim] or [batch, seq, heads, dim], float32/float16/bfloat16) by
    GRAPE-M's angles: freqs [planes] or [key_heads, planes] (2 * planes <= head_dim; the rest pass
    through), and either integer positions (positions / offsets / none, as grape.rotate_qk) or real
    phases. angle_sign: 1, or -1 for the authors' sign. Returns (q_out, k_out); out=(q_out, k_out)
    writes there (may be q and k)."""
    return _rotate(q, k, freqs, phases, positions, offsets, cu_seqlens, max_position, layout, angle_sign, threads,
                   out, False)


def grape_m_rotate_qk_backward(grad_q, grad_k, freqs, phases=None, positions=None, offsets=None, cu_seqlens=None,
                               layout="half_split", angle_sign=1, threads=0, out=None):
    """dL/dq and dL/dk from dL/d(rotated q and k): the rotation by minus the angle."""
    return _rotate(grad_q, grad_k, freqs, phases, positions, offsets, cu_seqlens, None, layout, angle_sign, threads,
                   out, True)


def _param_grad_arrays(freqs, phases, q, k):
    """The kernels' float64 inputs and outputs of the parameter gradients: (freqs as given, its rows,
    phase rows or None, whether phases had a key-head axis, d_freqs, d_phases or None)."""
    given = _float64(freqs)
    rows = _freq_rows(given)
    phase_rows, per_head = _phase_rows(phases, q, k)
    d_phases = None if phase_rows is None else _np.empty_like(phase_rows)
    return given, rows, phase_rows, per_head, _np.empty_like(rows), d_phases


def _shaped_param_grads(given, per_head, d_freqs, d_phases, q, k):
    """d_freqs shaped like freqs, d_phases like phases."""
    d_freqs = d_freqs.reshape(given.shape)
    if d_phases is not None:
        tokens = _tokens_shape(q, k)
        d_phases = (_np.moveaxis(d_phases.reshape((d_phases.shape[0],) + tokens), 0, -1) if per_head
                    else d_phases.reshape(tokens))
    return d_freqs, d_phases


def grape_m_param_grads(q, k, grad_q, grad_k, freqs, phases=None, positions=None, offsets=None, cu_seqlens=None,
                        layout="half_split", angle_sign=1, threads=0):
    """(dL/dfreqs, dL/dphases) as float64 NumPy arrays shaped like freqs and phases (None without
    phases): q and k are the forward inputs, grad_q and grad_k dL/d(rotated q and k). Summed over
    tokens and heads in float64."""
    given, rows, phase_rows, per_head, d_freqs, d_phases = _param_grad_arrays(freqs, phases, q, k)
    _grape._grape_m_param_grads(q, grad_q, k, grad_k, rows, phase_rows, _index(positions), _index(offsets),
                                _index(cu_seqlens), layout, angle_sign, threads, d_freqs, d_phases)
    return _shaped_param_grads(given, per_head, d_freqs, d_phases, q, k)


def grape_m_rotate_qk_backward_with_grads(grad_q, grad_k, rotated_q, rotated_k, freqs, phases=None, positions=None,
                                          offsets=None, cu_seqlens=None, layout="half_split", angle_sign=1,
                                          threads=0, out=None):
    """grape_m_rotate_qk_backward and grape_m_param_grads in one pass, from the forward's outputs
    rotated_q and rotated_k (laid out like grad_q and grad_k) instead of its inputs: one cos/sin
    table per token and head serves both. Returns (dq, dk, dL/dfreqs, dL/dphases), the last two as
    grape_m_param_grads gives them. Precision: the parameter gradients use the stored outputs, so
    give float32 ones (float16/bfloat16 outputs carry their rounding into them; grape_m_param_grads
    with the inputs does not)."""
    dq, dk = _outputs(grad_q, grad_k, out)
    given, rows, phase_rows, per_head, d_freqs, d_phases = _param_grad_arrays(freqs, phases, grad_q, grad_k)
    _grape._grape_m_backward_with_grads(grad_q, dq, grad_k, dk, rotated_q, rotated_k, rows, phase_rows,
                                        _index(positions), _index(offsets), _index(cu_seqlens), layout, angle_sign,
                                        threads, d_freqs, d_phases)
    return (dq, dk) + _shaped_param_grads(given, per_head, d_freqs, d_phases, grad_q, grad_k)
