"""Shared by the Python tests: an independent float64 RoPE (the formulas, not grape's code)."""
import numpy as np


def rope_reference(x, inv_freq, positions, layout="half_split", attention_factor=1.0):
    """x [..., tokens, heads, dim] in float64 rotated by positions[token] * inv_freq[i]."""
    x = np.asarray(x, dtype=np.float64)
    rotary = 2 * len(inv_freq)
    angle = np.asarray(positions, dtype=np.float64)[..., None] * np.asarray(inv_freq, dtype=np.float64)
    cos = (np.cos(angle) * attention_factor)[..., None, :]  # [..., tokens, 1, planes]
    sin = (np.sin(angle) * attention_factor)[..., None, :]
    out = x.copy()
    if layout == "half_split":
        a, b = x[..., : rotary // 2], x[..., rotary // 2: rotary]
        out[..., : rotary // 2] = a * cos - b * sin
        out[..., rotary // 2: rotary] = a * sin + b * cos
    else:
        a, b = x[..., 0:rotary:2], x[..., 1:rotary:2]
        out[..., 0:rotary:2] = a * cos - b * sin
        out[..., 1:rotary:2] = a * sin + b * cos
    return out


def default_inv_freq(rotary_dim, base=10000.0):
    return 1.0 / base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
