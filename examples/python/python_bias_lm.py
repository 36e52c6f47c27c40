"""A tiny language model whose attention adds a score bias written in Python, -lam[h] * log(1 + |m - n|)
with a learnable lam per layer and head, checked by grape.check and trained through grape.torch.attention.

    build/venv/bin/python examples/python/python_bias_lm.py --steps 40

Data: sequences of 64 tokens from a vocabulary of 32 that follow a fixed random permutation
(token t is followed by perm[t]) with a random start, so the loss falls within a few steps.
"""
import argparse

import torch
import torch.nn as nn

import grape
import grape.torch as gt
from permutation_lm import HEADS, Block, TinyLM, task, train


def log_distance(head, q_pos, k_pos, lam):
    """The bias of query position q_pos for key position k_pos in head `head` (broadcast int64 tensors)."""
    return -lam[head] * torch.log1p((q_pos - k_pos).abs().to(lam.dtype))


class LogDistanceBlock(Block):
    def __init__(self):
        super().__init__()
        self.lam = nn.Parameter(torch.full((HEADS,), 0.5))
        self.bias = grape.python_bias(log_distance, [self.lam], name="log_distance", heads=HEADS)

    def attend(self, q, k, v):
        return gt.attention(q, k, v, encoding=self.bias, causal=True)


def main(argv=None):
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--steps", type=int, default=40)
    args.add_argument("--batch", type=int, default=8)
    args = args.parse_args(argv)
    generator, perm = task()
    model = TinyLM(LogDistanceBlock)
    report = grape.check(model.blocks[0].bias, trials=20)  # the laws before training: the bias is what it claims
    print(report)
    lam_before = [block.lam.detach().clone() for block in model.blocks]
    losses = train(model, perm, generator, args.steps, args.batch,
                   note=lambda: "  lam %s" % [round(x, 3) for x in model.blocks[0].lam.tolist()])
    return {"losses": losses, "lam_before": lam_before, "lam_after": [b.lam.detach().clone() for b in model.blocks],
            "report": report}


if __name__ == "__main__":
    main()
