"""grape.check on an encoding object grape made (grape.rope/rotary/from_config's RotaryEncoding,
grape.alibi's AlibiEncoding, grape.t5's T5Encoding with its table): the object's own values as a
Python rotation or a Python score bias, checked by the Python laws (grape/_check_python*.py)."""
import math

from ._grape import AlibiEncoding, GrapeError, RotaryEncoding, T5Encoding


def alibi_values(head, q_pos, k_pos, slopes):
    """ALiBi's bias as grape's kernels add it: -slope_h * |m - n|."""
    return -slopes[head] * (q_pos - k_pos).abs().to(slopes.dtype)


def t5_buckets(q_pos, k_pos, num_buckets, max_distance, bidirectional):
    """T5's relative-position bucket of key n for query m (Raffel et al., transformers'
    _relative_position_bucket), on int64 tensors; the logarithm in float64."""
    import torch
    n = k_pos - q_pos
    bucket = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (n > 0).long() * num_buckets
        n = n.abs()
    else:
        n = (-n).clamp(min=0)
    exact = num_buckets // 2
    far = exact + (torch.log(n.double().clamp(min=1) / exact) / math.log(max_distance / exact)
                   * (num_buckets - exact)).long()
    far = far.clamp(max=num_buckets - 1)
    return bucket + torch.where(n < exact, n, far)


def as_python_encoding(encoding):
    """The Python rotation or score bias with the object's values, or None for any other object."""
    import torch
    from ._python_encodings import python_bias
    from ._python_rotations import python_rotation
    if isinstance(encoding, RotaryEncoding):
        return python_rotation(inv_freq=encoding)
    if isinstance(encoding, AlibiEncoding):
        slopes = torch.tensor(list(encoding.slopes), dtype=torch.float64)
        return python_bias(alibi_values, [slopes], name="alibi", heads=len(slopes), claims=("relative",),
                           summary="ALiBi with the object's %d slopes: -slope_h * |m - n|" % len(slopes))
    if isinstance(encoding, T5Encoding):
        table = encoding.table
        if table is None or len(table) == 0:
            raise GrapeError("grape: check: this T5Encoding has buckets but no table (enc.with_table(values, heads))")
        table = torch.tensor(table, dtype=torch.float64).reshape(encoding.num_buckets, -1)
        buckets, distance, both = encoding.num_buckets, encoding.max_distance, encoding.bidirectional

        def t5_values(head, q_pos, k_pos, values):
            return values[t5_buckets(q_pos, k_pos, buckets, distance, both), head]

        return python_bias(t5_values, [table], name="t5", heads=table.shape[1], claims=("relative",),
                           summary="T5 with the object's table [%d buckets, %d heads], max_distance %d%s"
                           % (buckets, table.shape[1], distance, ", bidirectional" if both else ""))
    return None
