"""grape.hf.swap_encoding in a tiny Llama (random weights, nothing downloaded): RoPE replaced by gated GRAPE-A,
ALiBi, FoX or nothing, checked against the same model with its attention recomputed densely in float64 from the
encodings' formulas (docs/grape-paper.md), and generate()'s cached steps against full-sequence forwards."""
import contextlib
import copy
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

import grape  # noqa: E402
import grape.hf  # noqa: E402

from test_hf_attention import left_padded, llama  # noqa: E402


def swapped(encoding):
    """The tiny Llama of test_hf_attention with `encoding` swapped in."""
    model = llama()
    torch.manual_seed(1)  # the new parameters' initial values
    return grape.hf.swap_encoding(model, encoding)


def dense_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """The swapped layer's attention in float64 with its bias as a T x T tensor, from the paper's formulas
    (no padding: every token real, queries the last of the keys)."""
    enc = module.grape_encoding
    batch, heads, q_len, dim = query.shape
    k_len = key.shape[2]
    key, value = (x.double().repeat_interleave(heads // x.shape[1], dim=1) for x in (key, value))
    i = torch.arange(k_len - q_len, k_len, dtype=torch.float64)[:, None]
    j = torch.arange(k_len, dtype=torch.float64)[None, :]
    distance = (i - j)[None, None]  # [1, 1, Tq, Tk]
    bias = torch.zeros(1, 1, q_len, k_len, dtype=torch.float64)
    if enc.kind == "alibi":
        bias = -enc.slopes.double()[None, :, None, None] * distance
    elif enc.kind.startswith("grape_a"):
        omega = torch.nn.functional.softplus(enc.omega_logit.double()) * torch.tensor(
            [2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], dtype=torch.float64)

        def gates(x, direction):
            unit = direction.double() / direction.double().norm(dim=-1, keepdim=True).clamp_min(1e-6)
            x = x.double().repeat_interleave(heads // x.shape[1], dim=1)
            return torch.nn.functional.softplus(torch.einsum("bhtd,hd->bht", x, unit) / math.sqrt(dim))

        rate = gates(key, enc.u)[:, :, None, :]
        if enc.kind == "grape_a_qk":
            rate = rate + gates(query, enc.v)[:, :, :, None]
        bias = -distance * omega[None, :, None, None] * rate
    elif enc.kind == "grape_m":  # learnable frequencies: turn Q and K (half-split planes) in float64
        theta = enc.log_freq.double().exp()

        def turned(x, positions):
            angle = positions[:, None] * theta[None, :]  # [T, D/2]
            cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
            half = x.shape[-1] // 2
            return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

        query, key = turned(query.double(), i[:, 0]), turned(key, j[0])
    else:
        assert enc.kind == "none"
    scores = query.double() @ key.transpose(-1, -2) * scaling + bias
    scores = scores.masked_fill((j > i)[None, None], float("-inf"))
    return (scores.softmax(-1) @ value).transpose(1, 2), None


@contextlib.contextmanager
def attention_is(function):
    """transformers' "grape" attention replaced by `function` for the block (grape's restored after)."""
    from transformers import modeling_utils
    interface = getattr(modeling_utils, "AttentionInterface", None)
    try:
        if interface is None:
            modeling_utils.ALL_ATTENTION_FUNCTIONS["grape"] = function
        else:
            interface.register("grape", function)
        yield
    finally:
        grape.hf.register()


def batch():
    """Two unpadded sequences of 24 tokens."""
    g = torch.Generator().manual_seed(2)
    return torch.randint(0, 128, (2, 24), generator=g)


def loss_and_grads(model, ids):
    """The language-model loss and the swapped encodings' parameter gradients."""
    model.zero_grad()
    loss = model(ids, labels=ids).loss
    loss.backward()
    new = {n: p.grad.clone() for n, p in model.named_parameters() if "grape_encoding" in n}
    return loss, new


@pytest.mark.parametrize("encoding", ["grape_a", "grape_a_qk"])
def test_gated_grape_a_trains_with_the_dense_float64_gradients(encoding):
    model = swapped(encoding)
    reference = copy.deepcopy(model).double()
    ids = batch()
    loss, grads = loss_and_grads(model, ids)
    with attention_is(dense_attention):
        ref_loss, ref_grads = loss_and_grads(reference, ids)
    assert torch.isfinite(loss) and abs(loss.item() - ref_loss.item()) < 1e-5 * ref_loss.item()
    names = {"omega_logit", "u"} | ({"v"} if encoding == "grape_a_qk" else set())
    assert {n.rsplit(".", 1)[1] for n in grads} == names and len(grads) == 2 * len(names)
    for name, grad in grads.items():
        ref = ref_grads[name]
        assert torch.isfinite(grad).all() and ref.abs().max() > 0, name
        assert (grad.double() - ref).abs().max() <= 1e-4 * ref.abs().max(), name
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    with torch.no_grad():
        assert abs(model(ids, labels=ids).loss.item() - loss.item()) > 1e-3


@pytest.mark.parametrize("encoding", ["alibi", "none"])
def test_alibi_and_nope_logits_and_slope_gradients_match_dense_float64(encoding):
    model = swapped(encoding)
    reference = copy.deepcopy(model).double()
    ids = batch()
    loss, grads = loss_and_grads(model, ids)
    with attention_is(dense_attention):
        ref_loss, ref_grads = loss_and_grads(reference, ids)
        with torch.no_grad():
            ref_logits = reference(ids).logits
    with torch.no_grad():
        logits = model(ids).logits
    assert (logits.double() - ref_logits).abs().max() <= 1e-4 * ref_logits.abs().max()
    for name, grad in grads.items():
        assert ref_grads[name].abs().max() > 0 and (grad.double() - ref_grads[name]).abs().max() <= 1e-4 * ref_grads[name].abs().max()


def test_fox_logits_match_dense_float64():
    """FoX's bias is the sum of the log forget gates logsigmoid(x·w_f + b_f) between key and query, x the layer's
    input: the reference computes it densely from the same input, captured by a hook."""
    model = swapped("fox")
    reference = copy.deepcopy(model).double()
    inputs = {}
    for layer in reference.model.layers:
        layer.input_layernorm.register_forward_hook(
            lambda m, args, out, attn=layer.self_attn: inputs.__setitem__(attn, out))

    def fox_dense(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
        log_f = torch.nn.functional.logsigmoid(module.grape_encoding.proj(inputs[module])).transpose(1, 2)
        cum = log_f.cumsum(-1)  # bias[i, j] = sum_{l=j+1}^{i} log f_l = cum[i] - cum[j]
        heads, t = query.shape[1], query.shape[2]
        key, value = (x.repeat_interleave(heads // x.shape[1], dim=1) for x in (key, value))
        scores = query @ key.transpose(-1, -2) * scaling + cum[:, :, :, None] - cum[:, :, None, :]
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return (scores.softmax(-1) @ value).transpose(1, 2), None

    ids = batch()
    with attention_is(fox_dense), torch.no_grad():
        ref_logits = reference(ids).logits
    with torch.no_grad():
        logits = model(ids).logits
    assert (logits.double() - ref_logits).abs().max() <= 1e-4 * ref_logits.abs().max()


@pytest.mark.parametrize("encoding", ["grape_a", "grape_a_qk", "fox", "alibi", "grape_m", "grape_m_contextual"])
def test_generate_steps_match_full_forwards(encoding):
    """Each decode step (keys from the cache, GRAPE-A's key gates recomputed from the cached keys, FoX's
    kept per cache) gives the logits of a full forward over the tokens so far; with a left-padded row too."""
    model = swapped(encoding).eval()
    ids, mask = left_padded()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=10, min_new_tokens=10, do_sample=False,
                             pad_token_id=0, return_dict_in_generate=True, output_logits=True)
        assert len(out.logits) == 10
        for step, step_logits in enumerate(out.logits):
            seq = out.sequences[:, :ids.shape[1] + step]
            full_mask = torch.cat([mask, torch.ones(2, step, dtype=mask.dtype)], dim=1)
            full = model(seq, attention_mask=full_mask).logits[:, -1]
            assert (step_logits - full).abs().max() <= 1e-4, step


@pytest.mark.parametrize("encoding", ["grape_a_qk", "fox", "grape_m_contextual"])
def test_left_padding_changes_nothing(encoding):
    """A left-padded row's logits are those of its tokens run alone (pads hold no gates and no distance)."""
    model = swapped(encoding).eval()
    ids, mask = left_padded()
    with torch.no_grad():
        padded = model(ids, attention_mask=mask).logits[0, 5:]
        alone = model(ids[:1, 5:]).logits[0]
    assert (padded - alone).abs().max() <= 1e-5


def test_bad_arguments_give_one_grape_line():
    def message(call):
        with pytest.raises(grape.GrapeError) as e:
            call()
        text = str(e.value)
        assert text.startswith("grape: ") and "\n" not in text
        return text

    assert "encoding" in message(lambda: grape.hf.swap_encoding(llama(), "rope"))
    assert "encoding" in message(lambda: grape.hf.swap_encoding(llama(), 3))
    model = swapped("alibi")
    assert "swap_encoding" in message(lambda: grape.hf.swap_encoding(model, "fox"))
    grape.hf.set_attention(model, "eager")
    assert "'grape'" in message(lambda: model(batch()))
    bloom = transformers.BloomForCausalLM(transformers.BloomConfig(vocab_size=128, hidden_size=64, n_layer=1, n_head=4))
    assert "model_type" in message(lambda: grape.hf.swap_encoding(bloom, "alibi"))


def alibi_as_python(heads):
    """ALiBi written as a Python bias, with learnable slopes: the C++ kernel's "alibi" swap is its reference."""
    slopes = torch.nn.Parameter(torch.tensor(grape.alibi_slopes(heads), dtype=torch.float32))
    return grape.python_bias(lambda h, m, n, s: -s[h] * (m - n).abs().to(s.dtype), [slopes], name="alibi_py",
                             heads=heads)


def test_a_python_bias_swapped_in_matches_the_same_bias_in_the_kernel():
    """A left-padded batch's logits, the slopes' gradient and 10 generated tokens: ALiBi as a Python bias
    (grape's tiled Python attention, row by row) against the "alibi" swap (grape's C++ kernel)."""
    kernel = swapped("alibi")
    python = grape.hf.swap_encoding(llama(), alibi_as_python(4))
    assert sum(p.numel() for n, p in python.named_parameters() if "grape_encoding" in n) == 4  # shared: once
    ids, mask = left_padded()
    real = mask.bool()
    outs = []
    for model in (kernel, python):
        logits = model(ids, attention_mask=mask).logits
        (logits[real] ** 2).mean().backward()
        slopes = model.model.layers[0].self_attn.grape_encoding
        grad = slopes.slopes.grad if hasattr(slopes, "slopes") else slopes.bias.params[0].grad
        outs.append((logits.detach()[real], grad.clone()))
    assert (outs[0][0] - outs[1][0]).abs().max() <= 1e-4
    # The kernel swap has a slope parameter per layer, the Python bias one shared by both: sum the layers'.
    per_layer = sum(m.self_attn.grape_encoding.slopes.grad for m in kernel.model.layers)
    assert (per_layer - outs[1][1]).abs().max() <= 1e-4 * per_layer.abs().max()
    with torch.no_grad():
        generated = [m.eval().generate(ids, attention_mask=mask, max_new_tokens=10, min_new_tokens=10, do_sample=False,
                                       pad_token_id=0) for m in (kernel, python)]
    assert torch.equal(generated[0], generated[1])


def test_a_function_of_the_layer_gives_each_layer_its_own_python_bias():
    model = grape.hf.swap_encoding(llama(), lambda layer: alibi_as_python(4))
    first, second = (m.self_attn.grape_encoding.bias for m in model.model.layers)
    assert first is not second and first.params[0] is not second.params[0]
    with pytest.raises(grape.GrapeError, match=r"^grape: swap_encoding: encoding\(0\) must give a grape.python_bias"):
        grape.hf.swap_encoding(llama(), lambda layer: "alibi")


def test_learnable_frequencies_start_as_the_models_rope_and_train_with_the_dense_float64_gradient():
    """GRAPE-M with learnable frequencies: at initialisation the model's own RoPE (its logits for a
    left-padded batch, as transformers computes them), then dL/dlog_freq against the dense float64 model."""
    original, model = llama(), swapped("grape_m")
    ids, mask = left_padded()
    with torch.no_grad():
        want, got = (m(ids, attention_mask=mask).logits[mask.bool()] for m in (original, model))
    assert (got - want).abs().max() <= 1e-4
    reference = copy.deepcopy(model).double()
    ids = batch()
    loss, grads = loss_and_grads(model, ids)
    with attention_is(dense_attention):
        ref_loss, ref_grads = loss_and_grads(reference, ids)
    assert abs(loss.item() - ref_loss.item()) < 1e-5 * ref_loss.item()
    assert {n.rsplit(".", 1)[1] for n in grads} == {"log_freq"} and len(grads) == 2
    for name, grad in grads.items():
        ref = ref_grads[name]
        assert ref.abs().max() > 0 and (grad.double() - ref).abs().max() <= 1e-4 * ref.abs().max(), name


def test_contextual_grape_m_matches_dense_float64_logits_and_gradients():
    """Contextual GRAPE-M: Φ_t = Σ_{τ<t} sigmoid(x_τ·w + b)/16 from the layer's input x (captured by a
    hook), Q and K turned by Φ_t·θ in float64; the logits and the gradients of w, b and log θ."""
    model = swapped("grape_m_contextual")
    reference = copy.deepcopy(model).double()
    inputs = {}
    for layer in reference.model.layers:
        layer.input_layernorm.register_forward_hook(
            lambda m, args, out, attn=layer.self_attn: inputs.__setitem__(attn, out))

    def contextual_dense(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
        enc = module.grape_encoding
        rate = torch.sigmoid(enc.proj(inputs[module])) / 16  # [b, T, 1]
        phase = (rate.cumsum(1) - rate)[:, None, :, :]  # [b, 1, T, 1]: exclusive running sum
        angle = phase * enc.log_freq.exp()  # [b, 1, T, D/2]
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)

        def turned(x):
            half = x.shape[-1] // 2
            return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

        heads, t = query.shape[1], query.shape[2]
        query, key = turned(query), turned(key)
        key, value = (x.repeat_interleave(heads // x.shape[1], dim=1) for x in (key, value))
        scores = query @ key.transpose(-1, -2) * scaling
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return (scores.softmax(-1) @ value).transpose(1, 2), None

    ids = batch()
    loss, grads = loss_and_grads(model, ids)
    with attention_is(contextual_dense):
        ref_loss, ref_grads = loss_and_grads(reference, ids)
        with torch.no_grad():
            ref_logits = reference(ids).logits
    with torch.no_grad():
        logits = model(ids).logits
    assert (logits.double() - ref_logits).abs().max() <= 1e-4 * ref_logits.abs().max()
    assert abs(loss.item() - ref_loss.item()) < 1e-5 * ref_loss.item()
    assert {n.rsplit(".", 1)[1] for n in grads} == {"log_freq", "weight", "bias"} and len(grads) == 6
    for name, grad in grads.items():
        ref = ref_grads[name]
        assert ref.abs().max() > 0 and (grad.double() - ref).abs().max() <= 1e-4 * ref.abs().max(), name
