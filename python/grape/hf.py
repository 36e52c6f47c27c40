"""grape inside a Hugging Face transformers model: its rotary embedding, its apply-rotary step, and its attention.

    import grape.hf
    grape.hf.patch(model)      # model.config's exact encoding, grape's kernel for Q and K
    ...
    grape.hf.unpatch(model)    # back to transformers' own code

    grape.hf.register()        # attn_implementation="grape" becomes known to transformers
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="grape")
    grape.hf.set_attention(model, "grape")   # or switch a built model (back: "sdpa", "eager")

    grape.hf.swap_encoding(model, "grape_a")  # RoPE out, gated GRAPE-A in (or "none", "alibi", "fox",
                                              # "grape_a_qk"), new parameters on every attention module

What patch changes: the model's rotary module becomes grape's. It builds the encoding from model.config
with grape.from_config (the float32 table transformers computes, bit for bit, with the same table
switches: dynamic NTK's growth and reset, LongRoPE's short/long factors), and returns cos and sin
of the exact phase (float64 phase, rounded once) instead of float32 `inv_freq @ position_ids`,
whose angle error grows with the position. The modeling module's `apply_rotary_pos_emb` is wrapped
so that, for cos/sin that came from grape, Q and K are rotated by grape's kernel (grape.torch, so
gradients flow); any other call goes to transformers' function unchanged.

Families: Llama, Mistral, Qwen2, Qwen3, Gemma, Phi-3 (LongRoPE), GPT-NeoX (partial rotary) and
DeepSeek-V3 (interleaved pairs, apply_rotary_pos_emb_interleave). Tested with transformers 4.49 on
torch 1.13 (Qwen3 and DeepSeek-V3 are newer than 4.49) and transformers 5.25 on torch 2.15.

What the attention does: transformers' attention function (Q, K, V in SDPA's [batch, heads, seq,
dim], K and V possibly from the KV cache and longer than Q) runs grape.torch.attention, causal,
bottom-right aligned, GQA without repeating K and V. The padding comes out of the causal mask the
model passes (transformers' 4-D mask, checked to be causal plus padding): the valid tokens of each
row are packed into sequences of their own (cu_seqlens), so no T x T mask reaches the kernel, and
padded queries' outputs are zero. A generation step (up to 8 new tokens a row, no gradient) runs
grape's decode kernel on the cache where it lies instead. BLOOM and MPT, whose attention modules add
their ALiBi themselves and do not dispatch, get a forward with the slopes inside the kernel.
"""
import dataclasses as _dataclasses
import importlib as _importlib
import inspect as _inspect
import types as _types
import weakref as _weakref

import torch as _torch

import grape as _grape
import grape.torch as _grape_torch

