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
import os

import torch
import torch.nn as nn

import grape
import grape.torch as gt
from permutation_lm import HEADS, WIDTH, Block, TinyLM, task, train

EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(name):
    """The encoding type and the encoding of this model's heads."""
    if name == "quaternion":
        kind = grape.load_encoding(os.path.join(EXAMPLES, "quaternion_rope.hpp"), "quaternion_rope<>")
        return kind, kind.make(WIDTH // HEADS, 10000.0, 7)  # params: head_dim, base, axis_seed (in order)
    kind = grape.load_encoding(os.path.join(EXAMPLES, "log_distance.hpp"), "log_distance")
    return kind, kind.make(HEADS, WIDTH // HEADS)  # params: heads, head_dim


class EncodedBlock(Block):
    def __init__(self, encoding):
        super().__init__()
        self.encoding = encoding
        # A score bias that declares its parameters (log_distance's slopes) trains them.
        learnable = bool(encoding.bias_params)
        self.bias_params = nn.Parameter(torch.tensor(encoding.bias_params, dtype=torch.float64)) if learnable else None

    def attend(self, q, k, v):
        return gt.attention(q, k, v, self.encoding, bias_params=self.bias_params, causal=True)


def main(argv=None):
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--encoding", choices=("quaternion", "log_distance"), default="quaternion")
    args.add_argument("--steps", type=int, default=40)
    args.add_argument("--batch", type=int, default=8)
    args = args.parse_args(argv)
    generator, perm = task()
    kind, encoding = load(args.encoding)
    report = kind.check(trials=20)  # the laws the type claims, before training with it
    print(report)
    model = TinyLM(lambda: EncodedBlock(encoding))
    losses = train(model, perm, generator, args.steps, args.batch)
    slopes = [b.bias_params.detach().clone() for b in model.blocks if b.bias_params is not None]
    return {"losses": losses, "report": report, "slopes_before": encoding.bias_params, "slopes_after": slopes}


if __name__ == "__main__":
    main()
