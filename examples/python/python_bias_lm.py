"""A tiny language model whose attention adds a score bias written in Python, -lam[h] * log(1 + |m - n|)
with a learnable lam per layer and head, checked by grape.check and trained through grape.torch.attention.

    build/venv/bin/python examples/python/python_bias_lm.py --steps 40

Data: sequences of 64 tokens from a vocabulary of 32 that follow a fixed random permutation
(token t is followed by perm[t]) with a random start, so the loss falls within a few steps.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import grape
import grape.torch as gt

VOCAB, WIDTH, HEADS, LAYERS, LENGTH = 32, 32, 4, 2, 64


def log_distance(head, q_pos, k_pos, lam):
    """The bias of query position q_pos for key position k_pos in head `head` (broadcast int64 tensors)."""
    return -lam[head] * torch.log1p((q_pos - k_pos).abs().to(lam.dtype))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
        self.lam = nn.Parameter(torch.full((HEADS,), 0.5))
        self.bias = grape.python_bias(log_distance, [self.lam], name="log_distance", heads=HEADS)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, WIDTH // HEADS).unbind(2)  # [b, t, h, d]
        a = gt.attention(q, k, v, encoding=self.bias, causal=True)
        x = x + self.proj(a.reshape(b, t, WIDTH))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batch_of(perm, size, generator):
    tokens = torch.empty(size, LENGTH + 1, dtype=torch.int64)
    tokens[:, 0] = torch.randint(VOCAB, (size,), generator=generator)
    for i in range(1, LENGTH + 1):
        tokens[:, i] = perm[tokens[:, i - 1]]
    return tokens[:, :-1], tokens[:, 1:]


def main(argv=None):
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--steps", type=int, default=40)
    args.add_argument("--batch", type=int, default=8)
    args = args.parse_args(argv)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    perm = torch.randperm(VOCAB, generator=generator)
    model = TinyLM()
    report = grape.check(model.blocks[0].bias, trials=20)  # the laws before training: the bias is what it claims
    print(report)
    lam_before = [block.lam.detach().clone() for block in model.blocks]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(args.steps):
        inputs, targets = batch_of(perm, args.batch, generator)
        loss = F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 10 == 0 or step == args.steps - 1:
            print("step %3d  loss %.3f  lam %s" % (step, losses[-1], [round(x, 3) for x in model.blocks[0].lam.tolist()]))
    assert all(math.isfinite(x) for x in losses)
    return {"losses": losses, "lam_before": lam_before, "lam_after": [b.lam.detach().clone() for b in model.blocks],
            "report": report}


if __name__ == "__main__":
    main()
