"""grape.torch.attention's machinery. A differentiable encoding is a kind and a list of tensors
(a rotary table, ALiBi slopes, a T5 table, FoX's gates, GRAPE-A's, GRAPE-AP's or contextual GRAPE-M's
tensors) plus plain values (`Spec`), so that on torch >= 2.4 the fused attention and its backward
are the torch custom ops grape::attention and grape::attention_backward (torch.compile keeps them
in its graph); on an older torch the same two functions run inside a torch.autograd.Function.
Every encoding grape.torch.attention takes is a kind ("builtin" for a grape.encoding(...) object,
"builtin_freq" for one whose rotation planes' frequencies are learned,
"rotary" with sections for M-RoPE); anything else gets grape.attention's own error (refuse)."""
import dataclasses as _dataclasses
import json as _json
from typing import List as _List, Optional as _Optional, Tuple as _Tuple

import torch as _torch

import grape as _grape
from grape import _attention

# The kinds whose first tensor is a frequency table: its gradient is the module's d_inv_freq, the
# others' the module's d_bias (in the order of the list).
_FREQUENCY_FIRST = ("rotary", "rotary+alibi", "grape_m", "builtin_freq")
KINDS = ("none", "builtin", "builtin_freq", "rotary", "alibi", "rotary+alibi", "t5", "fox", "grape_a", "grape_ap",
         "grape_m")


@_dataclasses.dataclass(frozen=True)
class Spec:
    """The plain values a kind needs besides its tensors: a rotary table's head dim, rotary dim
    (the channels turned), layout, attention factor and M-RoPE's sections; T5's max distance and
    direction; GRAPE-AP's norm epsilon; a built-in's name and parameters (BuiltinSpec.json)."""
    head_dim: int = 0
    rotary_dim: int = 0
    layout: str = "half_split"
    attention_factor: float = 1.0
    sections: tuple = ()
    t5_max_distance: int = 128
    t5_bidirectional: bool = True
    norm_eps: float = 1e-6
    builtin: str = ""

    def values(self):
        """In the ops' argument order (spelled out: torch.compile traces it, not dataclasses.astuple)."""
        return (self.head_dim, self.rotary_dim, self.layout, self.attention_factor, _sections_text(self.sections),
                self.t5_max_distance, self.t5_bidirectional, self.norm_eps, self.builtin)

    @staticmethod
    def of_values(head_dim, rotary_dim, layout, attention_factor, sections, t5_max_distance, t5_bidirectional, norm_eps,
                  builtin):
        """The Spec whose values() these are."""
        return Spec(head_dim, rotary_dim, layout, attention_factor, _sections_of(sections), t5_max_distance,
                    t5_bidirectional, norm_eps, builtin)


@_dataclasses.dataclass(frozen=True)
class BuiltinSpec:
    """A built-in encoding (grape.encoding(name, **params)) as plain values: its name and parameters
    as one JSON text (Python's float repr round-trips every float64). grape.torch.attention takes it
    where it takes the BuiltinEncoding; torch.compile traces it (not grape's C++ objects)."""
    json: str

    @staticmethod
    def of(encoding):
        if isinstance(encoding, BuiltinSpec):
            return encoding
        return BuiltinSpec(_json.dumps({"name": encoding.name, "params": encoding.params}, sort_keys=True))

    def encoding(self):
        """The grape.BuiltinEncoding these values describe."""
        from grape._load import encoding_named
        value = _json.loads(self.json)
        return encoding_named(value["name"], value["params"])


def _sections_text(sections):
    """M-RoPE's sections as the ops take them, "4,6,6" ("" for one axis): a str, one plain value to
    torch's custom-op autograd (a list of ints did not match the structure it wants back)."""
    return ",".join(str(int(n)) for n in sections)


def _sections_of(text):
    return tuple(int(n) for n in text.split(",")) if text else ()


def _float64(x):
    return x.detach().to(_torch.float64).cpu().contiguous().numpy()


