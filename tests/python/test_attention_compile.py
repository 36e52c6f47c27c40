"""grape.torch.attention under torch.compile(fullgraph=True): on torch >= 2.4 the fused attention and
its backward are the custom ops grape::attention and grape::attention_backward, so a compiled loss
through them is one graph (a break raises) whose values and gradients equal eager mode's, for each
encoding whose parameters are tensors and for encoding objects given as plain values
(grape.torch.plain); torch.library.opcheck checks the ops' registrations."""
import pytest
import torch

import grape
from grape.torch import attention

pytestmark = pytest.mark.skipif(not grape.torch.HAVE_CUSTOM_OPS,
                                reason="torch.library.custom_op needs torch >= 2.4 (Debian's torch is 1.13); "
                                       "scripts/test_pypi_torch.sh runs this")

HEADS, D, SEQ = 4, 16, 40


def _leaf(x):
    return x.detach().clone().requires_grad_()


def _case(kind, g):
    """(encoding, keyword tensors) for a kind; the tensors are leaves that get gradients."""
    rope = grape.torch.RotaryTable.of(grape.rope(head_dim=D, base=100.0))
    slopes = _leaf(torch.tensor(grape.alibi(heads=HEADS).slopes, dtype=torch.float32))
    gates = torch.nn.functional.logsigmoid(torch.randn(2, HEADS, SEQ, generator=g) + 2)
    if kind == "rope":
        return rope, {}
    if kind == "inv_freq":
        return rope, {"inv_freq": _leaf(torch.tensor(rope.inv_freq))}
    if kind == "slopes":
        return None, {"slopes": slopes}
    if kind == "alibi object":  # a fixed encoding object through plain()
        return grape.torch.plain(grape.alibi(heads=HEADS)), {}
    if kind == "rope+alibi pair":
        return grape.torch.plain((grape.rope(head_dim=D, base=100.0), grape.alibi(heads=HEADS))), {}
    if kind == "t5 table":  # T5's buckets through plain(), the table learned
        buckets = grape.torch.plain(grape.t5(torch.zeros(32, HEADS), max_distance=64))
        return buckets, {"t5_table": _leaf(torch.randn(32, HEADS, generator=g))}
    if kind == "rope+slopes":
        return rope, {"slopes": slopes}
    if kind == "fox per sequence":
        return None, {"log_forget": _leaf(gates)}
    if kind == "grape_a":
        return None, {"grape_a": (slopes, _leaf(gates[0].exp()))}
    if kind == "grape_ap":
        return None, {"grape_ap": _leaf(torch.randn(HEADS, SEQ, 8, generator=g))}
    if kind == "mrope":  # a built-in through its plain values; a position per axis and token
        positions = torch.randint(0, 5000, (3, 2 * SEQ), generator=g)
        return grape.torch.BuiltinSpec.of(grape.encoding("mrope", head_dim=D, sections=[2, 3, 3])), {"positions": positions}
    if kind == "mrope table":  # a Qwen2-VL config's table with sections, learned
        table = grape.torch.RotaryTable.of(grape.mrope(D, [2, 3, 3], base=1e4))
        return table, {"inv_freq": _leaf(torch.tensor(table.inv_freq)),
                       "positions": torch.randint(0, 5000, (3, 2 * SEQ), generator=g)}
    if kind == "grape_a lift":
        return grape.torch.BuiltinSpec.of(grape.encoding("grape_a", heads=HEADS, head_dim=D)), {}
    if kind == "grape_m":
        rates = torch.rand(HEADS, SEQ, generator=g, dtype=torch.float64)
        return None, {"grape_m": (_leaf(torch.full((HEADS, D // 2), 0.1)), _leaf(rates.cumsum(-1)))}
    raise AssertionError(kind)


def _leaves(kwargs):
    out = []
    for value in kwargs.values():
        out += list(value) if isinstance(value, tuple) else [value]
    return [x for x in out if x.requires_grad]


@pytest.mark.parametrize("kind", ["rope", "inv_freq", "slopes", "alibi object", "rope+alibi pair", "t5 table",
                                  "rope+slopes", "fox per sequence", "grape_a",
                                  "grape_ap", "grape_m", "mrope", "mrope table", "grape_a lift"])
def test_attention_compiles_into_one_graph_with_eager_values_and_gradients(kind):
    g = torch.Generator().manual_seed(12)
    q = torch.randn(2, SEQ, HEADS, D, generator=g, requires_grad=True)
    k = torch.randn(2, SEQ, HEADS, D, generator=g, requires_grad=True)
    v = torch.randn(2, SEQ, HEADS, D, generator=g, requires_grad=True)
    weight = torch.randn(2, SEQ, HEADS, D, generator=g)
    encoding, kwargs = _case(kind, g)

    def loss(q, k, v, kwargs):
        return (attention(q, k, v, encoding, causal=True, **kwargs) * weight).sum()

    torch._dynamo.reset()  # each case compiles `loss` afresh (one code object: recompiles are capped)
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")  # fullgraph: a graph break raises
    wrt = [q, k, v] + _leaves(kwargs)
    eager = loss(q, k, v, kwargs)
    got = compiled(q, k, v, kwargs)
    torch.testing.assert_close(got, eager)
    for name, a, b in zip(["q", "k", "v", "param 0", "param 1"], torch.autograd.grad(got, wrt),
                          torch.autograd.grad(eager, wrt)):
        torch.testing.assert_close(a, b, msg=name)
        assert b.abs().max() > 0, name  # a gradient that is there


def test_the_attention_ops_pass_opcheck():
    g = torch.Generator().manual_seed(13)
    q, k, v = (torch.randn(SEQ, HEADS, D, generator=g) for _ in range(3))
    inv_freq = torch.tensor(grape.rope(head_dim=D, base=100.0).inv_freq, requires_grad=True)
    slopes = torch.tensor(grape.alibi(heads=HEADS).slopes, dtype=torch.float32, requires_grad=True)
    args = (q.requires_grad_(), k, v, "rotary+alibi", [inv_freq, slopes], D, D, "half_split", 1.0, "", 128, True, 1e-6,
            "", None, None, None, None, None, None, True, 0, None)
    torch.library.opcheck(torch.ops.grape.attention.default, args)
    # Keys on tokens of their own: 4 more keys than queries, the queries the last SEQ positions.
    k2, v2 = (torch.randn(SEQ + 4, HEADS, D, generator=g) for _ in range(2))
    args = (q, k2, v2, "rotary+alibi", [inv_freq, slopes], D, D, "half_split", 1.0, "", 128, True, 1e-6,
            "", torch.arange(4, SEQ + 4), None, None, torch.arange(SEQ + 4), None, None, True, 0, None)
    torch.library.opcheck(torch.ops.grape.attention.default, args)


def test_a_loaded_cpp_bias_compiles_into_one_graph_with_its_parameters_gradient():
    """grape.load_encoding's log-distance bias (examples/log_distance.hpp) as plain values (a
    BuiltinSpec naming the loaded type), its slopes learned through bias_params."""
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    loaded = grape.load_encoding(os.path.join(root, "examples", "log_distance.hpp"), "log_distance")
    encoding = grape.torch.plain(loaded.make(HEADS, D))
    g = torch.Generator().manual_seed(14)
    q, k, v = (torch.randn(2, SEQ, HEADS, D, generator=g, requires_grad=True) for _ in range(3))
    slopes = torch.tensor(loaded.make(HEADS, D).bias_params, dtype=torch.float64, requires_grad=True)

    def loss(q, k, v, slopes):
        return attention(q, k, v, encoding, bias_params=slopes, causal=True).square().sum()

    torch._dynamo.reset()
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    eager, got = loss(q, k, v, slopes), compiled(q, k, v, slopes)
    torch.testing.assert_close(got, eager)
    for a, b in zip(torch.autograd.grad(got, [q, k, v, slopes]), torch.autograd.grad(eager, [q, k, v, slopes])):
        torch.testing.assert_close(a, b)
        assert b.abs().max() > 0
