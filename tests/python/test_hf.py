"""grape.hf.patch on real transformers models built from configs (random weights, nothing downloaded).

Short positions: the patched model's logits equal the unpatched ones to float32 tolerance, for
batches as transformers runs them (one row of positions for every batch element, a row each, left
padding), and so do the gradients of a batched loss.
Positions near 10^6: the patched float32 model agrees with a float64 computation of the same model
(same float32 θ table, phase and rotation in float64) where transformers' float32 one does not.
"""
import copy
import importlib
import inspect
import json
import pathlib

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

import grape  # noqa: E402
import grape.hf  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

COMMON = dict(vocab_size=97, hidden_size=128, intermediate_size=160, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=4096)


def llama(**kw):
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**COMMON, "num_key_value_heads": 2, **kw}))


def longrope_factors(n, seed):
    g = np.random.default_rng(seed)
    return dict(type="longrope", short_factor=list(1 + g.random(n)), long_factor=list(1 + 20 * g.random(n)))


MODELS = {
    "llama-default": lambda: llama(rope_theta=10000.0),
    "llama-linear": lambda: llama(rope_scaling={"rope_type": "linear", "factor": 4.0}),
    "llama-dynamic": lambda: llama(max_position_embeddings=2048,
                                   rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    "llama-yarn": lambda: llama(rope_theta=1e6, rope_scaling={"rope_type": "yarn", "factor": 4.0}),
    "llama-llama3": lambda: llama(rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 1024}),
    "mistral": lambda: transformers.MistralForCausalLM(
        transformers.MistralConfig(**COMMON, num_key_value_heads=1, rope_theta=1e6, sliding_window=None)),
    "qwen2": lambda: transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**COMMON, num_key_value_heads=2)),
    "qwen2-yarn": lambda: transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        **COMMON, num_key_value_heads=2, rope_scaling={"type": "yarn", "factor": 4.0})),
    "gemma": lambda: transformers.GemmaForCausalLM(
        transformers.GemmaConfig(**COMMON, num_key_value_heads=1, head_dim=64)),
    "phi3-longrope": lambda: transformers.Phi3ForCausalLM(transformers.Phi3Config(
        **{**COMMON, "max_position_embeddings": 8192}, original_max_position_embeddings=2048,
        rope_scaling=longrope_factors(16, 3), pad_token_id=0)),
    "gpt_neox-partial": lambda: transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=97, hidden_size=128, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=4096, rotary_pct=0.25)),
}
# Newer than transformers 4.49, the last release for torch 1.13: run where the installed one has them.
if hasattr(transformers, "Qwen3ForCausalLM"):
    MODELS["qwen3"] = lambda: transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        **COMMON, num_key_value_heads=2, head_dim=32))
