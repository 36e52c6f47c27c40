#!/usr/bin/env python3
"""Context-parallel attention on CPU processes (not part of the test suite; docs/distributed.md has
the figures): one causal attention forward + backward over T tokens, 8 heads of 64 channels,
float32, batch 1, one thread per process, for RoPE and FoX (a bias summed along the path), in one
process (grape.torch.attention, and torch's scaled_dot_product_attention for RoPE, the peer a user
already has) and split over W gloo processes (grape.distributed.attention). Prints one line a case,
the median of `--rounds` rounds, each rank's time the slowest rank's:

    case: ENCODING processes: W ms: X over_one_process: Y

W processes share the machine's cores: on a 2-core machine W = 4 runs two processes a core, and
its time measures the ring's extra work, not a speed-up.
"""
import argparse
import os

os.environ["OMP_NUM_THREADS"] = "1"  # grape's kernels and torch's, here and in the spawned ranks

import socket
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

import grape
import grape.torch as gt

HEADS, D = 8, 64


def _inputs(tokens):
    g = torch.Generator().manual_seed(tokens)
    q, k, v = (torch.randn(1, tokens, HEADS, D, generator=g) for _ in range(3))
    log_forget = F.logsigmoid(torch.randn(HEADS, tokens, generator=g, dtype=torch.float64) + 3)
    return q, k, v, log_forget


def _step(attend, q, k, v, **kw):
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    out = attend(q, k, v, **kw)
    out.backward(torch.ones_like(out))


def _sdpa_rope(q, k, v, rope):
    q, k = gt.rotate_qk(q, k, rope)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return out.transpose(1, 2)


def _cases(tokens, attend, shard):
    q, k, v, log_forget = _inputs(tokens)
    q, k, v = (shard(x, 1) for x in (q, k, v))
    rope = grape.rope(head_dim=D)
    return {
        "rope": lambda: _step(attend, q, k, v, encoding=rope, causal=True),
        "fox": lambda: _step(attend, q, k, v, log_forget=shard(log_forget, -1), causal=True),
    }


def _time(fn, rounds, barrier=lambda: None):
    fn()  # warm-up
    times = []
    for _ in range(rounds):
        barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _worker(rank, world, port, tokens, rounds, results):
    import grape.distributed as gd
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        lines = []
        for name, fn in _cases(tokens, gd.attention, lambda x, dim: gd.shard(x, dim)).items():
            times = torch.tensor(_time(fn, rounds, dist.barrier))
            dist.all_reduce(times, op=dist.ReduceOp.MAX)  # a round lasts as long as its slowest rank
            lines.append("%s %.6f" % (name, statistics.median(times.tolist())))
        if rank == 0:
            with open(results, "w") as f:
                f.write("\n".join(lines))
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--processes", default="2,4")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    one = {name: statistics.median(_time(fn, a.rounds))
           for name, fn in _cases(a.tokens, gt.attention, lambda x, dim: x).items()}
    q, k, v, _ = _inputs(a.tokens)
    rope = grape.rope(head_dim=D)
    sdpa = statistics.median(_time(lambda: _step(_sdpa_rope, q, k, v, rope=rope), a.rounds))
    print("tokens: %d heads: %d d: %d float32 causal forward+backward, one thread per process"
          % (a.tokens, HEADS, D))
    print("case: rope_torch_sdpa processes: 1 ms: %.1f over_one_process: %.2f" % (sdpa * 1e3, sdpa / one["rope"]))
    for name, seconds in one.items():
        print("case: %s processes: 1 ms: %.1f over_one_process: 1.00" % (name, seconds * 1e3))
    for world in [int(w) for w in a.processes.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "times")
            mp.spawn(_worker, args=(world, _free_port(), a.tokens, a.rounds, path), nprocs=world, join=True)
            with open(path) as f:
                for line in f.read().splitlines():
                    name, seconds = line.split()
                    print("case: %s processes: %d ms: %.1f over_one_process: %.2f"
                          % (name, world, float(seconds) * 1e3, float(seconds) / one[name]))


if __name__ == "__main__":
    main()