_SUPPORTED = ("llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "gpt_neox", "deepseek_v3")

# modeling module -> [{name: transformers' apply step}, number of patched models using it]
_wrapped_modules = {}


class GrapeRotaryEmbedding(_torch.nn.Module):
    """Stands in for a transformers rotary module: same forward(x, position_ids) -> (cos, sin)."""

    def __init__(self, original, config):
        super().__init__()
        self.original = original
        self.config_dict = config.to_dict()
        # transformers 4 says rope_scaling, transformers 5 rope_parameters
        scaling = getattr(config, "rope_scaling", None) or getattr(config, "rope_parameters", None) or {}
        self.rope_type = scaling.get("rope_type", scaling.get("type", "default"))
        self.max_position_embeddings = config.max_position_embeddings
        # dynamic NTK: transformers keeps the longest length seen and resets below the original.
        self.max_seq_len_cached = config.max_position_embeddings
        self.original_max_seq_len = config.max_position_embeddings
        # LongRoPE: long factors once a sequence is longer than the original context.
        self.original_max_position_embeddings = getattr(
            config, "original_max_position_embeddings", config.max_position_embeddings)
        self._encodings = {}
        # A config grape refuses fails here, at patch time, with grape's one-line message.
        self.encoding(self.original_max_position_embeddings if self.rope_type == "longrope"
                      else self.max_position_embeddings)

    def table_length(self, position_ids):
        """The sequence length transformers would evaluate its table at for these positions."""
        seq_len = int(position_ids.max()) + 1
        if "dynamic" in self.rope_type:
            if seq_len > self.max_seq_len_cached:
                self.max_seq_len_cached = seq_len
            if seq_len < self.original_max_seq_len < self.max_seq_len_cached:
                self.max_seq_len_cached = self.original_max_seq_len
            return self.max_seq_len_cached
        if self.rope_type == "longrope":
            orig = self.original_max_position_embeddings
            return orig + 1 if seq_len > orig else orig
        return self.max_position_embeddings

    def encoding(self, seq_len):
        enc = self._encodings.get(seq_len)
        if enc is None:
            enc = _grape.from_config(self.config_dict, seq_len=seq_len)
            self._encodings[seq_len] = enc
        return enc

    @_torch.no_grad()
    def forward(self, x, position_ids):
        enc = self.encoding(self.table_length(position_ids))
        inv_freq = _torch.tensor(enc.inv_freq, dtype=_torch.float64, device=position_ids.device)
        # m·θ in float64 (exact below m = 2^29 for a float32 θ), cos and sin rounded once to x.dtype.
        phase = position_ids.to(_torch.float64)[..., None] * inv_freq
        phase = _torch.cat((phase, phase), dim=-1)
        cos = (phase.cos() * enc.attention_factor).to(x.dtype)
        sin = (phase.sin() * enc.attention_factor).to(x.dtype)
        cos._grape = sin._grape = (enc, position_ids)
        return cos, sin


_kernel_encodings = {}


def _kernel_encoding(enc, head_dim, layout):
    """enc as the apply step sees the tensors: its table for head_dim channels in this layout."""
    if enc.head_dim == head_dim and enc.layout == layout:
        return enc
    key = (id(enc), head_dim, layout)
    hit = _kernel_encodings.get(key)
    if hit is None or hit[0] is not enc:
        table = _grape_torch.RotaryTable.of(enc)
        hit = (enc, _dataclasses.replace(table, head_dim=head_dim, layout=layout).encoding())
        _kernel_encodings[key] = hit
    return hit[1]


def _grape_apply(original, interleaved):
    """transformers' apply step, with grape's kernel for grape's cos/sin. interleaved: DeepSeek's
    apply_rotary_pos_emb_interleave, which rotates pairs (2i, 2i + 1) and returns the rotated
    pairs' first members, then their second members (the half-split order)."""
    def apply(q, k, cos, sin, *args, **kwargs):
        tag = getattr(cos, "_grape", None)
        if tag is None or args or kwargs.get("unsqueeze_dim", 1) != 1 or q.device.type != "cpu":
            return original(q, k, cos, sin, *args, **kwargs)
        enc, pos = tag
        # position_ids [batch, seq] (left padding: a row each), or one row for every batch element:
        # [1, seq] (transformers' cache_position.unsqueeze(0) when none are passed) or [seq].
        rows = pos.reshape(-1, pos.shape[-1])
        if rows.shape[0] == 1:
            rows = rows.expand(q.shape[0], -1)
        if rows.shape != (q.shape[0], q.shape[2]):
            return original(q, k, cos, sin, *args, **kwargs)  # transformers says what does not broadcast
        enc = _kernel_encoding(enc, q.shape[-1], "interleaved" if interleaved else "half_split")
        positions = rows.reshape(-1).to(_torch.int64).contiguous()
        # transformers' [batch, heads, seq, dim] as grape's [batch, seq, heads, dim] (a view).
        q_rot, k_rot = _grape_torch.rotate_qk(q.transpose(1, 2), k.transpose(1, 2), enc,
                                              positions=positions)
        q_rot, k_rot = q_rot.transpose(1, 2), k_rot.transpose(1, 2)
        if interleaved:
            q_rot = _torch.cat([q_rot[..., 0::2], q_rot[..., 1::2]], dim=-1)
            k_rot = _torch.cat([k_rot[..., 0::2], k_rot[..., 1::2]], dim=-1)
        return q_rot, k_rot

    apply.__wrapped__ = original
    return apply


_APPLY_STEPS = (("apply_rotary_pos_emb", False), ("apply_rotary_pos_emb_interleave", True))


def _rotary_owner(model):
    """The submodule holding the model's shared rotary embedding, and the modeling module."""
    model_type = getattr(model.config, "model_type", None)
    if model_type not in _SUPPORTED:
        raise _grape.GrapeError("grape: hf.patch: model_type %r is not supported (supported: %s)"
                                % (model_type, ", ".join(_SUPPORTED)))
    # transformers keeps one rotary module, shared by all layers, on the base model.
    for module in model.modules():
        if isinstance(getattr(module, "rotary_emb", None), _torch.nn.Module):
            return module, _importlib.import_module(type(model).__module__)
    raise _grape.GrapeError("grape: hf.patch: no rotary_emb found in %s" % type(model).__name__)


def patch(model):
    """Replace model's rotary embedding and apply step with grape's; returns the model."""
    owner, modeling = _rotary_owner(model)
    if isinstance(owner.rotary_emb, GrapeRotaryEmbedding):
        return model
    owner.rotary_emb = GrapeRotaryEmbedding(owner.rotary_emb, model.config)
    entry = _wrapped_modules.get(modeling.__name__)
    if entry is None:
        originals = {name: getattr(modeling, name) for name, _ in _APPLY_STEPS if hasattr(modeling, name)}
        for name, interleaved in _APPLY_STEPS:
            if name in originals:
                setattr(modeling, name, _grape_apply(originals[name], interleaved))
        entry = [originals, 0]
        _wrapped_modules[modeling.__name__] = entry
    entry[1] += 1
    return model


def unpatch(model):
    """Restore transformers' rotary embedding (and, with no patched model left, its apply step)."""
    owner, modeling = _rotary_owner(model)
    if not isinstance(owner.rotary_emb, GrapeRotaryEmbedding):
        return model
    owner.rotary_emb = owner.rotary_emb.original
    entry = _wrapped_modules[modeling.__name__]
    entry[1] -= 1
    if entry[1] == 0:
        for name, original in entry[0].items():
            setattr(modeling, name, original)
        del _wrapped_modules[modeling.__name__]
    return model


def is_patched(model):
    owner, _ = _rotary_owner(model)
    return isinstance(owner.rotary_emb, GrapeRotaryEmbedding)


# ---- Attention: attn_implementation="grape" ----

ATTENTION = "grape"


def register():
    """Make attn_implementation="grape" known to transformers (the functional attention interface of
    transformers 4.49 and later); calling it again changes nothing. Returns "grape"."""
    from transformers import modeling_utils
    interface = getattr(modeling_utils, "AttentionInterface", None)
    if interface is None:  # 4.49: a plain dict that from_config's check also reads
        modeling_utils.ALL_ATTENTION_FUNCTIONS[ATTENTION] = attention
        return ATTENTION
    interface.register(ATTENTION, attention)
    try:
        from transformers import masking_utils
    except ImportError:  # no mask interface: the model builds its own 4-D mask, as 4.49's do
        return ATTENTION
    # Without a mask function of its own an implementation gets no mask at all (padding dropped);
    # SDPA's gives None where there is no padding and the boolean 4-D mask where there is.
    masking_utils.AttentionMaskInterface.register(ATTENTION, masking_utils.sdpa_mask)
    return ATTENTION


def set_attention(model, implementation=ATTENTION):
    """Run model's attention through `implementation` ("grape", or one of transformers' names such
    as "sdpa" or "eager" to go back); returns the model. For BLOOM, "grape" replaces its attention
    modules' forward and "eager" restores it; for MPT too."""
    if not isinstance(implementation, str):
        raise _grape.GrapeError("grape: set_attention: implementation must be a name such as 'grape', "
                                "'sdpa' or 'eager' (got %r)" % (implementation,))
    if implementation == ATTENTION:
        register()
    if getattr(model.config, "model_type", None) == "bloom":
        return _set_bloom_attention(model, implementation)
    if getattr(model.config, "model_type", None) == "mpt":
        return _set_mpt_attention(model, implementation)
    if hasattr(model, "set_attn_implementation"):  # transformers 5: checks the name, sets every sub-config
        model.set_attn_implementation(implementation)
        return model
    # 4.49: every module reads self.config._attn_implementation when it runs.
    from transformers import modeling_utils
    if implementation != "eager" and implementation not in modeling_utils.ALL_ATTENTION_FUNCTIONS:
        raise _grape.GrapeError("grape: set_attention: implementation %r is not one of transformers' (%s)"
                                % (implementation, ", ".join(["eager", *modeling_utils.ALL_ATTENTION_FUNCTIONS])))
    for config in {id(m.config): m.config for m in model.modules() if hasattr(m, "config")}.values():
        config._attn_implementation = implementation
    return model


def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' attention function for attn_implementation="grape": query [batch, heads, Tq, d],
    key and value [batch, kv_heads, Tk, d] (Tk >= Tq with a KV cache), attention_mask None or the
    model's 4-D mask. Returns ([batch, Tq, heads, d], None) as transformers' sdpa function does."""
    if dropout:
        raise _grape.GrapeError("grape: attention: dropout %g is not supported (set the config's "
                                "attention_dropout to 0)" % dropout)
    for name in ("sliding_window", "softcap"):
        if kwargs.get(name) is not None:
            raise _grape.GrapeError("grape: attention: %s=%r is not supported" % (name, kwargs[name]))
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if not causal:
        raise _grape.GrapeError("grape: attention: is_causal: only causal attention is supported")
    swapped = getattr(module, "grape_encoding", None)
    if isinstance(swapped, PythonBiasEncoding):
        return _python_bias_attention(swapped.bias, query, key, value, attention_mask, scaling), None
    if isinstance(swapped, SwappedEncoding):
        return _swapped_attention(module, swapped, query, key, value, attention_mask, scaling), None
    return causal_attention(query, key, value, attention_mask, scaling), None


def causal_attention(query, key, value, attention_mask, scale, **encoding):
    """grape.torch.attention on SDPA's layout with transformers' causal mask: query [batch, heads,
    Tq, d], key and value [batch, kv_heads, Tk, d], queries the last Tq of the Tk tokens; the mask None
    (no padding) or [batch, 1, Tq, >= Tk], boolean (True: attend) or additive (0 or the dtype's
    minimum / -inf). `encoding`: grape.torch.attention's encoding arguments (e.g. slopes=). Returns
    [batch, Tq, heads, d]; a padded query's row is zero."""
    batch, heads, q_len, dim = query.shape
    k_len = key.shape[2]
    if k_len < q_len:
        raise _grape.GrapeError("grape: attention: key: %d keys for %d queries; the queries must be the "
                                "last of the keys' tokens" % (k_len, q_len))
    packing = _valid_tokens(attention_mask, batch, q_len, k_len)
    if q_len <= _DECODE_QUERIES and q_len < k_len:
        out = _decode_step(query, key, value, packing, scale, encoding)
        if out is not None:
            return out
    device = query.device
    if packing is None:
        # Every token real: one batched call, the queries at the last Tq of the Tk positions.
        where = {} if q_len == k_len else dict(
            positions=_torch.arange(k_len - q_len, k_len, device=device).repeat(batch),
            key_positions=_torch.arange(k_len, device=device).repeat(batch))
        out = _grape_torch.attention(query, key, value, causal=True, scale=scale, layout="bhtd", **where, **encoding)
        return out.transpose(1, 2)
    q_rows, q_cols, k_rows, k_cols, cu_seqlens, key_cu_seqlens, positions, key_positions = packing
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))  # [batch, seq, heads, d] views
    packed = _grape_torch.attention(
        q[q_rows, q_cols], k[k_rows, k_cols], v[k_rows, k_cols], causal=True, scale=scale, cu_seqlens=cu_seqlens,
        key_cu_seqlens=key_cu_seqlens, positions=positions, key_positions=key_positions, **encoding)
    return packed.new_zeros(batch, q_len, heads, dim).index_put((q_rows, q_cols), packed)


