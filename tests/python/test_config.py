"""grape.from_config against the schedules' formulas, transcribed here in float64 (and, for the
float32 reference table, as transformers computes it in torch float32)."""
import math
import os

import numpy as np
import pytest
import torch

import grape
from conftest import default_inv_freq

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "configs")


def llama3_inv_freq(base, d, factor, low, high, original):
    inv = default_inv_freq(d, base)
    wavelen = 2 * math.pi / inv
    out = []
    for f, w in zip(inv, wavelen):
        if w < original / high:
            out.append(f)
        elif w > original / low:
            out.append(f / factor)
        else:
            s = (original / w - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return np.array(out)


def test_llama3_file_matches_the_formula():
    enc = grape.from_config(os.path.join(CONFIGS, "llama-3.1-8b", "config.json"), precision="float64")
    assert (enc.rotary_dim, enc.head_dim, enc.layout, enc.attention_factor) == (128, 128, "half_split", 1.0)
    np.testing.assert_allclose(enc.inv_freq, llama3_inv_freq(500000.0, 128, 8.0, 1.0, 4.0, 8192), rtol=1e-13)
    assert "llama3" in enc.describe()


def test_yarn_attention_factor():
    enc = grape.from_config(os.path.join(CONFIGS, "qwen2.5-7b-instruct-yarn", "config.json"))
    assert enc.attention_factor == pytest.approx(0.1 * math.log(4.0) + 1.0, rel=1e-15)


def test_dynamic_ntk_depends_on_seq_len():
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 4096,
              "rope_theta": 10000.0, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    d = 64
    f64 = dict(precision="float64")
    np.testing.assert_allclose(grape.from_config(config, seq_len=4096, **f64).inv_freq, default_inv_freq(d), rtol=1e-14)
    scaled_base = 10000.0 * ((2.0 * 8192 / 4096) - 1.0) ** (d / (d - 2))
    np.testing.assert_allclose(grape.from_config(config, seq_len=8192, **f64).inv_freq,
                               default_inv_freq(d, scaled_base), rtol=1e-13)
    # the default float32 table follows the same formula to float32 rounding
    np.testing.assert_allclose(grape.from_config(config, seq_len=8192).inv_freq, default_inv_freq(d, scaled_base),
                               rtol=1e-6)


def test_default_table_is_what_torch_computes_in_float32():
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
              "max_position_embeddings": 8192}
    reference = (1.0 / (500000.0 ** (torch.arange(0, 128, 2, dtype=torch.int64).float() / 128))).double().numpy()
    f32 = grape.from_config(config).inv_freq
    f64 = grape.from_config(config, precision="float64").inv_freq
    assert np.array_equal(f32, reference)                # bit for bit (test_hf.py: every schedule)
    assert np.array_equal(f32, grape.from_config(config, precision="float32_reference").inv_freq)
    ulp = np.spacing(reference.astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(f64 - reference) / ulp) > 0.1   # the float64 table is not that table


@pytest.mark.parametrize("heads,slopes", [
    (8, [2.0 ** -(i + 1) for i in range(8)]),
    (12, [2.0 ** -(i + 1) for i in range(8)] + [2.0 ** -(0.5 + i) for i in range(4)]),
])
def test_alibi_slopes(heads, slopes):
    enc = grape.from_config({"model_type": "bloom", "n_head": heads, "hidden_size": 64 * heads})
    assert isinstance(enc, grape.AlibiEncoding)
    np.testing.assert_allclose(enc.slopes, slopes, rtol=1e-15)


def test_t5_buckets():
    enc = grape.from_config(os.path.join(CONFIGS, "t5-small", "config.json"))
    assert isinstance(enc, grape.T5Encoding)
    assert (enc.num_buckets, enc.max_distance, enc.bidirectional) == (32, 128, True)


def test_bad_configs_are_one_line_errors():
    with pytest.raises(grape.GrapeError, match="hidden_size"):
        grape.from_config({"model_type": "llama", "num_attention_heads": 4})
    with pytest.raises(grape.GrapeError, match="nope.json"):
        grape.from_config("/nonexistent/nope.json")
    with pytest.raises(grape.GrapeError, match="precision"):
        grape.from_config(os.path.join(CONFIGS, "llama-2-7b", "config.json"), precision="float16")
    with pytest.raises(TypeError, match="from_config"):
        grape.from_config(42)


def test_rope_and_rotary_builders():
    enc = grape.rope(head_dim=64, rotary_dim=32, base=10000.0, layout="interleaved")
    np.testing.assert_allclose(enc.inv_freq, default_inv_freq(32), rtol=1e-15)
    table = grape.rotary([1.0, 0.5, 0.25], head_dim=8, rotary_dim=6)  # partial rotary: asked for, never implied
    assert (table.rotary_dim, table.head_dim) == (6, 8)
    assert (grape.rotary([1.0, 0.5]).rotary_dim, grape.rotary([1.0, 0.5]).head_dim) == (4, 4)
    with pytest.raises(grape.GrapeError, match=r"^grape: inv_freq: must hold rotary_dim / 2 = 4 values \(got 3\)$"):
        grape.rotary([1.0, 0.5, 0.25], head_dim=8)
    assert list(table.with_inv_freq([2.0, 1.0, 0.5]).inv_freq) == [2.0, 1.0, 0.5]
    with pytest.raises(grape.GrapeError, match="inv_freq: must hold rotary_dim / 2 = 3 values"):
        table.with_inv_freq([1.0])
    with pytest.raises(grape.GrapeError, match="layout"):
        grape.rope(head_dim=8, layout="sideways")
    with pytest.raises(grape.GrapeError, match="rotary_dim"):
        grape.rope(head_dim=8, rotary_dim=12)