def _module_arguments(kind, params, spec):
    """grape.attention's encoding and keyword arguments for a kind's tensors."""
    def rotary():  # grape.rotary checks the table's length against rotary_dim (a learned one too)
        table = _grape.rotary(_float64(params[0]).tolist(), head_dim=spec.head_dim, rotary_dim=spec.rotary_dim,
                              layout=spec.layout, attention_factor=spec.attention_factor)
        return table.with_sections(list(spec.sections)) if spec.sections else table

    def alibi(i):
        return _grape.alibi(slopes=_float64(params[i]).tolist())

    if kind == "none":
        return None, {}
    if kind == "builtin":  # with one tensor: its score bias's parameters (bias_params)
        encoding = BuiltinSpec(spec.builtin).encoding()
        return (encoding.with_bias_params(_float64(params[0]).tolist()) if params else encoding), {}
    if kind == "builtin_freq":  # its rotation planes' frequencies (inv_freq)
        return BuiltinSpec(spec.builtin).encoding().with_inv_freq(_float64(params[0]).tolist()), {}
    if kind == "rotary":
        return rotary(), {}
    if kind == "alibi":
        return alibi(0), {}
    if kind == "rotary+alibi":
        return (rotary(), alibi(1)), {}
    if kind == "t5":
        return _grape.t5(_float64(params[0]), spec.t5_max_distance, spec.t5_bidirectional), {}
    if kind == "fox":
        return None, {"log_forget": _float64(params[0])}
    if kind == "grape_a":
        return None, {"grape_a": tuple(_grape._float32(p) for p in params)}
    if kind == "grape_ap":
        return None, {"grape_ap": (_float64(params[0]), spec.norm_eps)}
    if kind == "grape_m":
        return None, {"grape_m": (_float64(params[0]), _float64(params[1]))}
    raise _grape.GrapeError(f"grape: attention: unknown encoding kind '{kind}' (one of {', '.join(KINDS)})")


def forward(q, k, v, kind, params, spec, options):
    """(out, lse) of the fused attention with the kind's encoding."""
    encoding, arrays = _module_arguments(kind, params, spec)
    return _grape.attention(q, k, v, encoding, return_lse=True, threads=_torch.get_num_threads(), **arrays, **options)


def backward(grad_out, q, k, v, out, lse, kind, params, spec, options, wanted):
    """[dq, dk, dv, one gradient per tensor of params] from the saved log-sum-exp; a tensor whose
    `wanted` is False gets zeros (the module is not asked for its gradient)."""
    encoding, arrays = _module_arguments(kind, params, spec)
    frequency_first = kind in _FREQUENCY_FIRST
    want_freq = frequency_first and wanted[0]
    want_bias = any(wanted[1:] if frequency_first else wanted)
    dq, dk, dv, d_bias, d_freq = _grape.attention_backward(
        grad_out.to(q.dtype).contiguous(), q, k, v, out, lse, encoding, bias_grad=want_bias,
        inv_freq_grad=want_freq, threads=_torch.get_num_threads(), **arrays, **options)
    grads = []
    flat_bias, at = _torch.tensor(d_bias or [], dtype=_torch.float64), 0
    for i, (p, want) in enumerate(zip(params, wanted)):
        if i == 0 and frequency_first:
            g = _torch.tensor(d_freq) if want_freq else None
        else:
            n = p.numel()
            g = flat_bias[at:at + n] if want_bias else None
            at += n
        # A copy: two views of flat_bias would alias each other, which torch's custom ops refuse.
        grads.append(_torch.zeros_like(p) if g is None else g.reshape(p.shape).to(p.dtype, copy=True))
    return [dq, dk, dv, *grads]


# grape.attention's options as the ops take them, in this order.
OPTIONS = ("positions", "offsets", "cu_seqlens", "key_positions", "key_offsets", "key_cu_seqlens", "causal", "window",
           "scale")


def _options(options):
    return dict(zip(OPTIONS, options))


HAVE_CUSTOM_OPS = hasattr(getattr(_torch, "library", None), "custom_op")