# A step of up to this many new tokens per row against a cache goes to the decode kernel, a
# sequence per query: each query reads the cache once, where the fused kernel copies and packs it
# once per call. At 8 new tokens the two tie on 512 cached tokens; on 2048 the decode kernel takes
# a third of the time (docs/python.md).
_DECODE_QUERIES = 8


def _decode_step(query, key, value, packing, scale, encoding):
    """New tokens against transformers' cache [batch, kv_heads, Tk, d] (Tq <= _DECODE_QUERIES, the
    last of each row's tokens) on grape's decode kernel, which reads the cache where it lies, as one
    HND page per row, each query a sequence of its own: the general path would copy and pack every
    cached key and value at every step (20x the time at Tk = 2048 and one new token). None where the
    general path must run: gradients wanted, an encoding other than ALiBi's slopes (and those only
    for one new token), or a padding _decode_calls does not take."""
    if set(encoding) - {"slopes"} or query.device.type != "cpu":
        return None
    if _torch.is_grad_enabled() and any(x.requires_grad for x in (query, key, value)):
        return None
    batch, heads, q_len, _ = query.shape
    slopes = encoding.get("slopes")
    if slopes is not None and q_len > 1:
        return None
    calls = _decode_calls(packing, batch, q_len, key.shape[2], slopes is not None)
    if calls is None:
        return None
    alibi = None if slopes is None else _grape.alibi(slopes=[float(s) for s in slopes])
    q = query.transpose(1, 2).reshape(batch * q_len, heads, query.shape[3]).contiguous()  # [queries, heads, d]
    k, v = key.contiguous(), value.contiguous()

    def decode(rows, block_table, seq_lens, q_positions, window):
        return _grape.attention_decode(q if rows is None else q[rows], k, v, block_table, seq_lens, alibi,
                                       q_positions=q_positions, layout="HND", window=window, scale=scale,
                                       threads=_torch.get_num_threads())

    if calls[0][0] is None:  # every query in one call
        return decode(*calls[0]).reshape(batch, q_len, heads, value.shape[-1])
    out = query.new_empty(batch, 1, heads, value.shape[-1])
    for call in calls:
        out[call[0], 0] = decode(*call)
    return out


# Every layer of a step gets the same packing: its decode calls, kept for the next layer.
_last_calls = [None, None, None]  # packing, (batch, Tq, Tk, by_padding), calls


def _decode_calls(packing, batch, q_len, k_len, by_padding):
    """The decode kernel's calls for a step: [(rows or None for all, block_table, seq_lens, q_positions,
    window)], query i of row b the sequence b·Tq + i, on the cache's row b with keys up to its own
    (Tk - Tq + i + 1 of them); None where a query is padding or a row's real keys are not the last of
    its tokens. A row with p pads sees keys from p through its window, so the kernel reads no pad.
    Without an encoding every query goes in one call, placed at p + Tk - 1 with a window of Tk, which
    leaves it keys [p, its own]; the positions enter nothing else. With ALiBi (by_padding, one query
    per row) the query stays at Tk - 1, its window the row's real keys, one call per padding: placed
    at p + Tk - 1 its bias would move by -slope * p along the row, which the softmax ignores but
    float32 does not (the logits of the keys that matter would round to the ulp of slope * p)."""
    state = (batch, q_len, k_len, by_padding)
    if _last_calls[0] is packing and _last_calls[1] == state:
        return _last_calls[2]
    seq_lens = _torch.arange(k_len - q_len + 1, k_len + 1).repeat(batch)  # each query's keys end at its own
    table = _torch.arange(batch, dtype=_torch.int32).repeat_interleave(q_len)[:, None]
    calls = [(None, table, seq_lens, None, 0)]
    if packing is not None:
        q_rows, _, k_rows, k_cols, _, key_cu_seqlens, _, _ = packing
        pads = k_len - key_cu_seqlens.diff()  # each row's first real key
        if q_rows.numel() != batch * q_len or not bool((k_cols >= pads[k_rows]).all()):
            calls = None
        elif not by_padding:
            calls = [(None, table, seq_lens, pads.repeat_interleave(q_len) + (k_len - 1), k_len)]
        else:
            calls = []
            for p in pads.unique().tolist():
                rows = (pads == p).nonzero()[:, 0]
                every = len(rows) == batch
                calls.append((None if every else rows, table if every else table[rows], seq_lens[rows], None,
                              k_len - p))
    _last_calls[:] = [packing, state, calls]
    return calls


