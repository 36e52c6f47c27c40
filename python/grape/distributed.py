"""grape.distributed: context-parallel fused attention over a torch.distributed process group.

    import grape.distributed as gd
    q, k, v = (gd.shard(x) for x in (q, k, v))        # [batch, seq, heads, d] -> this rank's tokens
    out = gd.attention(q, k, v, encoding, causal=True)  # this rank's rows of the whole attention
    whole = gd.unshard(out)                           # every rank's rows, in sequence order

The sequence of T tokens is cut into 2W chunks of c = T / 2W tokens for the W ranks of the group;
rank r holds chunks r and 2W - 1 - r (zigzag), so that under a causal mask every rank attends as
many keys as every other. K and V travel around the ring (isend / irecv: the next block's transfer
runs while the current block is attended); each query chunk meets each key chunk of the block that
its mask lets in, through grape's fused attention with queries and keys at their true positions
(key_positions), and the partial outputs merge by their log-sum-exps. The backward runs the same
ring from the merged output and log-sum-exp: each block's dK and dV travel on with it and reach
their owner after a full turn.

Every encoding grape.torch.attention takes enters every block at its place: a rotation turns the
block's queries and keys at their positions, a bias adds bias(h, query position, key position).
The per-token arrays of the path-dependent biases (FoX's log forget gates, gated GRAPE-A's gates,
GRAPE-AP's projections) are this rank's shard: they are all-gathered over the group first, since a
bias on the path from a key to its query reads every position between them, and each block then
reads the sequence's state at its own positions (exact: the same values the single-process call
reads). Contextual GRAPE-M's phases are this rank's shard too: each rank turns its own Q and K by
them before the ring (exclusive_cumsum gives the running sums they usually are).

Gradients: q, k, v and the per-token arrays (shards) get their whole gradient, the sum of every
rank's use of their tokens. A parameter every rank passes whole (slopes, inv_freq, a T5 table,
omega, GRAPE-M's freqs) gets this rank's share: the gradient of this rank's outputs. Summed over
the group it is the single-process gradient: DDP over the group averages it, the gradient of the
mean of the ranks' losses (a rank's loss the mean over its tokens: the global mean when shards are
equal). docs/distributed.md gives the algorithm, the bytes each step moves and measured times.
"""
import torch as _torch
import torch.distributed as _dist

import grape as _grape
from grape import _torch_attention as _kinds

# ---------------------------------------------------------------------------------------------
# The zigzag split


def _rank_world(group):
    return _dist.get_rank(group), _dist.get_world_size(group)


def chunks(rank, world):
    """The two chunks of the sequence that rank `rank` of `world` holds (zigzag): r and 2W - 1 - r."""
    return rank, 2 * world - 1 - rank


def _chunk_size(seq_len, world):
    if seq_len % (2 * world) != 0:
        raise _grape.GrapeError("grape: seq_len: must be a multiple of 2 x the group's size, %d (got %d)"
                                % (2 * world, seq_len))
    return seq_len // (2 * world)


def chunk_positions(chunk, c):
    """The positions of chunk `chunk` of c tokens."""
    return _torch.arange(chunk * c, (chunk + 1) * c, dtype=_torch.int64)


def _lengths(cu_seqlens, what="cu_seqlens"):
    """The sequence lengths of a packed batch's cumulative lengths (the whole batch's, the same on
    every rank)."""
    cu = _torch.as_tensor(cu_seqlens).to(_torch.int64).flatten()
    lengths = cu[1:] - cu[:-1]
    if cu.numel() < 2 or cu[0] != 0 or bool((lengths < 0).any()):
        raise _grape.GrapeError("grape: %s: must be the whole batch's cumulative lengths [0, ..., total], "
                                "non-decreasing (got %s)" % (what, cu.tolist()))
    return [int(n) for n in lengths]


