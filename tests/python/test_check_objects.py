"""grape.check on encoding objects with their own values: a RotaryEncoding as a Python rotation,
ALiBi's and T5's objects as Python score biases, whose values equal grape's C++ bias tiles."""
import numpy as np
import pytest
import torch

import grape
from grape._check_objects import alibi_values, t5_buckets


def _grid(n):
    positions = torch.arange(n)
    return positions.view(1, n, 1), positions.view(1, 1, n)


def test_the_alibi_mirror_equals_grapes_alibi_tile():
    slopes = grape.alibi(heads=5).slopes
    q_pos, k_pos = _grid(40)
    got = alibi_values(torch.arange(5).view(5, 1, 1), q_pos, k_pos, torch.tensor(slopes, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), grape.alibi_bias(slopes, 40, 40), rtol=1e-6, atol=0)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_the_t5_buckets_equal_grapes_t5_tile_out_to_far_distances(bidirectional):
    table = np.arange(32 * 2, dtype=np.float64).reshape(32, 2)  # value = 2 * bucket + head: reads the bucket back
    q_pos, k_pos = _grid(300)
    buckets = t5_buckets(q_pos, k_pos, 32, 100, bidirectional)[0]
    want = grape.t5_bias(table, 300, 300, max_distance=100, bidirectional=bidirectional)
    np.testing.assert_array_equal(buckets.numpy(), want[0] // 2)
    # Every bucket reached (bidirectional: bucket 16 would be a later key at distance 0, which none is).
    assert len(np.unique(want[0])) == (31 if bidirectional else 32)


@pytest.mark.parametrize("make", [
    lambda: grape.rope(head_dim=16, base=500.0),
    lambda: grape.alibi(heads=3),
    lambda: grape.t5(np.random.default_rng(1).normal(size=(32, 2)), max_distance=64),
], ids=["rope", "alibi", "t5"])
def test_an_encoding_object_is_checked_with_its_own_values(make):
    report = grape.check(make(), trials=20)
    assert report.passed, str(report)
    assert {"finite", "relative", "attention_kernel"} <= {law.name for law in report.laws}


def test_an_object_grape_cannot_check_is_refused_in_one_line():
    with pytest.raises(grape.GrapeError, match=r"^grape: check: takes a built-in's name or grape.encoding\(...\) object, .* \(got object\)$"):
        grape.check(object())


def test_a_builtin_made_by_grape_encoding_is_checked_at_its_own_parameters():
    report = grape.check(grape.encoding("xpos", head_dim=16), trials=10)
    assert report.passed, str(report)
    assert report.parameters.startswith("fixed: head_dim=16 base=10000 scale_base=512"), report.parameters
    nested = grape.check(grape.encoding("rope_alibi", heads=4), trials=5)
    assert nested.parameters.startswith("fixed: rotary={head_dim=128"), nested.parameters
    assert "heads=4" in nested.parameters
    # At a quarter of the scale base xPos's key scale overflows f16 within a few thousand positions:
    # the kernel law fails at these parameters, where random ones pass.
    fast = grape.check(grape.encoding("xpos", head_dim=16, scale_base=128), trials=10)
    assert not fast.passed
    assert "a value is not finite" in fast.law("cpu_kernel").counterexample.what
    assert "error n/a" in str(fast)
