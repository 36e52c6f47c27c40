"""grape inside a Hugging Face transformers model: its rotary embedding and its apply-rotary step.

    import grape.hf
    grape.hf.patch(model)      # model.config's exact encoding, grape's kernel for Q and K
    ...
    grape.hf.unpatch(model)    # back to transformers' own code

What changes: the model's rotary module becomes grape's. It builds the encoding from model.config
with grape.from_config (the float32 table transformers computes, bit for bit, with the same table
switches: dynamic NTK's growth and reset, LongRoPE's short/long factors), and returns cos and sin
of the exact phase (float64 phase, rounded once) instead of float32 `inv_freq @ position_ids`,
whose angle error grows with the position. The modeling module's `apply_rotary_pos_emb` is wrapped
so that, for cos/sin that came from grape, Q and K are rotated by grape's kernel (grape.torch, so
gradients flow); any other call goes to transformers' function unchanged.

Families: Llama, Mistral, Qwen2, Qwen3, Gemma, Phi-3 (LongRoPE), GPT-NeoX (partial rotary) and
DeepSeek-V3 (interleaved pairs, apply_rotary_pos_emb_interleave). Tested with transformers 4.49 on
torch 1.13 (Qwen3 and DeepSeek-V3 are newer than 4.49) and transformers 5.25 on torch 2.15.
"""
import dataclasses as _dataclasses
import importlib as _importlib

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
