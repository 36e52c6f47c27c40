#!/usr/bin/env python3
"""The cost of a score bias written in Python (grape.python_bias) in grape.torch.attention's tiled torch
loop, against the C++ built-in ALiBi through grape.torch.attention and against torch SDPA with the
bias as a dense [heads, T, T] attn_mask (not part of the test suite; docs/python.md quotes it).

The Python bias is -lam[h] * log1p(|m - n|) with learnable lam; SDPA gets the same bias built densely
from lam in each step (so its gradient reaches lam too) with the causal mask folded in; ALiBi's slopes
are learnable as well. Each case: the median over --repeats of forward, and of forward + backward.
Per tile: the Python path's time over the tiles it visits (causal: the blocks on and below the diagonal),
and fn's own time on one tile. torch < 2.0 has no SDPA: there the dense case is the same softmax
written out in torch.

    python bench/python/python_bias_cost.py [--tokens 1024,2048] [--heads 8] [--dim 64] [--repeats 5] [--threads N]
"""
import argparse
import math
import platform
import statistics
import time

import torch
import torch.nn.functional as F

import grape
import grape.torch as gt

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


def log_distance(head, q_pos, k_pos, lam):
    return -lam[head] * torch.log1p((q_pos - k_pos).abs().to(lam.dtype))


def timed(fn, repeats):
    fn()  # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", default="1024,2048")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch's intra-op threads (0: its default)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print("torch %s, %d threads, %s, python %s" % (torch.__version__, torch.get_num_threads(), platform.processor()
                                                    or platform.machine(), platform.python_version()))
    heads, dim = args.heads, args.dim
    lam = torch.linspace(0.25, 2.0, heads, requires_grad=True)
    slopes = torch.tensor(grape.alibi_slopes(heads), requires_grad=True)
    bias = grape.python_bias(log_distance, [lam], heads=heads)
    tile = bias.tile[0]
    one_tile = [torch.arange(heads).view(-1, 1, 1), torch.arange(tile).view(1, -1, 1), torch.arange(tile).view(1, 1, -1)]
    fn_ms = 1e3 * timed(lambda: log_distance(*one_tile, lam.detach()), 50)
    print("fn alone on one %dx%d tile of %d heads: %.3f ms" % (tile, tile, heads, fn_ms))
    for t in (int(x) for x in args.tokens.split(",")):
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, t, heads, dim, requires_grad=True) for _ in range(3))
        blocks = math.ceil(t / tile)
        tiles = blocks * (blocks + 1) // 2

        def python_bias():
            return gt.attention(q, k, v, encoding=bias, causal=True)

        def alibi():
            return gt.attention(q, k, v, slopes=slopes, causal=True)

        def sdpa():
            m = torch.arange(t).view(t, 1)
            n = torch.arange(t).view(1, t)
            dense = (-lam.view(-1, 1, 1) * torch.log1p((m - n).abs().float())).masked_fill(n > m, float("-inf"))
            qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            if HAVE_SDPA:
                return F.scaled_dot_product_attention(qh, kh, vh, attn_mask=dense[None]).transpose(1, 2)
            # torch < 2.0 has no SDPA: the same dense softmax written out (what SDPA's math path does)
            return torch.softmax(qh @ kh.transpose(-1, -2) / math.sqrt(dim) + dense, -1).matmul(vh).transpose(1, 2)

        dense_name = "sdpa + dense bias" if HAVE_SDPA else "dense softmax+bias"
        for name, run in (("python_bias", python_bias), ("alibi (C++)", alibi), (dense_name, sdpa)):
            fwd = timed(lambda: run().detach(), args.repeats)
            both = timed(lambda: run().sum().backward(), args.repeats)
            extra = ""
            if name == "python_bias":
                extra = "  per tile: %.3f ms forward, %.3f ms forward + backward (%d tiles)" % (
                    1e3 * fwd / tiles, 1e3 * both / tiles, tiles)
            print("T=%d %-18s forward %8.1f ms  forward+backward %8.1f ms%s" % (t, name, 1e3 * fwd, 1e3 * both, extra))


if __name__ == "__main__":
    main()