if HAVE_CUSTOM_OPS:
    _T = _torch.Tensor

    @_torch.library.custom_op("grape::attention", mutates_args=())
    def _attention_op(q: _T, k: _T, v: _T, kind: str, params: _List[_T], head_dim: int, rotary_dim: int, layout: str,
                      attention_factor: float, sections: str, t5_max_distance: int, t5_bidirectional: bool,
                      norm_eps: float, builtin: str, positions: _Optional[_T], offsets: _Optional[_T],
                      cu_seqlens: _Optional[_T], key_positions: _Optional[_T], key_offsets: _Optional[_T],
                      key_cu_seqlens: _Optional[_T], causal: bool, window: int,
                      scale: _Optional[float]) -> _Tuple[_T, _T]:
        spec = Spec.of_values(head_dim, rotary_dim, layout, attention_factor, sections, t5_max_distance,
                              t5_bidirectional, norm_eps, builtin)
        return forward(q, k, v, kind, params, spec, _options((positions, offsets, cu_seqlens, key_positions,
                                                              key_offsets, key_cu_seqlens, causal, window, scale)))

    @_attention_op.register_fake
    def _(q, k, v, kind, params, *rest):
        return (q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],)),
                q.new_empty((q.shape[-2], _attention._tokens(q)), dtype=_torch.float32))

    @_torch.library.custom_op("grape::attention_backward", mutates_args=())
    def _attention_backward_op(grad_out: _T, q: _T, k: _T, v: _T, out: _T, lse: _T, kind: str, params: _List[_T],
                               head_dim: int, rotary_dim: int, layout: str, attention_factor: float, sections: str,
                               t5_max_distance: int, t5_bidirectional: bool, norm_eps: float, builtin: str,
                               positions: _Optional[_T], offsets: _Optional[_T], cu_seqlens: _Optional[_T],
                               key_positions: _Optional[_T], key_offsets: _Optional[_T],
                               key_cu_seqlens: _Optional[_T], causal: bool, window: int, scale: _Optional[float],
                               wanted: _List[bool]) -> _List[_T]:
        spec = Spec.of_values(head_dim, rotary_dim, layout, attention_factor, sections, t5_max_distance,
                              t5_bidirectional, norm_eps, builtin)
        return backward(grad_out, q, k, v, out, lse, kind, params, spec,
                        _options((positions, offsets, cu_seqlens, key_positions, key_offsets, key_cu_seqlens, causal,
                                  window, scale)), wanted)

    @_attention_backward_op.register_fake
    def _(grad_out, q, k, v, out, lse, kind, params, *rest):
        return [x.new_empty(x.shape) for x in (q, k, v, *params)]

    def _setup_context(ctx, inputs, output):
        q, k, v, kind, params = inputs[:5]
        ctx.save_for_backward(q, k, v, *output, *params)
        ctx.meta = (kind, inputs[5:], [p.requires_grad for p in params])

    def _backward(ctx, grad_out, grad_lse):
        kind, rest, wanted = ctx.meta
        q, k, v, out, lse, *params = ctx.saved_tensors
        grads = _attention_backward_op(grad_out, q, k, v, out, lse, kind, params, *rest, wanted)
        return (*grads[:3], None, [g if w else None for g, w in zip(grads[3:], wanted)], *([None] * len(rest)))

    _attention_op.register_autograd(_backward, setup_context=_setup_context)


class _KindAttention(_torch.autograd.Function):
    """The same forward and backward as the custom ops, for a torch without torch.library.custom_op."""

    @staticmethod
    def forward(ctx, q, k, v, kind, spec, options, *params):
        out, lse = forward(q, k, v, kind, list(params), spec, _options(options))
        ctx.save_for_backward(q, k, v, out, lse, *params)
        ctx.meta = (kind, spec, options)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        kind, spec, options = ctx.meta
        q, k, v, out, lse, *params = ctx.saved_tensors
        wanted = list(ctx.needs_input_grad[6:])
        grads = backward(grad_out, q, k, v, out, lse, kind, params, spec, _options(options), wanted)
        return (*grads[:3], None, None, None, *(g if w else None for g, w in zip(grads[3:], wanted)))


def kind_attention(q, k, v, kind, params, spec, options):
    """The fused attention with a kind's encoding: the custom op where torch has them."""
    if HAVE_CUSTOM_OPS:
        return _attention_op(q, k, v, kind, list(params), *spec.values(), *options)[0]
    return _KindAttention.apply(q, k, v, kind, spec, options, *params)


def refuse(q, k, v, encoding, options):
    """An encoding that no kind describes: grape.attention's own one-line error for it."""
    _grape.attention(q, k, v, encoding, **options)
    raise _grape.GrapeError(f"grape: attention: encoding: {type(encoding).__name__} has no differentiable form here")
