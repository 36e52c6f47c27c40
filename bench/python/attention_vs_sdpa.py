#!/usr/bin/env python3
"""grape's fused CPU attention against torch.nn.functional.scaled_dot_product_attention, in one
process, in interleaved rounds (not part of the test suite; docs/performance.md has the method and
the figures).

Cases: dtype {float32, bfloat16, float16} x {full, causal} x {1, 2 threads} x {forward, forward +
backward} x T {2048, 8192} x {RoPE, ALiBi}, 8 heads of 128 channels; and decode (one query, 32 query
heads on 8 KV heads of 128, RoPE) over 4k, 16k and 64k cached tokens in float32 and bfloat16.
What torch runs is what a PyTorch model runs for the same attention: RoPE applied to Q and K as
Hugging Face's rotate_half does (cos/sin tables made once, outside the timing), then SDPA on
[1, heads, T, d]; ALiBi as SDPA's float attn_mask [heads, T, T] (causal folded in, made once,
outside the timing); decode as SDPA of the RoPE-turned query on a contiguous [1, 8, L, 128]
cache with enable_gqa (grape reads a paged cache: 16-slot pages in shuffled order). grape runs
grape.attention / grape.attention_backward / grape.attention_decode on [T, heads, d] with the
encoding inside. Forward + backward: torch's autograd through RoPE and SDPA; grape's forward
with the log-sum-exp, then its backward.

Each round visits the cases of one (T, dtype) group in a shuffled order (fixed seed) and times
grape and torch back to back, in alternating order; a case's ratio is the median over rounds of
torch time / grape time (> 1: grape is faster). peak_fraction: grape's matrix-product FLOPs per
second (4·T²·d·heads forward, half causal; forward + backward 3.5 times that; decode 4·L·d·heads)
over the rate of the instructions its products use for that dtype (float32 FMAs, or AVX512-BF16
dot products for bf16) on in-cache 240×128·128×128 tiles with the same threads, measured at the
start: the attainable peak of this machine, not a datasheet figure. Output, one line a case:

    case: NAME ratio_to_torch_sdpa: X peak_fraction: Y grape_ms: A torch_ms: B

Usage: attention_vs_sdpa.py [--tokens 2048,8192] [--dtypes float32,bfloat16,float16]
       [--threads 1,2] [--encodings rope,alibi] [--passes forward,backward] [--rounds 3]
       [--decode 4096,16384,65536 | --decode none] [--only REGEX] [--matmul auto|f32|avx512bf16]
Run it under the build lock (flock /tmp/grape-build.lock ...) on a shared machine.
"""
import argparse
import math
import random
import re
import statistics
import time

import torch
import torch.nn.functional as F

import grape

HEADS, DIM = 8, 128
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def cpu_description():
    """The first processor's model name and family in /proc/cpuinfo, and its matrix-unit flags."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break  # the first processor's block only
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    flags = set(info.get("flags", "").split())
    wanted = [f for f in ("avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16") if f in flags]
    return (f"{info.get('model name', '?')} (family {info.get('cpu family', '?')}, model {info.get('model', '?')}); "
            f"{' '.join(wanted) or 'no AVX-512'}")


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peak_rate(dtype_name, threads):
    """GFLOP/s of the instructions grape's products use for this dtype (grape.matmul_path: float32
    FMAs or AVX512-BF16 dot products), on in-cache tiles on `threads` threads: the attainable peak."""
    return grape._grape._tile_product_gflops(grape.matmul_path(dtype_name), threads)


def rope_tables(tokens, dtype):
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, DIM, 2, dtype=torch.float64) / DIM))
    angles = torch.outer(torch.arange(tokens, dtype=torch.float64), inv_freq)
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : DIM // 2], x[..., DIM // 2:]
    return torch.cat((-x2, x1), dim=-1)


def alibi_mask(tokens, dtype, causal):
    """SDPA's float attn_mask for ALiBi: -slope_h·|i − j|, −∞ above the diagonal when causal."""
    slopes = torch.tensor(grape.alibi(heads=HEADS).slopes, dtype=torch.float32)
    pos = torch.arange(tokens, dtype=torch.float32)
    dist = (pos[None, :] - pos[:, None]).abs()
    mask = -slopes[:, None, None] * dist[None]
    if causal:
        mask = mask.masked_fill(torch.ones(tokens, tokens, dtype=torch.bool).triu(1)[None], float("-inf"))
    return mask.to(dtype)[None]


