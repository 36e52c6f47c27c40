#!/usr/bin/env python3
"""The fixed cost of the GRAPE paper's variants at a small model's shapes (not part of the test
suite; docs/performance.md has the figures): grape.torch.attention forward + backward, causal,
batch 16, 4 heads of 16 channels (d_model 64), T in {128, 256, 512}, float32, one thread, for
RoPE (the reference), gated GRAPE-A (key gates per batch element [batch, heads, T], ω learned)
and contextual GRAPE-M (phases per batch element [batch, heads, T], θ learned), as a training
step calls them. Prints one line a case, the median of `--rounds` interleaved rounds:

    case: NAME ms: X over_rope: Y
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import grape
import grape.torch as gt


def step(q, k, v, variant, params):
    out = variant(q, k, v, params)
    out.backward(torch.ones_like(out))


def rope(q, k, v, p):
    return gt.attention(q, k, v, p["rope"], causal=True)


def gated_grape_a(q, k, v, p):
    return gt.attention(q, k, v, grape_a=(F.softplus(p["w"]) * p["slopes"], F.softplus(p["z"])), causal=True)


def contextual_grape_m(q, k, v, p):
    phases = torch.cumsum(torch.sigmoid(p["rate"]) / 16, dim=-1).double()
    return gt.attention(q, k, v, grape_m=(p["theta"], phases), causal=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default="128,256,512")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=16)
    a = ap.parse_args()
    torch.set_num_threads(1)
    heads, d, batch = 4, 16, a.batch
    variants = {"rope": rope, "grape_a_key_gated": gated_grape_a, "grape_m_contextual": contextual_grape_m}
    for tokens in [int(t) for t in a.tokens.split(",")]:
        g = torch.Generator().manual_seed(tokens)
        q, k, v = (torch.randn(batch, tokens, heads, d, generator=g, requires_grad=True) for _ in range(3))
        p = {"rope": grape.rope(head_dim=d),
             "w": torch.zeros(heads, requires_grad=True),
             "slopes": torch.tensor(grape.alibi(heads=heads).slopes, dtype=torch.float32),
             "z": torch.randn(batch, heads, tokens, generator=g, requires_grad=True),
             "rate": torch.randn(batch, heads, tokens, generator=g, requires_grad=True),
             "theta": (1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)).repeat(heads, 1).requires_grad_()}
        times = {n: [] for n in variants}
        for n, f in variants.items():
            step(q, k, v, f, p)  # warm-up
        for r in range(a.rounds):
            for n, f in (list(variants.items()) if r % 2 == 0 else list(variants.items())[::-1]):
                t0 = time.perf_counter()
                step(q, k, v, f, p)
                times[n].append(time.perf_counter() - t0)
        ref = statistics.median(times["rope"])
        for n in variants:
            ms = statistics.median(times[n])
            print(f"case: {n}/T{tokens}/B{batch}/H{heads}/D{d}/causal/forward_backward ms: {1e3 * ms:.2f} "
                  f"over_rope: {ms / ref:.2f}", flush=True)


if __name__ == "__main__":
    main()
