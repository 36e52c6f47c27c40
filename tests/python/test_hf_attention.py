"""attn_implementation="grape" in real transformers models built from small configs (random weights, nothing
downloaded): the same logits, greedy tokens and gradients as transformers' own attention in the same test.

The reference is "eager" everywhere and "sdpa" too where torch has scaled_dot_product_attention (2.0 and
later; Debian's torch 1.13 has not). Every model is switched between grape and the reference in place
(grape.hf.set_attention), so both run the same weights; a counter on grape's kernel shows grape ran.
"""
import pytest
import torch

transformers = pytest.importorskip("transformers")

import grape  # noqa: E402
import grape.hf  # noqa: E402

REFERENCES = ["eager"] + (["sdpa"] if hasattr(torch.nn.functional, "scaled_dot_product_attention") else [])
NEW_TOKENS = 20




def llama(**kw):
    # initializer_range 0.2 (BLOOM 0.5), not 0.02: logits far enough from uniform that greedy decoding varies.
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
                                      max_position_embeddings=256, **kw)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def bloom():
    config = transformers.BloomConfig(vocab_size=128, hidden_size=64, n_layer=2, n_head=4, initializer_range=0.5)
    torch.manual_seed(0)
    return transformers.BloomForCausalLM(config)


def mpt():
    config = transformers.MptConfig(vocab_size=128, d_model=64, n_heads=4, n_layers=2, max_seq_len=64,
                                    initializer_range=0.5)
    torch.manual_seed(0)
    return transformers.MptForCausalLM(config)


def left_padded():
    """Two prompts of 7 and 12 tokens, the first left-padded (pad id 0): as generate() takes a batch."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 128, (2, 12), generator=g)
    mask = torch.ones_like(ids)
    ids[0, :5], mask[0, :5] = 0, 0
    return ids, mask


@pytest.fixture
def grape_calls(monkeypatch):
    """How many times grape's fused attention ([0]) and its decode kernel ([1]) ran."""
    calls = [0, 0]

    def count(module, name, slot):
        kernel = getattr(module, name)

        def counted(*args, **kwargs):
            calls[slot] += 1
            return kernel(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    count(grape.hf._grape_torch, "attention", 0)
    count(grape, "attention_decode", 1)
    return calls


def logits(model, implementation, ids, mask):
    grape.hf.set_attention(model, implementation)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def generate(model, implementation, ids, mask):
    grape.hf.set_attention(model, implementation)
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                         do_sample=False, pad_token_id=0, use_cache=True, output_logits=True,
                         return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits, 1)  # the raw logits of every step


def test_from_config_takes_attn_implementation_grape(grape_calls):
    grape.hf.register()
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="grape")
    assert model.config._attn_implementation == "grape"
    with torch.no_grad():
        model(input_ids=torch.tensor([[1, 2, 3]]))
    assert grape_calls[0] == 2  # once per layer


@pytest.mark.parametrize("reference", REFERENCES)
def test_llama_left_padded_prefill_matches_transformers(reference, grape_calls):
    model = llama().eval()
    ids, mask = left_padded()
    expected = logits(model, reference, ids, mask)
    got = logits(model, "grape", ids, mask)
    assert grape_calls[0] == 2
    assert not got.isnan().any()
    valid = mask.bool()
    assert (got - expected)[valid].abs().max().item() <= 1e-4
    # The padding matters: the same tokens without the mask give other logits on row 0.
    unmasked = logits(model, reference, ids, None)
    assert (unmasked - expected)[valid].abs().max().item() > 1e-2


