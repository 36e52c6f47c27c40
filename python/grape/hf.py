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

Families: Llama, Mistral, Qwen2, Gemma, Phi-3 (LongRoPE) and GPT-NeoX (partial rotary), all with
rotate_half (half-split) weights, as transformers stores them. Tested with transformers 4.49.
"""
import importlib as _importlib

import torch as _torch

import grape as _grape
import grape.torch as _grape_torch

_SUPPORTED = ("llama", "mistral", "qwen2", "gemma", "phi3", "gpt_neox")

# modeling module -> [transformers' apply_rotary_pos_emb, number of patched models using it]
_wrapped_modules = {}


class GrapeRotaryEmbedding(_torch.nn.Module):
    """Stands in for a transformers rotary module: same forward(x, position_ids) -> (cos, sin)."""

    def __init__(self, original, config):
        super().__init__()
        self.original = original
        self.config_dict = config.to_dict()
        scaling = getattr(config, "rope_scaling", None) or {}
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
        # position (< 2^53) times a float32 θ is exact in float64; one rounding to x.dtype.
        phase = position_ids.to(_torch.float64)[..., None] * inv_freq
        phase = _torch.cat((phase, phase), dim=-1)
        cos = (phase.cos() * enc.attention_factor).to(x.dtype)
        sin = (phase.sin() * enc.attention_factor).to(x.dtype)
        cos._grape = sin._grape = (enc, position_ids)
        return cos, sin


def _grape_apply(original):
    def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        tag = getattr(cos, "_grape", None)
        if tag is None or unsqueeze_dim != 1 or q.device.type != "cpu":
            return original(q, k, cos, sin, position_ids, unsqueeze_dim)
        enc, pos = tag
        positions = pos.reshape(-1).to(_torch.int64).contiguous()
        # transformers' [batch, heads, seq, dim] as grape's [batch, seq, heads, dim] (a view).
        q_rot, k_rot = _grape_torch.rotate_qk(q.transpose(1, 2), k.transpose(1, 2), enc,
                                              positions=positions)
        return q_rot.transpose(1, 2), k_rot.transpose(1, 2)

    apply_rotary_pos_emb.__wrapped__ = original
    return apply_rotary_pos_emb


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
        entry = [modeling.apply_rotary_pos_emb, 0]
        modeling.apply_rotary_pos_emb = _grape_apply(entry[0])
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
        modeling.apply_rotary_pos_emb = entry[0]
        del _wrapped_modules[modeling.__name__]
    return model


def is_patched(model):
    owner, _ = _rotary_owner(model)
    return isinstance(owner.rotary_emb, GrapeRotaryEmbedding)