def _packing(query_valid, key_valid):
    """None when every token is real; else each row's real tokens as one packed sequence: the
    (row, column) indices of the real queries and keys, cu_seqlens of both, and their positions
    0..n-1 within the row (what transformers counts with cumsum(mask) - 1), the queries the last ones
    (bottom-right aligned)."""
    if query_valid.all() and key_valid.all():
        return None
    q_len, k_len = query_valid.shape[1], key_valid.shape[1]
    rank = key_valid.long().cumsum(1) - 1
    q_rows, q_cols = query_valid.nonzero(as_tuple=True)
    k_rows, k_cols = key_valid.nonzero(as_tuple=True)
    return (q_rows, q_cols, k_rows, k_cols, _starts(query_valid), _starts(key_valid),
            rank[q_rows, q_cols + (k_len - q_len)], rank[k_rows, k_cols])


def _starts(valid):
    """cu_seqlens [batch + 1] of the rows' valid tokens."""
    return _torch.nn.functional.pad(valid.sum(1).cumsum(0), (1, 0))


# Every layer of a forward gets the same mask tensor: its reading, kept for the next layer.
_last_reading = [None, None, None]  # weak reference to the mask, (its version, Tq, Tk), reading


def _valid_tokens(attention_mask, batch, q_len, k_len):
    """_packing of _read_mask, once per mask tensor (while it is unchanged) and call shape."""
    if attention_mask is None:
        return None
    ref, key, reading = _last_reading
    now = (attention_mask._version, batch, q_len, k_len)
    if ref is not None and ref() is attention_mask and key == now:
        return reading
    reading = _packing(*_read_mask(attention_mask, batch, q_len, k_len))
    _last_reading[:] = [_weakref.ref(attention_mask), now, reading]
    return reading


def _read_mask(attention_mask, batch, q_len, k_len):
    """(query_valid [batch, Tq], key_valid [batch, Tk]) read from a causal 4-D mask.

    The mask transformers passes (4.49's additive one, 5's boolean one) is causal plus padding: a
    valid query sees its own key and the valid keys before it, and the last valid query of a row sees
    every valid key. That is what is read; the whole mask is then compared with the one those tokens
    make, so that a mask of another shape (a sliding window, packed sequences, a static cache's
    columns) is refused instead of being run as causal plus padding."""
    shape = tuple(attention_mask.shape)
    if len(shape) != 4 or shape[0] not in (1, batch) or shape[1] != 1 or shape[2] != q_len or shape[3] < k_len:
        raise _grape.GrapeError("grape: attention: attention_mask must be [batch, 1, %d, >= %d] (got %s)"
                                % (q_len, k_len, list(shape)))
    mask = attention_mask[:, 0, :, :k_len]
    if mask.dtype == _torch.bool:
        seen = mask
    else:
        seen = mask == 0
        if not (seen | (mask <= _torch.finfo(mask.dtype).min)).all():
            raise _grape.GrapeError("grape: attention: attention_mask holds values other than 0 and -inf "
                                    "(a bias, not a mask)")
    seen = seen.expand(batch, q_len, k_len)
    device = seen.device
    query_cols = _torch.arange(k_len - q_len, k_len, device=device)
    query_valid = seen[:, _torch.arange(q_len, device=device), query_cols]
    # A row none of whose queries is valid, yet whose mask sees keys, has its queries elsewhere than at
    # the end of the keys: a static cache's empty last slots. Read as padding it would give zeros.
    if bool((seen.any(2).any(1) & ~query_valid.any(1)).any()):
        raise _grape.GrapeError("grape: attention: attention_mask: the queries are not the last of the keys' "
                                "tokens (a static cache's empty slots?); grape runs transformers' growing cache")
    if q_len == 1:  # one query, the last token: what its row sees is the row's keys, nothing to compare
        return query_valid, seen[:, 0] & query_valid
    last = _torch.where(query_valid, _torch.arange(q_len, device=device), _torch.full_like(query_cols, -1)).amax(1)
    key_valid = seen[_torch.arange(batch, device=device), last.clamp(min=0)] & (last >= 0)[:, None]
    causal = _torch.arange(k_len, device=device)[None, :] <= query_cols[:, None]
    expected = key_valid[:, None, :] & causal[None]
    # Padded queries' rows are not read (grape leaves them zero), valid ones must be exactly expected.
    if not (((seen == expected) | ~query_valid[:, :, None]).all() and _torch.equal(query_valid, key_valid[:, k_len - q_len:])):
        raise _grape.GrapeError("grape: attention: attention_mask is not causal plus padding (a sliding window, "
                                "packed sequences or a static cache?); grape runs only that mask")
    return query_valid, key_valid


# ---- BLOOM: ALiBi added by its attention module, which does not dispatch ----

def _bloom_slopes(module, device):
    """BLOOM's slopes as transformers computes them (float32), read off its alibi at position 1."""
    slopes = getattr(module, "_grape_slopes", None)
    if slopes is None or slopes.device != device:
        build = _importlib.import_module(type(module).__module__).build_alibi_tensor
        slopes = build(_torch.ones(1, 2, device=device), module.num_heads, _torch.float32).reshape(-1, 2)[:, 1]
        module._grape_slopes = slopes
    return slopes