class AttentionCase:
    def __init__(self, tokens, dtype_name, encoding, causal, threads, backward, inputs, masks):
        self.tokens, self.dtype_name, self.encoding = tokens, dtype_name, encoding
        self.causal, self.threads, self.backward = causal, threads, backward
        self.name = (f"{encoding}/T{tokens}/H{HEADS}/D{DIM}/{dtype_name}/{'causal' if causal else 'full'}/"
                     f"threads{threads}/{'forward_backward' if backward else 'forward'}")
        self.inputs, self.masks = inputs, masks
        self.flops = 4.0 * tokens * tokens * DIM * HEADS * (0.5 if causal else 1.0) * (3.5 if backward else 1.0)

    def run_grape(self):
        q, k, v, grad = self.inputs["grape"]
        enc = grape.rope(head_dim=DIM) if self.encoding == "rope" else grape.alibi(heads=HEADS)
        out, lse = grape.attention(q, k, v, enc, causal=self.causal, return_lse=True, threads=self.threads)
        if self.backward:
            grape.attention_backward(grad, q, k, v, out, lse, enc, causal=self.causal, threads=self.threads)

    def run_torch(self):
        torch.set_num_threads(self.threads)
        q, k, v, grad = self.inputs["torch"]
        if self.backward:
            q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        with torch.set_grad_enabled(self.backward):
            if self.encoding == "rope":
                cos, sin = self.inputs["rope"]
                qr, kr = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
                out = F.scaled_dot_product_attention(qr, kr, v, is_causal=self.causal)
            else:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.masks[self.causal])
            if self.backward:
                out.backward(grad)