@pytest.mark.parametrize("reference", REFERENCES)
def test_llama_generate_left_padded_gives_transformers_tokens(reference, grape_calls):
    model = llama().eval()
    ids, mask = left_padded()
    tokens, scores = generate(model, reference, ids, mask)
    grape_tokens, grape_scores = generate(model, "grape", ids, mask)
    assert grape_calls[0] == 2  # the prompt, a call per layer
    assert grape_calls[1] == 2 * (NEW_TOKENS - 1)  # then a step per new token on the decode kernel
    assert tokens.shape == (2, 12 + NEW_TOKENS)
    assert torch.equal(grape_tokens, tokens)
    assert (grape_scores - scores).abs().max().item() <= 1e-4
    assert len(set(tokens[1, 12:].tolist())) > 3  # greedy decoding that varies, not one token repeated


def test_llama_with_grape_rotary_and_grape_attention_matches_transformers(grape_calls):
    model = llama(rope_theta=10000.0).eval()
    ids, mask = left_padded()
    expected = logits(model, "eager", ids, mask)
    grape.hf.patch(model)
    try:
        got = logits(model, "grape", ids, mask)
    finally:
        grape.hf.unpatch(model)
    assert (got - expected)[mask.bool()].abs().max().item() <= 1e-4


def training_batch(padding):
    """Two sequences of 10 tokens, the second padded to 6 on the right or the left (or not at all);
    the padded positions' labels are -100, and with left padding the first real token's too: it is
    predicted from the last pad, a query row whose output is not defined (a fully masked row: eager
    averages every value, grape gives zero)."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(1, 128, (2, 10), generator=g)
    mask = torch.ones_like(ids)
    pads = {"none": slice(0, 0), "right": slice(6, None), "left": slice(0, 4)}[padding]
    ids[1, pads], mask[1, pads] = 0, 0
    labels = ids.masked_fill(mask == 0, -100)
    if padding == "left":
        labels[1, pads.stop] = -100
    return ids, mask, labels


def loss_and_grads(model, implementation, ids, mask, labels):
    grape.hf.set_attention(model, implementation)
    model.zero_grad()
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("padding", ["none", "right", "left"])
@pytest.mark.parametrize("reference", REFERENCES)
def test_llama_training_step_gives_transformers_gradients(reference, padding, grape_calls):
    model = llama().train()
    ids, mask, labels = training_batch(padding)
    loss, grads = loss_and_grads(model, reference, ids, mask, labels)
    grape_loss, grape_grads = loss_and_grads(model, "grape", ids, mask, labels)
    assert grape_calls[0] == 2
    assert abs(grape_loss - loss) <= 1e-5
    for name, grad in grads.items():
        assert (grape_grads[name] - grad).abs().max().item() <= 1e-4 * max(1.0, grad.abs().max().item()), name


def test_bloom_left_padded_prefill_and_generate_match_transformers(grape_calls):
    model = bloom().eval()
    ids, mask = left_padded()
    expected = logits(model, "eager", ids, mask)
    got = logits(model, "grape", ids, mask)
    assert grape_calls[0] == 2
    assert not got.isnan().any()
    assert (got - expected)[mask.bool()].abs().max().item() <= 1e-4
    tokens, scores = generate(model, "eager", ids, mask)
    grape_tokens, grape_scores = generate(model, "grape", ids, mask)
    assert torch.equal(grape_tokens, tokens)
    assert (grape_scores - scores).abs().max().item() <= 1e-4
    assert len(set(tokens[1, 12:].tolist())) > 3


def test_bloom_alibi_is_inside_grape():
    """Without the slopes grape's output differs: the test above reads BLOOM's ALiBi."""
    model = bloom().eval()
    ids, mask = left_padded()
    expected = logits(model, "eager", ids, mask)
    grape.hf.set_attention(model, "grape")
    for module in model.modules():
        if type(module).__name__ == "BloomAttention":
            module._grape_slopes = torch.zeros(4)
    with torch.no_grad():
        without = model(input_ids=ids, attention_mask=mask).logits
    assert (without - expected)[mask.bool()].abs().max().item() > 1e-2


def test_mpt_left_padded_prefill_and_generate_match_transformers(grape_calls):
    model = mpt().eval()
    ids, mask = left_padded()
    expected = logits(model, "eager", ids, mask)
    # transformers' MPT handles left padding: the padded prompt's logits are the unpadded prompt's.
    alone = logits(model, "eager", ids[:1, 5:], mask[:1, 5:])
    assert (alone[0] - expected[0, 5:]).abs().max().item() <= 1e-4
    got = logits(model, "grape", ids, mask)
    assert grape_calls[0] == 2
    assert not got.isnan().any()
    assert (got - expected)[mask.bool()].abs().max().item() <= 1e-4
    tokens, scores = generate(model, "eager", ids, mask)
    grape_tokens, grape_scores = generate(model, "grape", ids, mask)
    assert torch.equal(grape_tokens, tokens)
    assert (grape_scores - scores).abs().max().item() <= 1e-4
    assert len(set(tokens[1, 12:].tolist())) > 3
    # The weights are asked for: transformers' own forward computes them.
    calls = grape_calls[0]
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    assert grape_calls[0] == calls and out.attentions[0].shape == (2, 4, 12, 12)


def test_mpt_alibi_is_inside_grape(monkeypatch):
    """Without the slopes grape's output differs: the test above reads MPT's ALiBi."""
    model = mpt().eval()
    ids, mask = left_padded()
    expected = logits(model, "eager", ids, mask)
    monkeypatch.setattr(grape.hf, "_mpt_slopes", lambda position_bias: torch.zeros(position_bias.shape[0]))
    without = logits(model, "grape", ids, mask)
    assert (without - expected)[mask.bool()].abs().max().item() > 1e-2


def test_bad_arguments_give_one_grape_line():
    model = llama()
    with pytest.raises(grape.GrapeError, match=r"^grape: set_attention: implementation must be a name"):
        grape.hf.set_attention(model, 3)
    with pytest.raises((grape.GrapeError, ValueError), match=r"grape-flash"):  # 5: transformers' own check
        grape.hf.set_attention(model, "grape-flash")
    with pytest.raises(grape.GrapeError, match=r"^grape: set_attention: BLOOM runs 'grape' or its own 'eager'"):
        grape.hf.set_attention(bloom(), "sdpa")
    with pytest.raises(grape.GrapeError, match=r"^grape: set_attention: MPT runs 'grape' or its own 'eager'"):
        grape.hf.set_attention(mpt(), "sdpa")
    q, k, v = torch.randn(1, 4, 5, 16), torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
    layer = model.model.layers[0].self_attn
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: dropout 0.1 is not supported"):
        grape.hf.attention(layer, q, k, v, None, dropout=0.1)
    window = torch.ones(5, 5, dtype=torch.bool).tril() & torch.ones(5, 5, dtype=torch.bool).triu(-1)
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: attention_mask is not causal plus padding"):
        grape.hf.attention(layer, q, k, v, window[None, None])
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: attention_mask must be \[batch, 1, 5, >= 5\]"):
        grape.hf.attention(layer, q, k, v, torch.ones(1, 5, dtype=torch.bool))
    bias = torch.zeros(1, 1, 5, 5).masked_fill(~window[None, None], -0.5)
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: attention_mask holds values other than 0"):
        grape.hf.attention(layer, q, k, v, bias)
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: key: 3 keys for 5 queries"):
        grape.hf.attention(layer, q, k[:, :, :3], v[:, :, :3], None)


def dense_decode(q, k, v, first, scale, slopes=None):
    """float64 attention of one query per row ([batch, heads, d], the last of Tk tokens) over keys
    [first[b], Tk) of [batch, kv_heads, Tk, d], with -slope * (query - key) added: [batch, 1, heads, d]."""
    batch, heads, _ = q.shape
    k_len, group = k.shape[2], heads // k.shape[1]
    out = torch.zeros(batch, 1, heads, v.shape[-1], dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            keys, values = k[b, h // group, first[b]:].double(), v[b, h // group, first[b]:].double()
            logits = scale * keys @ q[b, h].double()
            if slopes is not None:
                logits -= float(slopes[h]) * torch.arange(k_len - 1 - first[b], -1, -1, dtype=torch.float64)
            out[b, 0, h] = torch.softmax(logits, 0) @ values
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("alibi", [False, True])
def test_a_decode_step_reads_the_cache_in_place_on_the_decode_kernel(dtype, alibi, grape_calls):
    """One query per row against transformers' cache: the float64 result over each row's valid keys,
    rows of three paddings, GQA 8:2; the pads hold NaN, which the kernel must not read. One call, or
    one per padding with ALiBi (whose bias keeps each row's positions)."""
    g = torch.Generator().manual_seed(3)
    batch, heads, kv_heads, dim, k_len = 4, 8, 2, 64, 2048
    q = torch.randn(batch, heads, 1, dim, generator=g).to(dtype)
    k, v = (torch.randn(batch, kv_heads, k_len, dim, generator=g).to(dtype) for _ in range(2))
    first = [0, 37, 0, 1500]  # long pads: ALiBi's logits stay exact only at the rows' true offsets
    mask = torch.zeros(batch, 1, 1, k_len)
    for b, f in enumerate(first):
        mask[b, ..., :f] = torch.finfo(torch.float32).min
        k[b, :, :f], v[b, :, :f] = float("nan"), float("nan")
    slopes = torch.tensor([2.0 ** -(i + 1) for i in range(heads)]) if alibi else None
    encoding = {"slopes": slopes} if alibi else {}
    got = grape.hf.causal_attention(q, k, v, mask, 0.125, **encoding)
    assert grape_calls == [0, 3 if alibi else 1]
    assert got.dtype == dtype and got.shape == (batch, 1, heads, dim)
    expected = dense_decode(q[:, :, 0], k, v, first, 0.125, slopes)
    tolerance = 2e-6 if dtype == torch.float32 else 1e-2  # bf16: the output's rounding, 2^-8 of |out| <= 1
    assert (got.double() - expected).abs().max().item() <= tolerance
    # No mask: every key seen, in one call.
    k, v = (x.nan_to_num(0.0) + x.isnan() * torch.randn(x.shape, generator=g).to(dtype) for x in (k, v))
    got = grape.hf.causal_attention(q, k, v, None, 0.125, **encoding)
    assert grape_calls == [0, 4 if alibi else 2]
    assert (got.double() - dense_decode(q[:, :, 0], k, v, [0] * batch, 0.125, slopes)).abs().max().item() <= tolerance
    # The next step's cache is one token longer (here shorter): the calls follow it.
    k, v = k[:, :, :1900].contiguous(), v[:, :, :1900].contiguous()
    got = grape.hf.causal_attention(q, k, v, None, 0.125, **encoding)
    assert (got.double() - dense_decode(q[:, :, 0], k, v, [0] * batch, 0.125, slopes)).abs().max().item() <= tolerance


def test_a_decode_step_with_gradients_takes_the_differentiable_path(grape_calls):
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 4, 1, 16, generator=g, requires_grad=True)
    k, v = torch.randn(2, 2, 9, 16, generator=g), torch.randn(2, 2, 9, 16, generator=g)
    out = grape.hf.causal_attention(q, k, v, None, 0.25)
    assert grape_calls == [1, 0]
    out.sum().backward()
    reference = q.detach().clone().requires_grad_()
    keys, values = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    dense_out = torch.softmax(0.25 * reference @ keys.transpose(-1, -2), -1) @ values
    dense_out.sum().backward()
    assert (out.transpose(1, 2) - dense_out).abs().max().item() <= 1e-5
    assert (q.grad - reference.grad).abs().max().item() <= 1e-5