def _bloom_forward(self, hidden_states, residual, alibi, attention_mask, layer_past=None, **kwargs):
    """BloomAttention.forward with the attention in grape's kernel. BLOOM's bias is slope * (key's
    position), positions counted by cumsum(attention_mask) - 1; in a query's row that is ALiBi's
    -slope * (query - key) plus a constant, which the softmax does not see. So the packed valid
    tokens at positions 0..n-1 with the same slopes give BLOOM's attention."""
    if kwargs.get("output_attentions") or kwargs.get("head_mask") is not None:
        return type(self).forward(self, hidden_states, residual, alibi, attention_mask, layer_past, **kwargs)
    if self.training and self.attention_dropout.p:
        raise _grape.GrapeError("grape: attention: dropout %g is not supported (set the config's "
                                "attention_dropout to 0)" % self.attention_dropout.p)
    modeling = _importlib.import_module(type(self).__module__)
    batch, q_len, _ = hidden_states.shape
    query, key, value = self._reshape(self.query_key_value(hidden_states))
    if layer_past is not None:
        # 4.49 passes cache_position to its cache; 5 passes nothing.
        extra = ({"cache_position": kwargs.get("cache_position")},) if "cache_position" in kwargs else ()
        key, value = layer_past.update(key, value, self.layer_idx, *extra)
    context = causal_attention(query, key, value, attention_mask, self.inv_norm_factor,
                               slopes=_bloom_slopes(self, query.device))
    context = context.reshape(batch, q_len, self.hidden_size)
    if self.pretraining_tp > 1 and self.slow_but_exact:
        step = self.hidden_size / self.pretraining_tp
        output = _torch.zeros_like(context)
        for i in range(self.pretraining_tp):
            output = output + _torch.nn.functional.linear(context[:, :, int(i * step):int((i + 1) * step)],
                                                          self.dense.weight[:, int(i * step):int((i + 1) * step)])
    else:
        output = self.dense(context)
    output = modeling.dropout_add(output, residual, self.hidden_dropout, self.training)
    # 4.49 returns (output, cache), 5 returns (output, attention weights).
    return (output, layer_past) if _returns_cache(type(self)) else (output, None)


def _returns_cache(attention_class):
    """Whether this transformers' BloomAttention returns (output, cache) (4.49, whose forward takes a
    head_mask) or (output, attention weights) (5)."""
    return "head_mask" in _inspect.signature(attention_class.forward).parameters


def _set_bloom_attention(model, implementation):
    if implementation not in (ATTENTION, "eager"):
        raise _grape.GrapeError("grape: set_attention: BLOOM runs 'grape' or its own 'eager' attention "
                                "(got %r)" % implementation)
    for module in model.modules():
        if type(module).__name__ == "BloomAttention":
            if implementation == ATTENTION:
                module.forward = _types.MethodType(_bloom_forward, module)
            else:
                module.__dict__.pop("forward", None)
    return model


# ---- MPT: ALiBi added by its attention module, which does not dispatch ----

def _mpt_slopes(position_bias):
    """MPT's slopes as transformers computed them: its bias is slope * (key - last key), float32, so
    the next-to-last column of the [heads, 1, max_seq_len] bias the model passes is -slope."""
    return -position_bias[:, 0, -2]


# Every layer of a forward gets the same boolean mask (True: masked); its inverse, kept for the next layer.
_mpt_last_mask = [None, None, None]  # weak reference to the mask, its version, ~mask


def _mpt_attending(attention_mask):
    """MPT's mask (True where transformers masks) as the boolean mask causal_attention reads (True: seen)."""
    if attention_mask is None:
        return None
    ref, version, inverse = _mpt_last_mask
    if ref is not None and ref() is attention_mask and version == attention_mask._version:
        return inverse
    inverse = ~attention_mask.bool()
    _mpt_last_mask[:] = [_weakref.ref(attention_mask), attention_mask._version, inverse]
    return inverse


def _mpt_forward(self, hidden_states, position_bias, past_key_value=None, attention_mask=None, cache=None,
                 **kwargs):
    """MptAttention.forward with the attention in grape's kernel: MPT's bias, slope * (key column - last
    key column) whatever the padding, is ALiBi's -slope * (query - key) plus a per-row constant the
    softmax ignores, so the packed valid tokens with the slopes give MPT's attention."""
    # 4.49 passes a tuple cache as past_key_value, 5 a Cache as cache.
    past = cache if cache is not None else kwargs.pop("past_key_values", past_key_value)
    if getattr(self, "_grape_output_attentions", False):  # the weights are asked for: transformers computes them
        return type(self).forward(self, hidden_states, position_bias, past, attention_mask, **kwargs)
    if self.training and self.attn_dropout_p:
        raise _grape.GrapeError("grape: attention: dropout %g is not supported (set the config's "
                                "attn_config.attn_pdrop to 0)" % self.attn_dropout_p)
    batch, q_len = hidden_states.shape[:2]
    mixed = self.Wqkv(hidden_states)
    if self.clip_qkv:
        mixed = mixed.clamp(min=-self.clip_qkv, max=self.clip_qkv)
    query, key, value = (x.reshape(batch, q_len, self.n_heads, self.head_dim).transpose(1, 2)
                         for x in mixed.chunk(3, dim=2))
    returns_cache = _mpt_returns_cache(type(self))
    if hasattr(past, "update"):
        key, value = past.update(key, value, self.layer_idx, kwargs=kwargs)
    elif past is not None and len(past) != 0:
        key, value = _torch.cat([past[0], key], dim=2), _torch.cat([past[1], value], dim=2)
    slopes = {}
    if position_bias is not None:
        need = max(2, key.shape[2])
        if position_bias.dim() != 3 or position_bias.shape[-1] < need:
            raise _grape.GrapeError("grape: attention: MPT's position_bias must be [heads, 1, >= %d] (got %s; "
                                    "more tokens than max_seq_len?)" % (need, list(position_bias.shape)))
        slopes = {"slopes": _mpt_slopes(position_bias)}
    context = causal_attention(query, key, value, _mpt_attending(attention_mask), self.softmax_scale, **slopes)
    output = self.out_proj(context.reshape(batch, q_len, self.hidden_size))
    # 4.49 returns (output, weights, cache), 5 (output, weights).
    return (output, None, (key, value)) if returns_cache else (output, None)


def _mpt_returns_cache(attention_class):
    """Whether this transformers' MptAttention returns (output, weights, cache) (4.49, whose forward
    takes past_key_value) or (output, weights) (5)."""
    return "past_key_value" in _inspect.signature(attention_class.forward).parameters


def _mpt_block_forward(self, *args, **kwargs):
    """MptBlock.forward, telling its attention whether output_attentions asks for the weights (the
    block does not pass it on)."""
    bound = _inspect.signature(type(self).forward).bind(self, *args, **kwargs)
    self.attn._grape_output_attentions = bool(bound.arguments.get("output_attentions"))
    try:
        return type(self).forward(self, *args, **kwargs)
    finally:
        self.attn._grape_output_attentions = False