if hasattr(transformers, "DeepseekV3ForCausalLM"):
    MODELS["deepseek_v3-yarn"] = lambda: transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(
        **COMMON, num_key_value_heads=4, moe_intermediate_size=64, n_routed_experts=4, num_experts_per_tok=2,
        n_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=2, q_lora_rank=64, kv_lora_rank=32,
        qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, head_dim=16, rope_interleave=True,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                      "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}))


def rope_type_of(config):
    scaling = getattr(config, "rope_scaling", None) or getattr(config, "rope_parameters", None) or {}
    return scaling.get("rope_type", scaling.get("type", "default"))


def transformers_table(config, seq_len=None):
    """θ as transformers computes it: its rope function for the scaled types, its rotary module's
    buffer for the default one (transformers 5 keeps that computation in the module)."""
    rope_type = rope_type_of(config)
    if rope_type == "default":
        import importlib
        modeling = importlib.import_module("transformers.models.%s.modeling_%s" % (config.model_type, config.model_type))
        rotary = next(getattr(modeling, n) for n in dir(modeling) if n.endswith("RotaryEmbedding"))
        return rotary(config=config).inv_freq.numpy(), 1.0
    if rope_type == "dynamic" and seq_len is not None:
        seq_len = torch.tensor(seq_len)  # as transformers' forward passes it
    inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    return inv_freq.numpy(), factor


class Float64Rotary(torch.nn.Module):
    """cos/sin in float64 from the model's own float32 θ table and table switches (the original
    module runs first, for dynamic NTK's and LongRoPE's updates)."""

    def __init__(self, original):
        super().__init__()
        self.original = original

    @torch.no_grad()
    def forward(self, x, position_ids):
        self.original(x.float(), position_ids)
        inv_freq = self.original.inv_freq.to(torch.float64)
        phase = position_ids.to(torch.float64)[..., None] * inv_freq
        phase = torch.cat((phase, phase), dim=-1)
        scale = self.original.attention_scaling
        return (phase.cos() * scale).to(x.dtype), (phase.sin() * scale).to(x.dtype)


def build(name):
    torch.manual_seed(0)
    return MODELS[name]().eval()


def logits(model, ids, start):
    position_ids = torch.arange(start, start + ids.shape[1]).expand(ids.shape[0], -1)
    with torch.no_grad():
        return model(input_ids=ids, position_ids=position_ids).logits.double()


def float64_model(model):
    m64 = copy.deepcopy(model).double()
    owner = next(mod for mod in m64.modules() if isinstance(getattr(mod, "rotary_emb", None), torch.nn.Module))
    owner.rotary_emb = Float64Rotary(owner.rotary_emb)
    return m64


IDS = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_patched_logits_match_transformers_below_4k(name):
    model = build(name)
    starts = (0, 3000) if name != "phi3-longrope" else (0, 1500, 3000)  # short and long factors
    plain = [logits(model, IDS, s) for s in starts]
    grape.hf.patch(model)
    assert grape.hf.is_patched(model)
    patched = [logits(model, IDS, s) for s in starts]
    grape.hf.unpatch(model)
    assert not grape.hf.is_patched(model)
    for s, a, b in zip(starts, plain, patched):
        err = (a - b).abs().max().item()
        print("%s start %d: max |patched - transformers| = %.2e" % (name, s, err))
        assert err < 2e-4 * (1 + a.abs().max().item()), (s, err)
    # unpatch restores transformers' own computation, bit for bit
    assert torch.equal(logits(model, IDS, starts[-1]).float(), plain[-1].float())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_patched_logits_follow_float64_near_a_million(name):
    model = build(name)
    start = 1_000_000 - IDS.shape[1]
    reference = logits(float64_model(model), IDS, start)
    plain_err = (logits(model, IDS, start) - reference).abs().max().item()
    grape.hf.patch(model)
    grape_err = (logits(model, IDS, start) - reference).abs().max().item()
    grape.hf.unpatch(model)
    scale = reference.abs().max().item()
    print("%s at 10^6: max error vs float64: grape %.2e, transformers float32 %.2e (logits up to %.2f)"
          % (name, grape_err, plain_err, scale))
    assert grape_err < 1e-4 * (1 + scale)
    assert plain_err > 10 * grape_err


@pytest.mark.parametrize("name", sorted(MODELS))
def test_grape_table_is_transformers_table_bit_for_bit(name):
    model = build(name)
    config = model.config
    rope_type = rope_type_of(config)
    for seq_len in (None, 3000, 100_000):
        want, factor = transformers_table(config, seq_len)
        enc = grape.from_config(config.to_dict(), seq_len=seq_len if seq_len else
                                config.max_position_embeddings if rope_type != "longrope" else
                                config.original_max_position_embeddings)
        got = np.asarray(enc.inv_freq)
        assert np.array_equal(got.astype(np.float32), want), (seq_len, got, want)
        assert np.array_equal(got, got.astype(np.float32).astype(np.float64))
        assert enc.attention_factor == pytest.approx(factor, rel=1e-12)


BUNDLED = ["codellama-7b", "falcon-7b", "gemma-2b", "gpt-neox-20b", "llama-2-7b", "llama-3.1-8b",
           "mistral-7b-v0.1", "qwen2.5-7b-instruct-yarn", "synthetic-longrope"]


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_config_tables_are_transformers_tables_bit_for_bit(name):
    path = pathlib.Path(__file__).parents[2] / "examples" / "configs" / name / "config.json"
    d = json.loads(path.read_text())
    config = transformers.AutoConfig.for_model(**d)
    rope_type = rope_type_of(config)
    want, _ = transformers_table(config)
    seq_len = getattr(config, "original_max_position_embeddings", None) if rope_type == "longrope" else None
    got = np.asarray(grape.from_config(path, seq_len=seq_len).inv_freq)
    assert np.array_equal(got.astype(np.float32), want)
    # the formulas' float64 table is another table: it differs in some plane
    f64 = np.asarray(grape.from_config(path, seq_len=seq_len, precision="float64").inv_freq)
    assert not np.array_equal(f64, got)


def test_patched_bfloat16_model_stays_with_the_float32_one():
    model = build("llama-llama3")
    reference = logits(model, IDS, 3000)
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    plain_err = (logits(bf16, IDS, 3000) - reference).abs().max().item()
    grape.hf.patch(bf16)
    grape_err = (logits(bf16, IDS, 3000) - reference).abs().max().item()
    grape.hf.unpatch(bf16)
    print("bfloat16 llama3 at 3000: max error vs float32: grape %.2e, transformers %.2e" % (grape_err, plain_err))
    assert np.isfinite(grape_err) and grape_err < 0.05 * (1 + reference.abs().max().item())
    assert grape_err < 2 * plain_err  # rotation in float32, one rounding: no worse than transformers'


@pytest.mark.parametrize("name", sorted(MODELS))
def test_patch_runs_grapes_kernel_once_per_layer(name, monkeypatch):
    calls = []
    rotate = grape.hf._grape_torch.rotate_qk
    monkeypatch.setattr(grape.hf._grape_torch, "rotate_qk", lambda *a, **kw: calls.append(1) or rotate(*a, **kw))
    model = build(name)
    grape.hf.patch(model)
    logits(model, IDS, 5)
    grape.hf.unpatch(model)
    logits(model, IDS, 5)
    assert len(calls) == model.config.num_hidden_layers


def left_padded(ids, pads):
    """An attention mask with pads[b] padding tokens in front of row b, and the position ids
    transformers' generate() gives it (cumulative sum of the mask minus one, 1 on the padding)."""
    mask = torch.ones_like(ids)
    for b, n in enumerate(pads):
        mask[b, :n] = 0
    return mask, (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)


def batch_logits(model, how):
    """Logits of IDS (two rows) as transformers is called with a batch: no position_ids (one row
    [1, seq] for every batch element, from cache_position), position_ids [batch, seq] with a row per
    element, or left padding (an attention mask and generate()'s position ids; the padded positions'
    logits are left out)."""
    with torch.no_grad():
        if how == "no position_ids":
            return model(input_ids=IDS).logits.double()
        if how == "position_ids per row":
            return model(input_ids=IDS, position_ids=torch.stack([torch.arange(12), torch.arange(500, 512)])).logits.double()
        mask, position_ids = left_padded(IDS, [0, 5])
        out = model(input_ids=IDS, attention_mask=mask, position_ids=position_ids).logits.double()
        return out[mask.bool()]


@pytest.mark.parametrize("how", ["no position_ids", "position_ids per row", "left padding"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_patched_batch_of_two_matches_transformers(name, how):
    model = build(name)
    plain = batch_logits(model, how)
    grape.hf.patch(model)
    patched = batch_logits(model, how)
    grape.hf.unpatch(model)
    err = (patched - plain).abs().max().item()
    assert err < 2e-4 * (1 + plain.abs().max().item()), err


@pytest.mark.parametrize("name", sorted(MODELS))
def test_patched_batch_trains_like_transformers(name):
    """The gradient of a batched loss (two rows, no position_ids) reaches every parameter as in the
    unpatched model."""
    def grads(model):
        model.zero_grad()
        model(input_ids=IDS).logits.square().mean().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    model = build(name)
    plain = grads(model)
    grape.hf.patch(model)
    patched = grads(model)
    grape.hf.unpatch(model)
    assert patched.keys() == plain.keys()
    for n, g in plain.items():
        assert (patched[n] - g).abs().max().item() <= 1e-4 * g.abs().max().item() + 1e-7, n


def test_one_row_of_positions_serves_every_batch_element():
    """transformers' apply step broadcasts cos and sin of positions [1, seq] (or [seq]) over the
    batch; grape's rotates every batch element by them, as transformers' own function does."""
    model = build("llama-default")
    modeling = importlib.import_module(type(model).__module__)
    own_apply = modeling.apply_rotary_pos_emb
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(3, 4, 12, 32, generator=g), torch.randn(3, 2, 12, 32, generator=g)
    position_ids = torch.arange(3, 15)  # small: transformers' float32 phases are exact to 1e-6 here
    want = own_apply(q, k, *model.model.rotary_emb(q, position_ids[None]))
    grape.hf.patch(model)
    try:
        for ids in (position_ids, position_ids[None], position_ids[None].expand(3, -1)):
            got = modeling.apply_rotary_pos_emb(q, k, *model.model.rotary_emb(q, ids))
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    finally:
        grape.hf.unpatch(model)


def test_patch_refuses_an_unsupported_model():
    model = transformers.BertModel(transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))
    with pytest.raises(grape.GrapeError, match="grape: hf.patch: model_type 'bert'"):
        grape.hf.patch(model)


def greedy_decode(model, prompt, steps):
    """Greedy decoding through the KV cache: after the prompt, one token per call, its position
    taken from the cache length (model.generate needs torch.distributed, which Debian's torch 1.13
    cannot import under Python 3.11)."""
    # transformers 5.25 renamed past_key_values to cache (the old name warns until 5.40).
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
        tokens = [out.logits[:, -1].argmax(-1)]
        for _ in range(steps - 1):
            out = model(input_ids=tokens[-1][:, None], use_cache=True, **{name: getattr(out, name)})
            tokens.append(out.logits[:, -1].argmax(-1))
    return torch.stack(tokens, dim=1), out.logits


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", ["llama-llama3", "phi3-longrope", "gpt_neox-partial"])
def test_patched_model_decodes_like_transformers_through_the_kv_cache(name, batch):
    model = build(name)
    prompt = IDS[:batch, :8]
    plain, plain_logits = greedy_decode(model, prompt, 12)
    grape.hf.patch(model)
    patched, patched_logits = greedy_decode(model, prompt, 12)
    grape.hf.unpatch(model)
    assert torch.equal(plain, patched)
    assert (plain_logits - patched_logits).abs().max().item() < 1e-5
