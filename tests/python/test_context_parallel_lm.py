"""examples/python/context_parallel_lm.py: a FoX language model trained in one process and with its
sequence split over 2 gloo ranks (grape.distributed + DDP) gives the same loss at every step, and
the loss falls."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))

import context_parallel_lm  # noqa: E402


def test_context_parallel_training_follows_the_single_process_loss_curve():
    single, sharded = context_parallel_lm.main(["--ranks", "2", "--steps", "12"])
    assert len(single) == len(sharded) == 12
    assert all(math.isfinite(x) for x in single + sharded)
    for step, (a, b) in enumerate(zip(single, sharded)):
        assert abs(a - b) <= 1e-5 * max(1.0, abs(a)), (step, a, b)
    assert math.isclose(single[0], math.log(context_parallel_lm.VOCAB), rel_tol=0.05)
    assert sum(single[-3:]) < sum(single[:3]) - 0.3, single
