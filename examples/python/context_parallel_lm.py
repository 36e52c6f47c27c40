"""A small decoder-only language model with FoX's forget gates (the Forgetting Transformer: a bias
summed along the path from each key to its query), trained twice from the same initial weights on
the same batches: in one process with grape.torch.attention, and with its sequence split over W
processes (grape.distributed.attention: context parallel, gloo) whose gradients DDP averages. The
two loss curves agree step for step to float32 rounding.

    build/venv/bin/python examples/python/context_parallel_lm.py              # 2 ranks, 40 steps
    build/venv/bin/python examples/python/context_parallel_lm.py --ranks 4 --steps 5

Each rank embeds its own tokens (its zigzag shard of every sequence), computes its own forget gates
and MLPs, and meets the other ranks only inside attention (K and V around the ring, the forget gates
all-gathered) and in DDP's gradient average: a rank's loss is the mean over its tokens, so the
average over ranks is the mean over the whole batch, as in the single process.
"""
import argparse
import os
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import grape.distributed as gd
import grape.torch as gt

VOCAB = 64


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.forget = nn.Linear(d, heads)
        nn.init.constant_(self.forget.bias, 3.0)  # sigmoid(3) = 0.95: forget slowly at first
        self.out = nn.Linear(d, d, bias=False)

    def forward(self, x, distributed):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.hd).unbind(2)
        log_forget = F.logsigmoid(self.forget(x).float()).transpose(1, 2)  # [b, heads, t]: this rank's tokens
        attend = gd.attention if distributed else gt.attention
        y = attend(q, k, v, log_forget=log_forget, causal=True)
        return self.out(y.reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, distributed):
        x = x + self.attn(self.ln1(x), distributed)
        return x + self.mlp(self.ln2(x))


class LM(nn.Module):
    def __init__(self, d=64, layers=2, heads=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        nn.init.normal_(self.embed.weight, std=0.02)  # tied output: small logits, a first loss near log(VOCAB)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids, distributed=False):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, distributed)
        return self.ln(x) @ self.embed.weight.t()


def batch(step, batch_size, seq):
    """Step `step`'s batch, the same in every process: counting sequences, each from its own start
    with its own stride (1 to 4) modulo VOCAB, so that the next token follows from the last two and
    the loss keeps falling; inputs and targets."""
    g = torch.Generator().manual_seed(1000 + step)
    start = torch.randint(0, VOCAB, (batch_size, 1), generator=g)
    stride = torch.randint(1, 5, (batch_size, 1), generator=g)
    seq_ids = (start + stride * torch.arange(seq + 1)) % VOCAB
    return seq_ids[:, :-1], seq_ids[:, 1:]


def train(args, distributed, rank=0):
    torch.manual_seed(0)
    model = LM()
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, start = [], time.perf_counter()
    for step in range(args.steps):
        inputs, targets = batch(step, args.batch, args.seq)
        if distributed:
            inputs, targets = gd.shard(inputs), gd.shard(targets)
        logits = model(inputs, distributed)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if distributed:  # the whole batch's loss: the mean of the ranks' (equal shards)
            total = loss.detach().clone()
            dist.all_reduce(total)
            loss = total / dist.get_world_size()
        losses.append(loss.item())
    return losses, time.perf_counter() - start


def _worker(rank, world, port, args, results):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        losses, seconds = train(args, True, rank)
        if rank == 0:
            torch.save({"losses": losses, "seconds": seconds}, results)
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    single, single_seconds = train(args, distributed=False)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "results.pt")
        mp.spawn(_worker, args=(args.ranks, _free_port(), args, path), nprocs=args.ranks, join=True)
        sharded = torch.load(path)
    worst = max(abs(a - b) for a, b in zip(single, sharded["losses"]))
    print("step  one process   %d ranks (context parallel + DDP)" % args.ranks)
    for step, (a, b) in enumerate(zip(single, sharded["losses"])):
        print("%4d  %.7f     %.7f" % (step, a, b))
    print("largest difference %.3g; %.2f s in one process, %.2f s on %d ranks"
          % (worst, single_seconds, sharded["seconds"], args.ranks))
    return single, sharded["losses"]


if __name__ == "__main__":
    main(sys.argv[1:])
