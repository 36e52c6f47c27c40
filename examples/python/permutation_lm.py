"""What the small training examples share (python_bias_lm.py, cpp_encoding_lm.py): a pre-norm
decoder block around the attention each example supplies, a model of such blocks, the task
(sequences that follow a fixed random permutation of the vocabulary, token t followed by perm[t],
from a random start, so the loss falls within a few steps) and the training loop.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, WIDTH, HEADS, LAYERS, LENGTH = 32, 32, 4, 2, 64


class Block(nn.Module):
    """x + attention(norm(x)), then x + mlp(norm(x)); a subclass defines attend(q, k, v) on
    [batch, tokens, heads, head_dim] tensors."""

    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, WIDTH // HEADS).unbind(2)  # [b, t, h, d]
        x = x + self.proj(self.attend(q, k, v).reshape(b, t, WIDTH))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """An embedding, LAYERS blocks made by make_block(), and a linear head."""

    def __init__(self, make_block):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(make_block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def task(seed=0):
    """Seeds torch, and returns the task's generator and permutation."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    return generator, torch.randperm(VOCAB, generator=generator)


def batch_of(perm, size, generator):
    tokens = torch.empty(size, LENGTH + 1, dtype=torch.int64)
    tokens[:, 0] = torch.randint(VOCAB, (size,), generator=generator)
    for i in range(1, LENGTH + 1):
        tokens[:, i] = perm[tokens[:, i - 1]]
    return tokens[:, :-1], tokens[:, 1:]


def train(model, perm, generator, steps, batch, note=lambda: ""):
    """Adam at 1e-2 on the next-token loss; prints every 10th step's loss (and note()); the losses."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        inputs, targets = batch_of(perm, batch, generator)
        loss = F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 10 == 0 or step == steps - 1:
            print("step %3d  loss %.3f%s" % (step, losses[-1], note()))
    assert all(math.isfinite(x) for x in losses)
    return losses
