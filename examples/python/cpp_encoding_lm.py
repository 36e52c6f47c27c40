"""A tiny language model whose attention uses an encoding written in C++ by its user: the tutorial's
quaternion rotation (examples/quaternion_rope.hpp) or its log-distance score bias with learnable
slopes (examples/log_distance.hpp), loaded with grape.load_encoding, checked, and trained through
grape.torch.attention (the encoding inside grape's fused attention, forward and backward).

    build/venv/bin/python examples/python/cpp_encoding_lm.py --encoding quaternion --steps 40
    build/venv/bin/python examples/python/cpp_encoding_lm.py --encoding log_distance --steps 40

The first run compiles each type (a few seconds to a minute on 2 cores; docs/python.md); later
runs find the build in the cache. Data: sequences of 64 tokens from a vocabulary of 32 that follow
a fixed random permutation (token t is followed by perm[t]) with a random start.
"""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import grape
import grape.torch as gt

VOCAB, WIDTH, HEADS, LAYERS, LENGTH = 32, 32, 4, 2, 64
EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(name):
    """The encoding type and the encoding of this model's heads."""
    if name == "quaternion":
        kind = grape.load_encoding(os.path.join(EXAMPLES, "quaternion_rope.hpp"), "quaternion_rope<>")
        return kind, kind.make(WIDTH // HEADS, 10000.0, 7)  # params: head_dim, base, axis_seed (in order)
    kind = grape.load_encoding(os.path.join(EXAMPLES, "log_distance.hpp"), "log_distance")
    return kind, kind.make(HEADS, WIDTH // HEADS)  # params: heads, head_dim


class Block(nn.Module):
    def __init__(self, encoding):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
        self.encoding = encoding
        # A score bias that declares its parameters (log_distance's slopes) trains them.
        learnable = bool(encoding.bias_params)
        self.bias_params = nn.Parameter(torch.tensor(encoding.bias_params, dtype=torch.float64)) if learnable else None

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, WIDTH // HEADS).unbind(2)  # [b, t, h, d]
        a = gt.attention(q, k, v, self.encoding, bias_params=self.bias_params, causal=True)
        x = x + self.proj(a.reshape(b, t, WIDTH))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, encoding):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block(encoding) for _ in range(LAYERS))
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
    args.add_argument("--encoding", choices=("quaternion", "log_distance"), default="quaternion")
    args.add_argument("--steps", type=int, default=40)
    args.add_argument("--batch", type=int, default=8)
    args = args.parse_args(argv)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    perm = torch.randperm(VOCAB, generator=generator)
    kind, encoding = load(args.encoding)
    report = kind.check(trials=20)  # the laws the type claims, before training with it
    print(report)
    model = TinyLM(encoding)
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
            print("step %3d  loss %.3f" % (step, losses[-1]))
    assert all(math.isfinite(x) for x in losses)
    slopes = [b.bias_params.detach().clone() for b in model.blocks if b.bias_params is not None]
    return {"losses": losses, "report": report, "slopes_before": encoding.bias_params, "slopes_after": slopes}


if __name__ == "__main__":
    main()