def positions(seq_len, group=None, cu_seqlens=None):
    """The positions of this rank's tokens, its two chunks in order: int64 [2c] for one sequence of
    seq_len tokens (0 .. seq_len - 1); with cu_seqlens (a packed batch; seq_len ignored), each
    sequence's two chunks in turn, positions counted from each sequence's start."""
    rank, world = _rank_world(group)
    if cu_seqlens is not None:
        return _torch.cat([positions(n, group) for n in _lengths(cu_seqlens)])
    c = _chunk_size(seq_len, world)
    return _torch.cat([chunk_positions(i, c) for i in chunks(rank, world)])


def shard(x, dim=1, group=None, cu_seqlens=None):
    """This rank's tokens of a tensor that holds the whole sequence along `dim` (its two chunks);
    with cu_seqlens, a packed batch along `dim` (dim=0 for [tokens, heads, d]): each sequence's two
    chunks in turn."""
    if cu_seqlens is not None:
        starts = _torch.as_tensor(cu_seqlens).to(_torch.int64).flatten().tolist()
        return _torch.cat([shard(x.narrow(dim, a, n), dim, group)
                           for a, n in zip(starts, _lengths(cu_seqlens))], dim=dim)
    rank, world = _rank_world(group)
    c = _chunk_size(x.shape[dim], world)
    return _torch.cat([x.narrow(dim, i * c, c) for i in chunks(rank, world)], dim=dim)