class DecodeCase:
    """One sequence of `length` cached tokens; 32 query heads on 8 KV heads of 128; RoPE."""

    def __init__(self, length, dtype_name, threads):
        self.length, self.dtype_name, self.threads = length, dtype_name, threads
        self.name = f"decode/rope/{length // 1024}k/H32/KV8/D128/{dtype_name}/threads{threads}"
        dtype = DTYPES[dtype_name]
        block, kv_heads = 16, 8
        blocks = (length + block - 1) // block
        g = torch.Generator().manual_seed(3)
        self.k_cache = torch.randn(blocks, block, kv_heads, DIM, generator=g).to(dtype)
        self.v_cache = torch.randn(blocks, block, kv_heads, DIM, generator=g).to(dtype)
        self.table = torch.randperm(blocks, generator=g).to(torch.int32)[None]
        self.seq_lens = torch.tensor([length], dtype=torch.int64)
        self.q = torch.randn(1, 32, DIM, generator=g).to(dtype)
        # torch's contiguous cache [1, 8, L, 128] holding the same tokens in order
        order = self.table[0].long()
        self.k_t = self.k_cache[order].reshape(-1, kv_heads, DIM)[:length].transpose(0, 1)[None].contiguous()
        self.v_t = self.v_cache[order].reshape(-1, kv_heads, DIM)[:length].transpose(0, 1)[None].contiguous()
        self.cos, self.sin = (x[length - 1] for x in rope_tables(length, dtype))
        self.enc = grape.rope(head_dim=DIM)
        self.flops = 4.0 * length * DIM * 32
        self.reps = max(1, 65536 // length)

    def run_grape(self):
        for _ in range(self.reps):
            grape.attention_decode(self.q, self.k_cache, self.v_cache, self.table, self.seq_lens, self.enc,
                                   threads=self.threads)

    def run_torch(self):
        torch.set_num_threads(self.threads)
        for _ in range(self.reps):
            q = (self.q[0] * self.cos + rotate_half(self.q[0]) * self.sin)[None, :, None, :]  # [1, 32, 1, 128]
            F.scaled_dot_product_attention(q, self.k_t, self.v_t, enable_gqa=True)


def run_group(cases, rounds, seed, peak, only):
    cases = [c for c in cases if not only or re.search(only, c.name)]
    times = {c.name: ([], []) for c in cases}
    rng = random.Random(seed)
    for c in cases:  # warm-up: first calls allocate, JIT, fault pages
        c.run_grape()
        c.run_torch()
    for r in range(rounds):
        order = cases[:]
        rng.shuffle(order)
        for c in order:
            pair = [(0, c.run_grape), (1, c.run_torch)]
            for side, fn in (pair if r % 2 == 0 else pair[::-1]):
                times[c.name][side].append(timed(fn))
    for c in cases:
        g, t = times[c.name]
        ratio = statistics.median(tt / gg for gg, tt in zip(g, t))
        reps = getattr(c, "reps", 1)
        g_ms, t_ms = 1e3 * statistics.median(g) / reps, 1e3 * statistics.median(t) / reps
        rate = c.flops / (g_ms / 1e3) / 1e9
        fraction = rate / peak[(c.dtype_name, c.threads)]
        print(f"case: {c.name} ratio_to_torch_sdpa: {ratio:.3f} peak_fraction: {fraction:.3f} "
              f"grape_ms: {g_ms:.2f} torch_ms: {t_ms:.2f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="2048,8192")
    p.add_argument("--dtypes", default="float32,bfloat16,float16")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--encodings", default="rope,alibi")
    p.add_argument("--passes", default="forward,backward")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--decode", default="4096,16384,65536")
    p.add_argument("--only", default="")
    p.add_argument("--matmul", default="auto")
    a = p.parse_args()
    split = lambda s: [x for x in s.split(",") if x and x != "none"]
    grape.set_matmul_path(a.matmul)
    dtypes, threads = split(a.dtypes), [int(x) for x in split(a.threads)]
    print(f"cpu: {cpu_description()}")
    print(f"torch {torch.__version__} (threads via torch.set_num_threads), grape matmul path: "
          + ", ".join(f"{d} {grape.matmul_path(d)}" for d in dtypes))
    peak = {}
    for d in dtypes:
        for n in threads:
            peak[(d, n)] = peak_rate(d, n)
            print(f"peak ({d}, {grape.matmul_path(d)} tile products in cache) threads {n}: {peak[(d, n)]:.1f} GFLOP/s")
    for tokens in [int(x) for x in split(a.tokens)]:
        for d in dtypes:
            dtype = DTYPES[d]
            g = torch.Generator().manual_seed(tokens)
            q, k, v, grad = (torch.randn(tokens, HEADS, DIM, generator=g).to(dtype) for _ in range(4))
            inputs = {"grape": (q, k, v, grad),
                      "torch": tuple(x.transpose(0, 1)[None].contiguous() for x in (q, k, v, grad)),
                      "rope": rope_tables(tokens, dtype)}
            encodings = split(a.encodings)
            masks = {c: alibi_mask(tokens, dtype, c) for c in (False, True)} if "alibi" in encodings else {}
            cases = [AttentionCase(tokens, d, e, c, n, b, inputs, masks) for e in encodings for c in (False, True)
                     for n in threads for b in [x == "backward" for x in split(a.passes)]]
            run_group(cases, a.rounds, tokens, peak, a.only)
            del masks
    for d in [x for x in dtypes if x != "float16"]:
        cases = [DecodeCase(int(length), d, n) for length in split(a.decode) for n in threads]
        run_group(cases, max(a.rounds, 5), 7, peak, a.only)


if __name__ == "__main__":
    main()