def _set_mpt_attention(model, implementation):
    if implementation not in (ATTENTION, "eager"):
        raise _grape.GrapeError("grape: set_attention: MPT runs 'grape' or its own 'eager' attention "
                                "(got %r)" % implementation)
    for module in model.modules():
        if type(module).__name__ in ("MptAttention", "MptBlock"):
            if implementation == ATTENTION:
                grape_forward = _mpt_forward if type(module).__name__ == "MptAttention" else _mpt_block_forward
                module.forward = _types.MethodType(grape_forward, module)
            else:
                module.__dict__.pop("forward", None)
    return model


# ---- Swapping the position encoding: NoPE, ALiBi, FoX, gated GRAPE-A ----

_SWAP_FAMILIES = ("llama", "mistral", "qwen2")
ENCODINGS = ("none", "alibi", "fox", "grape_a", "grape_a_qk", "grape_m", "grape_m_contextual")
_ALIASES = {"nope": "none"}


class IdentityRotaryEmbedding(_torch.nn.Module):
    """Stands in for a swapped model's rotary module: cos 1 and sin 0, so that transformers' apply step
    returns Q and K unchanged (q·1 + rotate_half(q)·0 is q exactly) without touching its code."""

    def __init__(self, original):
        super().__init__()
        self.original = original

    @_torch.no_grad()
    def forward(self, x, position_ids):
        # One channel broadcasts over head_dim in the apply step; the cache ignores cos and sin.
        shape = (*position_ids.shape, 1)
        return (_torch.ones(shape, dtype=x.dtype, device=x.device),
                _torch.zeros(shape, dtype=x.dtype, device=x.device))


class SwappedEncoding(_torch.nn.Module):
    """An encoding swapped into one attention layer: its learnable parameters, and the encoding
    arguments of grape.torch.attention for a call's tokens."""
    kind = None

    def __init__(self, heads, head_dim, hidden_size):
        super().__init__()
        self.heads, self.head_dim, self.hidden_size = heads, head_dim, hidden_size

    def extra_repr(self):
        return "%s, heads=%d, head_dim=%d" % (self.kind, self.heads, self.head_dim)

    def token_values(self, module, query, key):
        """(name, [batch, heads, Tk] key-side values, [batch, heads, Tq] query-side values or None,
        fixed arguments): the per-token arrays this encoding reads; name None when it reads none."""
        return None, None, None, {}


class NoEncoding(SwappedEncoding):
    """NoPE: no position encoding at all (causal attention alone)."""
    kind = "none"


class LearnedAlibi(SwappedEncoding):
    """ALiBi with learnable slopes, initialised to the ALiBi paper's slopes for the head count."""
    kind = "alibi"

    def __init__(self, heads, head_dim, hidden_size):
        super().__init__(heads, head_dim, hidden_size)
        self.slopes = _torch.nn.Parameter(_torch.tensor(_grape.alibi_slopes(heads), dtype=_torch.float32))

    def token_values(self, module, query, key):
        return None, None, None, {"slopes": self.slopes}


def _values_with_cache(encoding, module, query, key, name, what, compute):
    """Per-token values computed from the layer's input x, [batch, rows, Tk]: those of this call's
    tokens from compute(x), preceded by those of the tokens already in the KV cache, which cannot be
    recomputed (the cache holds K and V, not x) and are kept in encoding._history per cache object,
    as the cache keeps K and V."""
    hidden, cache = getattr(module, "_grape_call", (None, None))
    if hidden is None:
        raise _grape.GrapeError("grape: swap_encoding: %s: the layer input is unknown (the attention module was "
                                "called other than through its forward)" % name)
    new = compute(hidden)
    past = key.shape[2] - query.shape[2]
    ref, stored = encoding._history
    if past:
        if stored is None or ref is None or ref() is not cache or stored.shape[2] != past:
            raise _grape.GrapeError("grape: swap_encoding: %s: the %s of the %d cached tokens are unknown (a cache "
                                    "this layer did not fill)" % (name, what, past))
        new = _torch.cat([stored, new], dim=2)
    if cache is not None:
        try:
            encoding._history = (_weakref.ref(cache), new.detach())
        except TypeError:
            encoding._history = (None, None)
    return new


class ForgetGate(SwappedEncoding):
    """FoX: log_forget = logsigmoid(x·w_f + b_f) per head from the layer's input x, torch's default
    nn.Linear initialisation. The gates of tokens already in the KV cache cannot be recomputed (the
    cache holds K and V, not x), so they are kept per cache object, as the cache keeps K and V."""
    kind = "fox"

    def __init__(self, heads, head_dim, hidden_size):
        super().__init__(heads, head_dim, hidden_size)
        self.proj = _torch.nn.Linear(hidden_size, heads)
        self._history = (None, None)  # weak reference to the KV cache, its tokens' log gates (detached)

    def token_values(self, module, query, key):
        new = _values_with_cache(self, module, query, key, "fox", "forget gates", lambda hidden: (
            _torch.nn.functional.logsigmoid(self.proj(hidden.to(self.proj.weight.dtype))).transpose(1, 2)))
        return "log_forget", new, None, {}