def _local_segments(cu_seqlens, world):
    """(start, length) of each packed sequence within a rank's shard (length / W tokens each)."""
    segments, start = [], 0
    for n in _lengths(cu_seqlens):
        _chunk_size(n, world)
        segments.append((start, n // world))
        start += n // world
    return segments


def unshard(x, dim=1, group=None, cu_seqlens=None):
    """The whole sequence along `dim` from every rank's shard (all-gather, the chunks in sequence
    order; with cu_seqlens, the packed batch). Differentiable: each rank's shard gets the gradient
    of every rank's use of its tokens."""
    if cu_seqlens is not None:
        world = _rank_world(group)[1]
        return _torch.cat([unshard(x.narrow(dim, a, n), dim, group)
                           for a, n in _local_segments(cu_seqlens, world)], dim=dim)
    if x.shape[dim] == 0:  # every rank's shard is empty (gloo's all-gather stops the process on one)
        return x
    return _Unshard.apply(x, dim, group)


class _Unshard(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        rank, world = _rank_world(group)
        pieces = [_torch.empty_like(x) for _ in range(world)]
        _dist.all_gather(pieces, x.contiguous(), group=group)
        c = x.shape[dim] // 2
        in_order = [None] * (2 * world)
        for r, piece in enumerate(pieces):
            for half, chunk in enumerate(chunks(r, world)):
                in_order[chunk] = piece.narrow(dim, half * c, c)
        return _torch.cat(in_order, dim=dim)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        _dist.all_reduce(grad, group=ctx.group)
        return shard(grad, ctx.dim, ctx.group), None, None


def exclusive_cumsum(x, dim=-1, group=None):
    """This rank's tokens of the exclusive running sum over the whole sequence of per-token values
    given as this rank's shard along `dim` (contextual GRAPE-M's phases from its per-token
    increments): for the token at position p, the sum of the values at positions 0 .. p - 1.
    Differentiable; the shards are all-gathered once."""
    whole = unshard(x, dim, group)
    return shard(_torch.cumsum(whole, dim) - whole, dim, group)


# ---------------------------------------------------------------------------------------------
# Which key chunks each query chunk meets


def _pairs(rank, owner, world, causal):
    """For this rank's query chunks (0, 1) and the key block from `owner`: the owner's chunks (0, 1)
    each query chunk sees whole, and whether it also meets its own chunk under the causal mask
    (the block is this rank's own)."""
    mine, theirs = chunks(rank, world), chunks(owner, world)
    whole, diagonal = [], []
    for i, qc in enumerate(mine):
        whole.append([j for j, kc in enumerate(theirs) if not causal or kc < qc])
        diagonal.append(causal and qc in theirs)
    return whole, diagonal


class _Block:
    """The fused attention of one query chunk against key chunks, with the call's kind, tensors and
    options: queries at their positions, keys at theirs (causal only on the diagonal chunk, where
    queries and keys are the same tokens)."""

    def __init__(self, kind, params, spec, options, batch):
        self.kind, self.params, self.spec, self.options, self.batch = kind, params, spec, options, batch

    def _options(self, q_pos, k_pos):
        ids = lambda p: p.repeat(self.batch)  # noqa: E731: one id per token, batch-major
        if k_pos is None:
            return dict(self.options, positions=ids(q_pos), causal=True)
        return dict(self.options, positions=ids(q_pos), key_positions=ids(k_pos), causal=False)

    def forward(self, q, k, v, q_pos, k_pos):
        out, lse = _kinds.forward(q, k, v, self.kind, self.params, self.spec, self._options(q_pos, k_pos))
        return out, lse.reshape(lse.shape[0], self.batch, -1).transpose(0, 1)  # lse [batch, heads, tokens]

    def backward(self, grad_out, q, k, v, out, lse, q_pos, k_pos, wanted):
        lse = lse.transpose(0, 1).reshape(lse.shape[1], -1).contiguous()
        return _kinds.backward(grad_out, q, k, v, out.contiguous(), lse, self.kind, self.params, self.spec,
                               self._options(q_pos, k_pos), wanted)


def _global_ranks(group, world):
    """The group's ranks in the default group (point-to-point ops name peers by those)."""
    if group is None:
        return list(range(world))
    if hasattr(_dist, "get_process_group_ranks"):
        return list(_dist.get_process_group_ranks(group))
    return [_dist.distributed_c10d._get_global_rank(group, r) for r in range(world)]  # torch 1.13


def _merge(out, lse, part_out, part_lse):
    """Two partial attentions of the same queries merged by their log-sum-exps, in float32 (out
    [batch, tokens, heads, d], lse [batch, heads, tokens]; out None: nothing yet)."""
    if out is None:
        return part_out.float(), part_lse.clone()
    new = _torch.logaddexp(lse, part_lse)
    base = _torch.where(_torch.isfinite(new), new, _torch.zeros_like(new))  # a row that saw no key yet
    weight = lambda l: _torch.exp(l - base).transpose(1, 2).unsqueeze(-1)  # noqa: E731
    return out * weight(lse) + part_out.float() * weight(part_lse), new


class _Ring:
    """Blocks of K and V (and, backward, their gradients) passing to the next rank: post() starts
    sending the current tensors and receiving the previous rank's, wait() makes those current."""

    def __init__(self, group):
        self.group = group
        self.rank, self.world = _rank_world(group)
        ranks = _global_ranks(group, self.world)
        self.next, self.previous = ranks[(self.rank + 1) % self.world], ranks[(self.rank - 1) % self.world]
        self.requests, self.incoming = [], None

    def post(self, tensors):
        self.incoming = [_torch.empty_like(t) for t in tensors]
        ops = [_dist.P2POp(_dist.isend, t.contiguous(), self.next, self.group) for t in tensors]
        ops += [_dist.P2POp(_dist.irecv, t, self.previous, self.group) for t in self.incoming]
        self.requests = _dist.batch_isend_irecv(ops)

    def wait(self):
        for r in self.requests:
            r.wait()
        incoming, self.incoming, self.requests = self.incoming, None, []
        return incoming

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        """A call that raised (on every rank alike: a refused argument) still completes the
        transfers it posted, so that they do not meet the group's next collective."""
        if error is not None and self.requests:
            self.wait()
        return False


def _chunk(x, i, c):
    return x.narrow(1, i * c, c)


def _chunks_of(x, which, c):
    return _torch.cat([_chunk(x, j, c) for j in which], dim=1) if len(which) > 1 else _chunk(x, which[0], c)


class _RingAttention(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, kind, spec, options, group, *params):
        rank, world = _rank_world(group)
        c = q.shape[1] // 2
        block = _Block(kind, list(params), spec, options, q.shape[0])
        mine = chunks(rank, world)
        out, lse = [None, None], [None, None]
        with _Ring(group) as ring:
            kb, vb = k, v
            for step in range(world):
                if step + 1 < world:
                    ring.post([kb, vb])
                owner = (rank - step) % world
                whole, diagonal = _pairs(rank, owner, world, options["causal"])
                theirs = chunks(owner, world)
                for i in (0, 1):
                    qi, parts = _chunk(q, i, c), []
                    if diagonal[i]:
                        parts.append(block.forward(qi, _chunk(kb, i, c), _chunk(vb, i, c), chunk_positions(mine[i], c),
                                                   None))
                    if whole[i]:
                        k_pos = _torch.cat([chunk_positions(theirs[j], c) for j in whole[i]])
                        parts.append(block.forward(qi, _chunks_of(kb, whole[i], c), _chunks_of(vb, whole[i], c),
                                                   chunk_positions(mine[i], c), k_pos))
                    for part in parts:
                        out[i], lse[i] = _merge(out[i], lse[i], *part)
                if step + 1 < world:
                    kb, vb = ring.wait()
        out = _torch.cat(out, dim=1).to(q.dtype)
        lse = _torch.cat(lse, dim=2)
        ctx.save_for_backward(q, k, v, out, lse, *params)
        ctx.meta = (kind, spec, options, group)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        kind, spec, options, group = ctx.meta
        q, k, v, out, lse, *params = ctx.saved_tensors
        wanted = list(ctx.needs_input_grad[7:])
        rank, world = _rank_world(group)
        c = q.shape[1] // 2
        block = _Block(kind, params, spec, options, q.shape[0])
        mine = chunks(rank, world)
        grad_out = grad_out.to(q.dtype)
        dq = _torch.zeros(q.shape, dtype=_torch.float32, device=q.device)
        d_params = [_torch.zeros_like(p, dtype=_torch.float64) for p in params]
        with _Ring(group) as ring:
            kb, vb = k, v
            dkb = _torch.zeros(k.shape, dtype=_torch.float32, device=k.device)
            dvb = _torch.zeros(v.shape, dtype=_torch.float32, device=v.device)
            for step in range(world):
                if step + 1 < world:
                    ring.post([kb, vb])
                owner = (rank - step) % world
                whole, diagonal = _pairs(rank, owner, world, options["causal"])
                theirs = chunks(owner, world)
                for i in (0, 1):
                    args = (_chunk(grad_out, i, c), _chunk(q, i, c))
                    saved = (_chunk(out, i, c), lse.narrow(2, i * c, c))
                    calls = []
                    if diagonal[i]:
                        calls.append(([i], chunk_positions(mine[i], c), None))
                    if whole[i]:
                        calls.append((whole[i], chunk_positions(mine[i], c),
                                      _torch.cat([chunk_positions(theirs[j], c) for j in whole[i]])))
                    for which, q_pos, k_pos in calls:
                        g = block.backward(args[0], args[1], _chunks_of(kb, which, c), _chunks_of(vb, which, c),
                                           *saved, q_pos, k_pos, wanted)
                        _chunk(dq, i, c).add_(g[0].float())
                        for n, j in enumerate(which):
                            _chunk(dkb, j, c).add_(g[1].narrow(1, n * c, c).float())
                            _chunk(dvb, j, c).add_(g[2].narrow(1, n * c, c).float())
                        for d, gp in zip(d_params, g[3:]):
                            d.add_(gp.to(_torch.float64))
                # The block's gradients travel on with it; after the last step they go home.
                if step + 1 < world:
                    ring_grads = _Ring(group)
                    ring_grads.post([dkb, dvb])
                    kb, vb = ring.wait()
                    dkb, dvb = ring_grads.wait()
        home = _Ring(group)
        home.post([dkb, dvb])
        dk, dv = home.wait()
        grads = [g.to(p.dtype) if w else None for g, p, w in zip(d_params, params, wanted)]
        return (dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None, *grads)


def _ring_runner(group):
    def run(q, k, v, kind, params, spec, options):
        if options.get("offsets") is not None or options.get("cu_seqlens") is not None:
            raise _grape.GrapeError("grape: distributed.attention: q, k, v are [batch, seq, heads, d] shards; "
                                    "offsets and cu_seqlens are not taken (each rank's positions are its chunks')")
        if options.get("window"):
            raise _grape.GrapeError("grape: distributed.attention: window is not taken yet (window = 0)")
        return _RingAttention.apply(q, k, v, kind, spec, options, group, *params)
    return run



def _batched(log_forget, grape_a, grape_ap, grape_m):
    """Whether the per-token arrays carry a batch axis (one sequence of values per batch element)."""
    if log_forget is not None:
        return _torch.as_tensor(log_forget).dim() == 3
    if grape_a is not None:
        return _torch.as_tensor(grape_a[1]).dim() == 3
    if grape_ap is not None:
        projections = grape_ap[0] if isinstance(grape_ap, (tuple, list)) else grape_ap
        return _torch.as_tensor(projections).dim() == 4
    if grape_m is not None:
        return _torch.as_tensor(grape_m[1]).dim() == 3
    return False


def _element(name, value, b):
    """Batch element b's values of a per-token argument given with a batch axis (omega and GRAPE-M's
    frequencies are shared by the batch)."""
    if value is None:
        return None
    if name == "log_forget":
        return value[b]
    if name == "grape_a":
        return (value[0],) + tuple(g[b] for g in value[1:])
    if name == "grape_ap":
        projections, eps = value if isinstance(value, (tuple, list)) else (value, 1e-6)
        return (projections[b], eps)
    return (value[0], value[1][b])  # grape_m


def _segment(name, value, a, n):
    """Tokens a .. a + n of a per-token argument given along the packed batch's token axis."""
    if value is None:
        return None
    if name == "log_forget":
        return value[..., a:a + n]
    if name == "grape_a":
        return (value[0],) + tuple(g[..., a:a + n] for g in value[1:])
    if name == "grape_ap":
        projections, eps = value if isinstance(value, (tuple, list)) else (value, 1e-6)
        return (projections[..., a:a + n, :], eps)
    return (value[0], value[1][..., a:a + n])  # grape_m


def _packed(q, k, v, encoding, options, cu_seqlens, arrays):
    """A packed batch's shards, one ring per sequence; the per-token arrays are this rank's shard of
    the packed batch along their token axis (each sequence's two chunks in turn, as shard() gives)."""
    if _torch.as_tensor(q).dim() != 3:
        raise _grape.GrapeError("grape: q: with cu_seqlens distributed.attention takes packed [tokens, heads, d] "
                                "shards (got shape %s)" % list(q.shape))
    if _batched(*arrays.values()):
        raise _grape.GrapeError("grape: cu_seqlens: the per-token arrays of a packed batch have no batch axis: give "
                                "them along the packed tokens, this rank's shard (shard(x, dim, cu_seqlens=...))")
    segments = _local_segments(cu_seqlens, _rank_world(options["group"])[1])
    total = sum(n for _, n in segments)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.shape[0] != total:
            raise _grape.GrapeError("grape: %s: this rank's shard of the packed batch holds %d tokens, cu_seqlens' "
                                    "total over the group's size (got %d)" % (name, total, x.shape[0]))
    parts = [attention(q[a:a + n].unsqueeze(0), k[a:a + n].unsqueeze(0), v[a:a + n].unsqueeze(0), encoding,
                       **options, **{name: _segment(name, x, a, n) for name, x in arrays.items()})[0]
             for a, n in segments if n > 0]
    return _torch.cat(parts, 0) if parts else _torch.empty_like(q)


def attention(q, k, v, encoding=None, *, slopes=None, inv_freq=None, t5_table=None, log_forget=None, grape_a=None,
              grape_ap=None, grape_m=None, causal=True, scale=None, cu_seqlens=None, group=None):
    """grape.torch.attention over the ranks of `group`, each with its shard of the sequence:
    q, k, v [batch, 2c, heads, d] from shard(); the encoding's per-token arrays as this rank's shard
    along their token axis (log_forget [heads, 2c], grape_a's gates [heads, 2c], grape_ap's
    projections [heads, 2c, P], grape_m's phases [rows, 2c]; with a batch axis first, one sequence of
    values per batch element); the rest as grape.torch.attention takes it, the same on every rank.
    A packed batch: cu_seqlens the whole batch's cumulative lengths (each a multiple of 2W, the
    same on every rank) and q, k, v [tokens, heads, d] from shard(x, 0, cu_seqlens=cu_seqlens);
    each sequence runs its own ring, the per-token arrays given along the packed tokens (this rank's
    shard, without a batch axis).
    Returns this rank's output rows [batch, 2c, heads, d]; differentiable (the module docstring says
    which gradients are whole and which are this rank's share)."""
    options = dict(slopes=slopes, inv_freq=inv_freq, t5_table=t5_table, causal=causal, scale=scale, group=group)
    if cu_seqlens is not None:
        return _packed(q, k, v, encoding, options, cu_seqlens,
                       dict(log_forget=log_forget, grape_a=grape_a, grape_ap=grape_ap, grape_m=grape_m))
    if _torch.as_tensor(q).dim() != 4:
        raise _grape.GrapeError("grape: q: distributed.attention takes [batch, seq, heads, d] shards (got shape %s)"
                                % list(q.shape))
    if q.shape[1] % 2 != 0:
        raise _grape.GrapeError("grape: q: a rank's shard holds two chunks of equal length (shard()): its token "
                                "count must be even (got %d)" % q.shape[1])
    if _batched(log_forget, grape_a, grape_ap, grape_m):  # one ring per batch element
        arrays = dict(log_forget=log_forget, grape_a=grape_a, grape_ap=grape_ap, grape_m=grape_m)
        return _torch.cat([attention(q[b:b + 1], k[b:b + 1], v[b:b + 1], encoding, **options,
                                     **{n: _element(n, a, b) for n, a in arrays.items()})
                           for b in range(q.shape[0])], 0)
    whole = lambda x, axis: None if x is None else unshard(_torch.as_tensor(x), axis, group)  # noqa: E731
    log_forget = whole(log_forget, -1)
    if grape_a is not None:
        grape_a = (grape_a[0],) + tuple(whole(g, -1) for g in grape_a[1:])
    if grape_ap is not None:
        projections, eps = grape_ap if isinstance(grape_ap, (tuple, list)) else (grape_ap, 1e-6)
        grape_ap = (whole(projections, -2), eps)
    from grape import torch as _grape_torch
    if grape_m is not None:  # contextual GRAPE-M turns Q and K by each token's phase: before the ring
        if encoding is not None or slopes is not None or inv_freq is not None or t5_table is not None:
            raise _grape.GrapeError("grape: attention: grape_m is the encoding; give no other")
        # Each rank turns its own tokens only: its shard of the phases is all it reads.
        phases = _torch.as_tensor(grape_m[1])
        if phases.dim() != 2 or phases.shape[1] != q.shape[1]:
            raise _grape.GrapeError("grape: grape_m: phases must be this rank's shard [rows, %d] (got %s)"
                                    % (q.shape[1], list(phases.shape)))
        per_token = phases[0] if phases.shape[0] == 1 else phases.t()  # [2c] or [2c, rows]
        per_token = per_token.unsqueeze(0).expand(q.shape[0], *per_token.shape)
        q, k = _grape_torch.grape_m_rotate_qk(q, k, grape_m[0], per_token)
        grape_m = None
    return _grape_torch._attention_bthd(
        q, k, v, encoding, slopes=slopes, inv_freq=_grape_torch._learned_table(inv_freq), t5_table=t5_table,
        log_forget=log_forget, grape_a=grape_a, grape_ap=grape_ap, grape_m=grape_m, causal=causal, window=0,
        scale=scale, positions=None, offsets=None, cu_seqlens=None, runner=_ring_runner(group))