def test_a_static_cache_mask_is_refused_not_read_as_padding():
    """A static cache passes all its slots, the queries before its empty last ones: each query's mask
    row sees its own position and those before. Read as bottom-right aligned, every query would be
    padding and every output zero."""
    q, k, v = torch.randn(2, 4, 3, 16), torch.randn(2, 2, 8, 16), torch.randn(2, 2, 8, 16)
    positions = torch.arange(2, 5)  # the queries are tokens 2..4 of the 8 slots
    seen = torch.arange(8)[None, :] <= positions[:, None]
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: attention_mask: the queries are not the last"):
        grape.hf.causal_attention(q, k, v, seen.expand(2, 1, 3, 8), 0.25)
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: attention_mask: the queries are not the last"):
        grape.hf.causal_attention(q[:, :, :1], k, v, seen[:1].expand(2, 1, 1, 8), 0.25)


@pytest.mark.parametrize("q_len", [3, 8])
def test_a_few_new_tokens_per_row_go_to_the_decode_kernel(q_len, grape_calls):
    """Up to 8 new tokens per row against the cache (a speculative decoding check): one decode call,
    each query a sequence of its own, causal among the new tokens, rows left-padded (NaN in the pads);
    the float64 attention over each query's real keys. 9 new tokens take the fused kernel."""
    g = torch.Generator().manual_seed(5)
    batch, heads, kv_heads, dim, k_len = 3, 8, 2, 32, 600
    q = torch.randn(batch, heads, q_len, dim, generator=g)
    k, v = (torch.randn(batch, kv_heads, k_len, dim, generator=g) for _ in range(2))
    first = [0, 50, 300]
    mask = torch.full((batch, 1, q_len, k_len), torch.finfo(torch.float32).min)
    expected = torch.zeros(batch, q_len, heads, dim, dtype=torch.float64)
    for b, f in enumerate(first):
        k[b, :, :f], v[b, :, :f] = float("nan"), float("nan")
        for i in range(q_len):
            last = k_len - q_len + i  # the query's own key
            mask[b, 0, i, f:last + 1] = 0
            for h in range(heads):
                keys, values = k[b, h // 4, f:last + 1].double(), v[b, h // 4, f:last + 1].double()
                expected[b, i, h] = torch.softmax(0.2 * keys @ q[b, h, i].double(), 0) @ values
    got = grape.hf.causal_attention(q, k, v, mask, 0.2)
    assert grape_calls == [0, 1]
    assert got.shape == (batch, q_len, heads, dim)
    assert (got.double() - expected).abs().max().item() <= 2e-6
    q9 = torch.randn(batch, heads, 9, dim, generator=g)
    mask9 = torch.zeros(batch, 1, 9, k_len).masked_fill(torch.ones(9, k_len, dtype=torch.bool).triu(k_len - 9 + 1),
                                                        torch.finfo(torch.float32).min)
    for b, f in enumerate(first):
        mask9[b, ..., :f] = torch.finfo(torch.float32).min
    assert not grape.hf.causal_attention(q9, k, v, mask9, 0.2).isnan().any()
    assert grape_calls == [1, 1]


def test_assisted_generation_checks_several_new_tokens_on_the_decode_kernel(monkeypatch):
    """transformers' assisted generation (an assistant model proposes tokens, the model checks them in
    one forward through its cache) gives greedy decoding's tokens; the checks run on the decode kernel
    with more than one query per row."""
    queries = []
    kernel = grape.attention_decode

    def counted(q, *args, **kwargs):
        queries.append(q.shape[0])
        return kernel(q, *args, **kwargs)

    monkeypatch.setattr(grape, "attention_decode", counted)
    model = llama().eval()
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, initializer_range=0.2,
                                      max_position_embeddings=256)
    torch.manual_seed(1)
    assistant = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(1, 128, (1, 12), generator=torch.Generator().manual_seed(1))
    grape.hf.set_attention(assistant, "eager")
    grape.hf.set_attention(model, "eager")
    greedy = model.generate(input_ids=ids, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
    grape.hf.set_attention(model, "grape")
    assisted = model.generate(input_ids=ids, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0,
                              assistant_model=assistant)
    assert torch.equal(assisted, greedy)
    assert max(queries) > 1
