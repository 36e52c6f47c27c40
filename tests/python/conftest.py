"""Shared by the Python tests: an independent float64 RoPE (the formulas, not grape's code), the ALiBi
paper's slopes, and the tolerance check of the reference-matching suites."""
import math

import numpy as np


def _allow_generate_without_fsdp():
    """transformers' generate() asks whether the model is FSDP-managed by importing
    torch.distributed.fsdp, which Debian's torch 1.13 cannot import under Python 3.11; no model in
    these tests is, so answer for it there (every test module and the docs examples alike)."""
    try:
        import torch.distributed.fsdp  # noqa: F401
    except Exception:
        try:
            import transformers.generation.utils as generation
        except ImportError:
            return
        generation.is_fsdp_managed_module = lambda module: False


_allow_generate_without_fsdp()


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


def alibi_paper_slopes(n):
    """The ALiBi paper's get_slopes: the power-of-two rule, other head counts interleaved."""
    def power_of_two(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_two(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_two(closest) + alibi_paper_slopes(2 * closest)[0::2][:n - closest]


def assert_close(got, want, tol, what, floor=1.0):
    """Tensors: max |got - want| <= tol * max(floor, max |want|) over the finite entries of want, and
    the non-finite entries (masked logits) in the same places."""
    import torch
    got, want = got.double(), want.double()
    finite = torch.isfinite(want)
    assert torch.equal(finite, torch.isfinite(got)), what + ": masked entries differ"
    err = (got[finite] - want[finite]).abs().max().item() if finite.any() else 0.0
    bound = tol * max(floor, want[finite].abs().max().item() if finite.any() else 0.0)
    assert err <= bound, "%s: max error %.3g > %.3g" % (what, err, bound)