class GatedGrapeA(SwappedEncoding):
    """The GRAPE paper's gated GRAPE-A: bias −(i − j)·ω_h·(g_k(j) [+ g_q(i)]), ω_h = softplus(ω̃_h)·slope_h,
    g = softplus(û_hᵀk/√D) with û = u/‖u‖ (and v for the query gates), computed in float32 from K (and Q)
    as the authors' code does; ω̃ starts where softplus gives 1, u and v from N(0, 1/D)."""
    kind = "grape_a"

    def __init__(self, heads, head_dim, hidden_size, query_gated=False):
        super().__init__(heads, head_dim, hidden_size)
        self.register_buffer("slope", _torch.tensor(_grape.alibi_slopes(heads), dtype=_torch.float32))
        self.omega_logit = _torch.nn.Parameter(_torch.full((heads,), _inverse_softplus_of_one()))
        self.u = _torch.nn.Parameter(_torch.randn(heads, head_dim) * head_dim ** -0.5)
        if query_gated:
            self.kind = "grape_a_qk"
            self.v = _torch.nn.Parameter(_torch.randn(heads, head_dim) * head_dim ** -0.5)
        else:
            self.v = None

    def _gates(self, x, direction):
        """softplus(d̂_hᵀx/√D) for every query head h: x [batch, x_heads, T, D] (a KV head serves
        heads / x_heads query heads), returns [batch, heads, T] float32."""
        unit = _torch.nn.functional.normalize(direction, dim=-1, eps=1e-6)
        x = x.to(_torch.float32).repeat_interleave(self.heads // x.shape[1], dim=1)
        return _torch.nn.functional.softplus(_torch.einsum("bhtd,hd->bht", x, unit) * self.head_dim ** -0.5)

    def token_values(self, module, query, key):
        # The gates come from K, which the cache holds: cached tokens' gates are recomputed from it.
        omega = _torch.nn.functional.softplus(self.omega_logit) * self.slope
        query_gates = None if self.v is None else self._gates(query, self.v)
        return "grape_a", self._gates(key, self.u), query_gates, {"omega": omega}


class LearnedFrequencies(SwappedEncoding):
    """The GRAPE paper's GRAPE-M with learnable frequencies ("non-contextual"): plane j turns by
    t·θ_j with θ = exp(log_freq / s), one row shared by the heads, the model's own RoPE table (its
    rotary module's inv_freq, any schedule) at initialisation, s = 1 (the authors' default
    log_freq_scale)."""
    kind = "grape_m"

    def __init__(self, heads, head_dim, hidden_size, inv_freq):
        super().__init__(heads, head_dim, hidden_size)
        self.log_freq = _torch.nn.Parameter(inv_freq.detach().double().log())

    def token_values(self, module, query, key):
        # The rotary encoding names the layout and head_dim; the table itself is inv_freq, differentiable.
        # Made per call: a module holding it could not be deep-copied or pickled.
        inv_freq = self.log_freq.exp()
        rope = _grape.rotary(inv_freq.detach().cpu().numpy(), head_dim=self.head_dim)
        return None, None, None, {"encoding": rope, "inv_freq": inv_freq}


class ContextualPhases(SwappedEncoding):
    """The GRAPE paper's contextual GRAPE-M: ω_t = sigmoid(x_t·w + b)/16 from the layer's input x (one
    sequence shared by the heads), Φ_t = Σ_{τ<t} ω_τ over the row's real tokens, plane j turned by
    Φ_t·θ_j with θ = exp(log_freq) from the model's own RoPE table. As for FoX, the increments of
    tokens already in the KV cache are kept per cache object (the cache holds K and V, not x)."""
    kind = "grape_m_contextual"
    rate_divisor = 16.0  # the authors' sigmoid(·)/16

    def __init__(self, heads, head_dim, hidden_size, inv_freq):
        super().__init__(heads, head_dim, hidden_size)
        self.proj = _torch.nn.Linear(hidden_size, 1)
        self.log_freq = _torch.nn.Parameter(inv_freq.detach().double().log())
        self._history = (None, None)  # weak reference to the KV cache, its tokens' increments (detached)

    def token_values(self, module, query, key):
        new = _values_with_cache(self, module, query, key, "grape_m_contextual", "phase increments", lambda hidden: (
            _torch.sigmoid(self.proj(hidden.to(self.proj.weight.dtype))) / self.rate_divisor).transpose(1, 2))
        return "grape_m", new, None, {"freqs": self.log_freq.exp()}


class PythonBiasEncoding(SwappedEncoding):
    """A score bias written in Python (grape.python_bias) in place of RoPE: its fn sees each row's real
    tokens at their positions 0..n-1, through grape's tiled Python attention; its params, when they
    are nn.Parameters, are registered here (shared by every layer given the same bias)."""
    kind = "python_bias"

    def __init__(self, bias):
        super().__init__(0, 0, 0)
        self.bias = bias
        for i, p in enumerate(bias.params):
            if isinstance(p, _torch.nn.Parameter):
                self.register_parameter("param%d" % i, p)

    def extra_repr(self):
        return "python_bias %r" % (self.bias.name,)


def _inverse_softplus_of_one():
    """ω̃ with softplus(ω̃) = 1, the authors' initial value."""
    import math
    return math.log(math.e - 1.0)


_SWAP_CLASSES = {"none": NoEncoding, "alibi": LearnedAlibi, "fox": ForgetGate, "grape_a": GatedGrapeA,
                 "grape_a_qk": lambda h, d, c: GatedGrapeA(h, d, c, query_gated=True)}


def _attention_modules(model):
    """The model's self-attention modules (those with k_proj and a layer index)."""
    return [m for m in model.modules() if hasattr(m, "k_proj") and hasattr(m, "layer_idx") and hasattr(m, "head_dim")]


def swap_encoding(model, encoding):
    """Replace a Llama-family model's RoPE by `encoding` ("none", "alibi", "fox", "grape_a",
    "grape_a_qk", "grape_m" or "grape_m_contextual"; or a grape.python_bias, or a function of the layer index giving one), run inside
    grape's fused attention (a Python bias: its tiled Python attention, row by row): the rotary module turns nothing, every attention
    module gets a `grape_encoding` submodule with the new parameters, and attention becomes "grape".
    Returns the model."""
    python_bias = isinstance(encoding, _grape.PythonBias) or (callable(encoding) and not isinstance(encoding, str))
    name = _ALIASES.get(encoding, encoding) if isinstance(encoding, str) else encoding
    if not python_bias and name not in ENCODINGS:
        raise _grape.GrapeError("grape: swap_encoding: encoding must be one of %s, a grape.python_bias or a "
                                "function of the layer index giving one (got %r)" % (", ".join(ENCODINGS), encoding))
    model_type = getattr(model.config, "model_type", None)
    if model_type not in _SWAP_FAMILIES:
        raise _grape.GrapeError("grape: swap_encoding: model_type %r is not supported (supported: %s)"
                                % (model_type, ", ".join(_SWAP_FAMILIES)))
    owner, _ = _rotary_owner(model)
    if isinstance(owner.rotary_emb, (GrapeRotaryEmbedding, IdentityRotaryEmbedding)):
        raise _grape.GrapeError("grape: swap_encoding: model already has grape's rotary or a swapped encoding "
                                "(grape.hf.unpatch it first)")
    config = model.config
    modules = _attention_modules(model)
    if not modules:
        raise _grape.GrapeError("grape: swap_encoding: no attention modules found in %s" % type(model).__name__)
    set_attention(model, ATTENTION)
    owner.rotary_emb = IdentityRotaryEmbedding(owner.rotary_emb)
    for module in modules:
        param = next(module.parameters())
        if python_bias:
            bias = encoding if isinstance(encoding, _grape.PythonBias) else encoding(module.layer_idx)
            if not isinstance(bias, _grape.PythonBias):
                raise _grape.GrapeError("grape: swap_encoding: encoding(%d) must give a grape.python_bias (got %s)"
                                        % (module.layer_idx, type(bias).__name__))
            swapped = PythonBiasEncoding(bias)
        elif name in ("grape_m", "grape_m_contextual"):
            kind = LearnedFrequencies if name == "grape_m" else ContextualPhases
            swapped = kind(config.num_attention_heads, module.head_dim, config.hidden_size,
                           owner.rotary_emb.original.inv_freq)
        else:
            swapped = _SWAP_CLASSES[name](config.num_attention_heads, module.head_dim, config.hidden_size)
        module.grape_encoding = swapped.to(param.device)
        module.forward = _types.MethodType(_swapped_forward, module)
    return model


def _swapped_forward(self, *args, **kwargs):
    """The attention module's own forward, with its input and KV cache kept for the encoding (FoX's
    gates are computed from the input) and a check that the attention runs through grape."""
    if self.config._attn_implementation != ATTENTION:
        raise _grape.GrapeError("grape: swap_encoding: the swapped encoding runs only in attn_implementation "
                                "'grape' (the model is set to %r)" % self.config._attn_implementation)
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    cache = next((kwargs[n] for n in ("cache", "past_key_value", "past_key_values") if kwargs.get(n) is not None), None)
    self._grape_call = (hidden, cache)
    try:
        return type(self).forward(self, *args, **kwargs)
    finally:
        self._grape_call = None


def _swapped_attention(module, swapped, query, key, value, attention_mask, scale):
    """causal_attention with a swapped encoding: every row's valid tokens packed as a sequence of its
    own, and the per-token values laid out [heads, batch·Tk] with row b's valid tokens at b·Tk + 0..n-1
    (their positions within the row), which positions and key_positions index: the kernel then reads
    each row's own values, and pads, left out, contribute nothing to any distance or path sum."""
    batch, heads, q_len, dim = query.shape
    k_len = key.shape[2]
    if k_len < q_len:
        raise _grape.GrapeError("grape: attention: key: %d keys for %d queries; the queries must be the "
                                "last of the keys' tokens" % (k_len, q_len))
    packing = _valid_tokens(attention_mask, batch, q_len, k_len) or _all_tokens(batch, q_len, k_len, query.device)
    q_rows, q_cols, k_rows, k_cols, cu_seqlens, key_cu_seqlens, positions, key_positions = packing
    q_at = q_rows * k_len + positions
    k_at = k_rows * k_len + key_positions
    name, key_values, query_values, fixed = swapped.token_values(module, query, key)
    encoding = dict(fixed)

    def laid_out(values, rows, cols, at):
        """values[b, :, col] of the given tokens as a [heads, batch·Tk] array, each at its index `at`."""
        picked = values[rows, :, cols].t()  # [heads, tokens]
        return picked.new_zeros(picked.shape[0], batch * k_len).index_copy(1, at, picked)

    if name == "log_forget":
        encoding["log_forget"] = laid_out(key_values, k_rows, k_cols, k_at)
    elif name == "grape_a":
        gates = (laid_out(key_values, k_rows, k_cols, k_at),)
        if query_values is not None:
            gates += (laid_out(query_values, q_rows, q_cols, q_at),)
        encoding = {"grape_a": (encoding["omega"],) + gates}
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))  # [batch, seq, heads, d] views
    q, k, v = q[q_rows, q_cols], k[k_rows, k_cols], v[k_rows, k_cols]
    if name == "grape_m":
        # Φ: the exclusive running sum of the increments over each row's real tokens, which sit at
        # b·Tk + 0..n−1 with zeros after them, so a running sum along each row's block is the row's own.
        # Q and K are turned here: with keys on tokens of their own the kernel takes no phase rotation.
        rates = laid_out(key_values, k_rows, k_cols, k_at).to(_torch.float64).reshape(batch, k_len)
        phases = (rates.cumsum(-1) - rates).reshape(-1)
        freqs = encoding.pop("freqs")
        q = _grape_torch.grape_m_rotate_qk(q, q, freqs, phases[q_at])[0]
        k = _grape_torch.grape_m_rotate_qk(k, k, freqs, phases[k_at])[1]
    packed = _grape_torch.attention(
        q, k, v, causal=True, scale=scale, cu_seqlens=cu_seqlens,
        key_cu_seqlens=key_cu_seqlens, positions=q_at, key_positions=k_at, **encoding)
    return packed.new_zeros(batch, q_len, heads, dim).index_put((q_rows, q_cols), packed)


