"""grape.distributed.attention on 2 and 4 gloo processes against the single-process
grape.torch.attention on the whole sequence: every rank's output rows and the gradients of q, k, v,
of the per-token arrays (shards) and of the parameters (summed over the ranks) for every encoding
kind the fused attention takes, causal and not, GQA, a batch of two."""
import os
import socket
import tempfile
import traceback

import pytest
import torch

import grape
import grape.torch as gt

dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

T, H, D = 32, 4, 16   # tokens (a multiple of 2 x 4 ranks), query heads, head dim


def _cases():
    """name -> (encoding, keyword tensors, causal). Tensors are built from a fixed seed, the same on
    every rank; per-token arrays have the token axis last but one ([.., T, P]) or last."""
    g = torch.Generator().manual_seed(7)
    normal = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    rope = grape.rope(head_dim=D)
    return {
        "none": (None, {}, True),
        "none_full": (None, {}, False),
        "rope": (rope, {}, True),
        "rope_learned_freq": (rope, {"inv_freq": torch.tensor(rope.inv_freq, dtype=torch.float64)}, True),
        "alibi": (None, {"slopes": torch.tensor(grape.alibi_slopes(H), dtype=torch.float64)}, True),
        "alibi_full": (None, {"slopes": torch.tensor(grape.alibi_slopes(H), dtype=torch.float64)}, False),
        "rope_alibi": (rope, {"slopes": torch.tensor(grape.alibi_slopes(H), dtype=torch.float64)}, True),
        "xpos": (grape.encoding("xpos", head_dim=D), {}, True),  # a built-in through grape.encoding
        "t5": (grape.t5(normal(32, H).numpy(), max_distance=64), {"t5_table": normal(32, H)}, False),
        "fox": (None, {"log_forget": torch.nn.functional.logsigmoid(normal(H, T) + 2)}, True),
        "fox_per_batch": (None, {"log_forget": torch.nn.functional.logsigmoid(normal(2, H, T) + 2)}, True),
        "grape_a": (None, {"grape_a": (normal(H).abs() * 0.1, normal(H, T).abs(), normal(H, T).abs())}, True),
        "grape_ap": (None, {"grape_ap": normal(H, T, 8)}, True),
        "grape_m": (None, {"grape_m": (normal(D // 2).abs() * 0.1, normal(1, T).cumsum(-1))}, True),
    }


# The keyword tensors that are per-token arrays (sharded along this axis) and those passed whole.
PER_TOKEN_AXIS = {"log_forget": -1, "grape_ap": -2}


def _shard_kwargs(kw, gd):
    """The keyword arguments as a rank passes them: per-token arrays as its shard."""
    out = {}
    for name, value in kw.items():
        if name in PER_TOKEN_AXIS:
            out[name] = gd.shard(value, dim=PER_TOKEN_AXIS[name])
        elif name == "grape_a":
            out[name] = (value[0],) + tuple(gd.shard(x, dim=-1) for x in value[1:])
        elif name == "grape_m":
            out[name] = (value[0], gd.shard(value[1], dim=-1))
        else:
            out[name] = value
    return out


def _leaves(kw):
    """The keyword tensors, flattened (tuples opened), in a fixed order."""
    leaves = []
    for name in sorted(kw):
        value = kw[name]
        leaves.extend(value if isinstance(value, tuple) else [value])
    return leaves


def _run_case(name, rank, world, kv_heads):
    import grape.distributed as gd
    encoding, kw, causal = _cases()[name]
    g = torch.Generator().manual_seed(11)
    q = torch.randn(2, T, H, D, generator=g)
    k = torch.randn(2, T, kv_heads, D, generator=g)
    v = torch.randn(2, T, kv_heads, D, generator=g)
    w = torch.randn(2, T, H, D, generator=g)  # the loss's weights: L = sum(out * w)

    # The single-process call on the whole sequence.
    full = {n: [x.clone().requires_grad_() for x in (v if isinstance(v, tuple) else (v,))] for n, v in kw.items()}
    full_kw = {n: (tuple(x) if isinstance(kw[n], tuple) else x[0]) for n, x in full.items()}
    qf, kf, vf = (x.clone().requires_grad_() for x in (q, k, v))
    ref = gt.attention(qf, kf, vf, encoding, causal=causal, **full_kw)
    (ref * w).sum().backward()

    # This rank's shard.
    qs, ks, vs = (gd.shard(x).clone().requires_grad_() for x in (q, k, v))
    sharded = _shard_kwargs(kw, gd)
    mine = {n: [x.clone().requires_grad_() for x in (v if isinstance(v, tuple) else (v,))] for n, v in sharded.items()}
    mine_kw = {n: (tuple(x) if isinstance(sharded[n], tuple) else x[0]) for n, x in mine.items()}
    out = gd.attention(qs, ks, vs, encoding, causal=causal, **mine_kw)
    (out * gd.shard(w)).sum().backward()

    errors = {"out": (out - gd.shard(ref)).abs().max().item()}
    for label, got, want in (("dq", qs.grad, qf.grad), ("dk", ks.grad, kf.grad), ("dv", vs.grad, vf.grad)):
        errors[label] = (got - gd.shard(want)).abs().max().item()
    for n in sorted(kw):
        for i, (a, b) in enumerate(zip(mine[n], full[n])):
            grad = a.grad if a.grad is not None else torch.zeros_like(a)
            if n in PER_TOKEN_AXIS or (n in ("grape_a", "grape_m") and i > 0):
                axis = PER_TOKEN_AXIS.get(n, -1)
                errors["d%s%d" % (n, i)] = (grad - gd.shard(b.grad, dim=axis)).abs().max().item()
            else:  # a parameter passed whole: this rank's share, summed over the group
                total = grad.clone()
                dist.all_reduce(total)
                errors["d%s%d" % (n, i)] = ((total - b.grad).abs().max() / (1 + b.grad.abs().max())).item()
    return errors


def _packed_errors(kv_heads):
    """A packed batch of three sequences (8, 0 and 24 tokens) with RoPE and learned ALiBi slopes:
    this rank's rows and gradients against the single-process packed call."""
    import grape.distributed as gd
    cu = torch.tensor([0, 8, 8, 32], dtype=torch.int32)
    g = torch.Generator().manual_seed(13)
    q, w = torch.randn(32, H, D, generator=g), torch.randn(32, H, D, generator=g)
    k, v = torch.randn(32, kv_heads, D, generator=g), torch.randn(32, kv_heads, D, generator=g)
    slopes = torch.tensor(grape.alibi_slopes(H), dtype=torch.float64)
    rope = grape.rope(head_dim=D)
    qf, kf, vf, sf = (x.clone().requires_grad_() for x in (q, k, v, slopes))
    ref = gt.attention(qf, kf, vf, rope, slopes=sf, cu_seqlens=cu, causal=True)
    (ref * w).sum().backward()
    qs, ks, vs = (gd.shard(x, 0, cu_seqlens=cu).clone().requires_grad_() for x in (q, k, v))
    ss = slopes.clone().requires_grad_()
    out = gd.attention(qs, ks, vs, rope, slopes=ss, cu_seqlens=cu, causal=True)
    (out * gd.shard(w, 0, cu_seqlens=cu)).sum().backward()
    whole = gd.unshard(out.detach(), 0, cu_seqlens=cu)
    slope_grad = ss.grad.clone()
    dist.all_reduce(slope_grad)
    errors = {"out": (out - gd.shard(ref, 0, cu_seqlens=cu)).abs().max().item(),
              "unshard": (whole - ref).abs().max().item(),
              "dslopes": ((slope_grad - sf.grad).abs().max() / (1 + sf.grad.abs().max())).item()}
    for label, got, want in (("dq", qs.grad, qf.grad), ("dk", ks.grad, kf.grad), ("dv", vs.grad, vf.grad)):
        errors[label] = (got - gd.shard(want, 0, cu_seqlens=cu)).abs().max().item()
    return errors


def _docs_example_error():
    """docs/distributed.md's example, run as written on this rank: its gathered output against the
    single-process call on the same whole tensors."""
    import re
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "distributed.md"), encoding="utf-8").read()
    namespace = {}
    exec(compile(re.findall(r"```python\n(.*?)```", text, re.S)[0], "docs/distributed.md", "exec"), namespace)
    want = gt.attention(namespace["q"], namespace["k"], namespace["v"], log_forget=namespace["log_forget"], causal=True)
    return (namespace["whole"] - want).abs().max().item()


def _packed_fox_errors(kv_heads):
    """A packed batch of two sequences (8 and 24 tokens) with FoX's gates along the packed tokens:
    this rank's rows and the gradients of q, k, v and the gates against one single-process call per
    sequence (each with its own gates)."""
    import grape.distributed as gd
    cu = torch.tensor([0, 8, 32])
    g = torch.Generator().manual_seed(17)
    q, w = torch.randn(32, H, D, generator=g), torch.randn(32, H, D, generator=g)
    k, v = torch.randn(32, kv_heads, D, generator=g), torch.randn(32, kv_heads, D, generator=g)
    gates = torch.nn.functional.logsigmoid(torch.randn(H, 32, generator=g, dtype=torch.float64) + 2)
    qf, kf, vf, gf = (x.clone().requires_grad_() for x in (q, k, v, gates))
    ref = torch.cat([gt.attention(qf[a:b][None], kf[a:b][None], vf[a:b][None], log_forget=gf[:, a:b], causal=True)[0]
                     for a, b in ((0, 8), (8, 32))])
    (ref * w).sum().backward()
    qs, ks, vs = (gd.shard(x, 0, cu_seqlens=cu).clone().requires_grad_() for x in (q, k, v))
    gs = gd.shard(gates, -1, cu_seqlens=cu).clone().requires_grad_()
    out = gd.attention(qs, ks, vs, log_forget=gs, cu_seqlens=cu, causal=True)
    (out * gd.shard(w, 0, cu_seqlens=cu)).sum().backward()
    errors = {"out": (out - gd.shard(ref, 0, cu_seqlens=cu)).abs().max().item(),
              "dgates": (gs.grad - gd.shard(gf.grad, -1, cu_seqlens=cu)).abs().max().item()}
    for label, got, want in (("dq", qs.grad, qf.grad), ("dk", ks.grad, kf.grad), ("dv", vs.grad, vf.grad)):
        errors[label] = (got - gd.shard(want, 0, cu_seqlens=cu)).abs().max().item()
    return errors


def _exclusive_cumsum_errors():
    """gd.exclusive_cumsum of each rank's shard against the whole sequence's exclusive sum, and the
    gradient of the shard (L = sum(sum * w) over every rank) against the whole one's."""
    import grape.distributed as gd
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(3, T, generator=g, dtype=torch.float64), torch.randn(3, T, generator=g, dtype=torch.float64)
    xf = x.clone().requires_grad_()
    want = torch.cumsum(xf, -1) - xf
    (want * w).sum().backward()
    xs = gd.shard(x, -1).clone().requires_grad_()
    got = gd.exclusive_cumsum(xs)
    (got * gd.shard(w, -1)).sum().backward()
    return {"sum": (got - gd.shard(want, -1)).abs().max().item(),
            "grad": (xs.grad - gd.shard(xf.grad, -1)).abs().max().item()}


def _refusals():
    """The one-line errors of arguments a shard cannot take, one per line (checked in the test)."""
    import grape.distributed as gd
    q = torch.randn(1, 6, H, D)
    calls = {
        "seq_len": lambda: gd.attention(torch.randn(1, 3, H, D), torch.randn(1, 3, H, D), torch.randn(1, 3, H, D)),
        "layout": lambda: gd.attention(torch.randn(6, H, D), torch.randn(6, H, D), torch.randn(6, H, D)),
        "lift": lambda: gd.attention(q, q, q, grape.encoding("grape_a", heads=H, head_dim=D)),
        "packed_arrays": lambda: gd.attention(q[0], q[0], q[0], log_forget=torch.zeros(1, H, 6), cu_seqlens=[0, 12]),
        "packed_tokens": lambda: gd.attention(q[0], q[0], q[0], cu_seqlens=[0, 8, 16]),
    }
    lines = []
    for name, call in calls.items():
        try:
            call()
            lines.append("%s accepted" % name)
        except grape.GrapeError as e:
            lines.append("%s %s" % (name, str(e).replace(" ", "_")))
    return lines


def _worker(rank, world, port, results, kv_heads):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        lines = []
        for name in _cases():
            try:
                errors = _run_case(name, rank, world, kv_heads)
                lines.append("%s %s" % (name, " ".join("%s=%.3e" % e for e in errors.items())))
            except Exception:  # noqa: BLE001: reported in the test
                lines.append("%s ERROR %s" % (name, traceback.format_exc().replace("\n", " | ")))
        lines += ["refused_" + line for line in _refusals()]
        lines.append("packed " + " ".join("%s=%.3e" % e for e in _packed_errors(kv_heads).items()))
        lines.append("docs_example err=%.3e" % _docs_example_error())
        lines.append("packed_fox " + " ".join("%s=%.3e" % e for e in _packed_fox_errors(kv_heads).items()))
        lines.append("exclusive_cumsum " + " ".join("%s=%.3e" % e for e in _exclusive_cumsum_errors().items()))
        with open(os.path.join(results, "rank%d" % rank), "w") as f:
            f.write("\n".join(lines))
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=[(2, H), (4, H // 2)], ids=["2ranks", "4ranks_gqa"])
def reports(request):
    world, kv_heads = request.param
    with tempfile.TemporaryDirectory() as results:
        mp.spawn(_worker, args=(world, _free_port(), results, kv_heads), nprocs=world, join=True)
        out = {}
        for rank in range(world):
            with open(os.path.join(results, "rank%d" % rank)) as f:
                for line in f.read().splitlines():
                    name, rest = line.split(" ", 1)
                    out.setdefault(name, []).append(rest)
        return world, out


@pytest.mark.parametrize("case", list(_cases()))
def test_every_rank_matches_the_single_process_call(reports, case):
    world, out = reports
    assert len(out[case]) == world
    for rank, line in enumerate(out[case]):
        assert "ERROR" not in line, "rank %d: %s" % (rank, line)
        errors = dict(item.split("=") for item in line.split())
        for label, value in errors.items():
            assert float(value) <= 2e-5, "rank %d %s: %s" % (rank, label, line)


@pytest.mark.parametrize("name, message", [
    ("seq_len", "grape:_q:_a_rank's_shard_holds_two_chunks_of_equal_length_(shard()):_its_token_count_must_be_even_(got_3)"),
    ("layout", "grape:_q:_distributed.attention_takes_[batch,_seq,_heads,_d]_shards"),
    ("lift", "grape:_keys:_a_lift_(GRAPE-A)"),
    ("packed_arrays", "grape:_cu_seqlens:_the_per-token_arrays_of_a_packed_batch_have_no_batch_axis"),
    ("packed_tokens", "grape:_q:_this_rank's_shard_of_the_packed_batch_holds_"),
])
def test_what_a_shard_cannot_take_is_refused_in_one_line(reports, name, message):
    world, out = reports
    for line in out["refused_" + name]:
        assert line.startswith(message), line


def test_exclusive_cumsum_gives_each_rank_its_tokens_sums_over_the_whole_sequence(reports):
    world, out = reports
    for line in out["exclusive_cumsum"]:
        errors = dict(item.split("=") for item in line.split())
        assert set(errors) == {"sum", "grad"} and all(float(e) <= 1e-12 for e in errors.values()), line


def test_a_packed_batch_matches_the_single_process_packed_call(reports):
    world, out = reports
    for line in out["packed"]:
        errors = dict(item.split("=") for item in line.split())
        assert set(errors) == {"out", "unshard", "dslopes", "dq", "dk", "dv"}, line
        assert all(float(e) <= 2e-5 for e in errors.values()), line


def test_the_docs_example_runs_and_gives_the_whole_attention(reports):
    world, out = reports
    for line in out["docs_example"]:
        assert float(line.split("=")[1]) <= 2e-6, line


def test_a_packed_batch_takes_per_token_arrays_along_its_tokens(reports):
    world, out = reports
    for line in out["packed_fox"]:
        errors = dict(item.split("=") for item in line.split())
        assert set(errors) == {"out", "dgates", "dq", "dk", "dv"}, line
        assert all(float(e) <= 2e-5 for e in errors.values()), line