def _python_bias_attention(bias, query, key, value, attention_mask, scale):
    """A Python bias through grape's tiled attention, one row at a time on its real tokens (the
    queries the last of its keys, positions 0..n-1 within the row): fn sees true positions, so a
    bias that is not relative is exact too. Padded queries' rows are zero."""
    batch, heads, q_len, dim = query.shape
    k_len = key.shape[2]
    if k_len < q_len:
        raise _grape.GrapeError("grape: attention: key: %d keys for %d queries; the queries must be the "
                                "last of the keys' tokens" % (k_len, q_len))
    packing = _valid_tokens(attention_mask, batch, q_len, k_len) or _all_tokens(batch, q_len, k_len, query.device)
    q_rows, q_cols, k_rows, k_cols = packing[:4]
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))  # [batch, seq, heads, d] views
    out = q.new_zeros(batch, q_len, heads, dim)
    for b in range(batch):
        qc, kc = q_cols[q_rows == b], k_cols[k_rows == b]
        if len(qc):
            rows = _grape_torch.attention(q[b, qc][None], k[b, kc][None], v[b, kc][None], encoding=bias,
                                          causal=True, scale=scale)[0]
            out = out.index_put((_torch.full_like(qc, b), qc), rows)
    return out


def _all_tokens(batch, q_len, k_len, device):
    """_packing's result when every token is real."""
    rows = _torch.arange(batch, device=device)
    q_cols = _torch.arange(q_len, device=device).repeat(batch)
    k_cols = _torch.arange(k_len, device=device).repeat(batch)
    return (rows.repeat_interleave(q_len), q_cols, rows.repeat_interleave(k_len), k_cols,
            rows.new_tensor(range(0, (batch + 1) * q_len, q_len)) if batch else rows.new_zeros(1),
            rows.new_tensor(range(0, (batch + 1) * k_len, k_len)) if batch else rows.new_zeros(1),
            q_cols + (k_len - q_len), k_cols)
