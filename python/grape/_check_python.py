"""grape.check for a score bias written in Python (grape.python_bias): the laws run in this process
on seeded random draws, and a failing draw is shrunk toward position 0 before it is reported."""
import math
import random
import time

from ._check import CheckReport, Counterexample, LawResult
from ._grape import GrapeError

EPS64 = 2.0 ** -52
EPS32 = 2.0 ** -23
EDGE_SHARE = 8            # 1 draw in 8 is an edge case
KERNEL_TILE = (16, 16)    # small tiles, so that the laws' short sequences span several, one of them partial
MAX_KERNEL_LENGTH = 50    # the kernel laws' longest sequence (dense references are T x T)
FD_ENTRIES_PER_TRIAL = 2  # parameter entries compared with central differences per parameter and trial


class _Timed:
    """fn counted and timed: the notes say how much of the check was the user's Python."""

    def __init__(self, fn):
        self.fn, self.calls, self.seconds = fn, 0, 0.0

    def __call__(self, *args):
        start = time.perf_counter()
        try:
            return self.fn(*args)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - start


def _shrink(point, fails, valid, budget=400, together=()):
    """The point (a dict of ints) moved toward 0, one coordinate at a time (to 0, halfway, one step),
    and the coordinates named in `together` all at once by the same step (which keeps their
    differences, what a bias's failure often depends on), as long as the law still fails there and
    the point stays valid."""
    point, tries = dict(point), 0
    improved = True
    while improved and tries < budget:
        improved = False
        low = min((point[key] for key in together), default=0)
        for step in (low, low // 2, 1) if together else ():  # without coordinates to move, no step moves the point
            if step <= 0 or tries >= budget:
                continue
            candidate = dict(point, **{key: point[key] - step for key in together})
            if valid(candidate):
                tries += 1
                if fails(candidate):
                    point, improved = candidate, True
                    break
        if improved:
            continue
        for key in point:
            v = point[key]
            for c in (0, int(v / 2), v - 1 if v > 0 else v + 1):
                if abs(c) >= abs(v) or tries >= budget:
                    continue
                candidate = dict(point, **{key: c})
                if not valid(candidate):
                    continue
                tries += 1
                if fails(candidate):
                    point, improved = candidate, True
                    break
    return point


class _Checker:
    def __init__(self, bias, trials, seed, max_position):
        import torch
        self.torch = torch
        self.timed = _Timed(bias.fn)
        self.bias = bias.with_fn(self.timed)
        self.trials, self.seed = trials, seed
        self.max_position = max_position
        self.heads = bias.heads or 4
        self.params64 = [p.detach().to(torch.float64) if p.is_floating_point() else p.detach() for p in bias.params]
        self.rng = random.Random(seed)

    # ---- the bias at single points, in float64 ----

    def values(self, m, n, params=None):
        """b(h, m, n) for every head, float64 [H]."""
        t = self.torch
        with t.no_grad():
            b = self.bias.tile_values(t.arange(self.heads).view(-1, 1, 1), t.tensor([[[m]]]), t.tensor([[[n]]]),
                                      params=self.params64 if params is None else params)
        return b.reshape(-1).to(t.float64)

    def position(self, previous=None):
        """A position in [0, max_position]; 1 draw in 8 an edge case (the previous position again, 0,
        one either side of it, or an end of the range)."""
        top = self.max_position
        if self.rng.randrange(EDGE_SHARE) == 0:
            options = [0, 1, top, top - 1] + ([] if previous is None else [previous, previous + 1, previous - 1])
            return min(max(self.rng.choice(options), 0), top)
        return self.rng.randint(0, top)

    def pair(self):
        m = self.position()
        n = self.position(previous=m)
        if self.bias.causal_only and n > m:
            m, n = n, m
        return m, n

    def in_range(self, *positions):
        return all(0 <= p <= self.max_position for p in positions)

    def law_finite(self):
        def bad(point):
            v = self.values(point["m"], point["n"])
            return not bool(self.torch.isfinite(v).all())

        def valid(point):
            return self.in_range(point["m"], point["n"]) and (not self.bias.causal_only or point["n"] <= point["m"])

        t = self.torch
        for _ in range(self.trials):
            m, n = self.pair()
            point = {"m": m, "n": n}
            if not bad(point):  # and the 8 x 8 block of positions from (m, n), where the pair's one value may not go wrong
                q_pos = t.arange(min(m, self.max_position - 7), min(m, self.max_position - 7) + 8).clamp(min=0)
                k_pos = t.arange(min(n, self.max_position - 7), min(n, self.max_position - 7) + 8).clamp(min=0)
                with t.no_grad():
                    block = self.bias.tile_values(t.arange(self.heads).view(-1, 1, 1), q_pos.view(1, -1, 1),
                                                  k_pos.view(1, 1, -1), params=self.params64)
                wrong = (~t.isfinite(block)).nonzero()
                for _, i, j in wrong.tolist():
                    if valid({"m": int(q_pos[i]), "n": int(k_pos[j])}):
                        point = {"m": int(q_pos[i]), "n": int(k_pos[j])}
                        break
            if bad(point):
                p = _shrink(point, bad, valid, together=("m", "n"))
                v = self.values(p["m"], p["n"])
                h = int((~self.torch.isfinite(v)).nonzero()[0])
                return self.result("finite", "b(h, m, n) is finite (at the drawn pair and the 8 x 8 block from it)", "exact (a NaN or an infinity fails)",
                                   Counterexample("m=(%d) n=(%d) head=%d" % (p["m"], p["n"], h), float(v[h]), 0.0,
                                                  math.inf, 0.0, "b(h, m, n) vs a finite value"))
        return self.result("finite", "b(h, m, n) is finite (at the drawn pair and the 8 x 8 block from it)", "exact (a NaN or an infinity fails)")

    def law_relative(self):
        formula = "b(h, m+s, n+s) = b(h, m, n) in float64"
        tolerance = "|error| <= 1024 eps64 (1 + |b(h, m, n)|)"

        def worst(point):
            a = self.values(point["m"] + point["s"], point["n"] + point["s"])
            b = self.values(point["m"], point["n"])
            err = (a - b).abs()
            bound = 1024 * EPS64 * (1 + b.abs())
            over = ~(err <= bound)  # a NaN is over too
            if not bool(over.any()):
                return None
            h = int(over.nonzero()[0])
            return h, float(a[h]), float(b[h]), float(err[h]), float(bound[h])

        def valid(point):
            m, n, s = point["m"], point["n"], point["s"]
            return self.in_range(m, n, m + s, n + s) and (not self.bias.causal_only or n <= m)

        for _ in range(self.trials):
            m, n = self.pair()
            low, high = -min(m, n), self.max_position - max(m, n)
            if self.rng.randrange(EDGE_SHARE) == 0:
                s = min(max(self.rng.choice([1, -1, high, low]), low), high)
            else:
                s = self.rng.randint(low, high)
            point = {"m": m, "n": n, "s": s}
            if worst(point) is not None:
                p = _shrink(point, lambda c: worst(c) is not None, valid, together=("m", "n"))
                h, a, b, err, bound = worst(p)
                return self.result("relative", formula, tolerance, Counterexample(
                    "m=(%d) n=(%d) s=(%d) head=%d" % (p["m"], p["n"], p["s"], h), a, b, err, bound,
                    "b(h, m+s, n+s) vs b(h, m, n)"), claimed="relative" in self.bias.claims)
        return self.result("relative", formula, tolerance, claimed="relative" in self.bias.claims)

    # ---- the tiled attention against a dense float64 reference ----

    def call(self):
        """One attention call's shape: batch, length, key heads, head dim, causal."""
        top = min(MAX_KERNEL_LENGTH, self.max_position + 1)
        if self.rng.randrange(EDGE_SHARE) == 0:
            length = min(self.rng.choice([1, KERNEL_TILE[0], KERNEL_TILE[0] + 1, top]), top)
        else:
            length = self.rng.randint(1, top)
        kv_heads = self.rng.choice([d for d in range(1, self.heads + 1) if self.heads % d == 0])
        causal = True if self.bias.causal_only else self.rng.random() < 0.5
        return {"T": length, "B": self.rng.choice([1, 2]), "Hk": kv_heads, "D": self.rng.choice([4, 8]),
                "causal": int(causal), "seed": self.rng.randrange(1 << 30)}

    def tensors(self, call, dtype):
        t = self.torch
        g = t.Generator().manual_seed(call["seed"])
        shape_q = (call["B"], call["T"], self.heads, call["D"])
        shape_k = (call["B"], call["T"], call["Hk"], call["D"])
        q, k, v = (t.randn(s, generator=g, dtype=t.float64).to(dtype) for s in (shape_q, shape_k, shape_k))
        w = t.randn(shape_q, generator=g, dtype=t.float64)
        return q, k, v, w

    def dense(self, q, k, v, causal, params):
        """softmax(Q K^T / sqrt(d) + B + mask) V in float64, written out in full (the reference)."""
        t = self.torch
        length, dim = q.shape[1], q.shape[3]
        with t.no_grad():
            positions = t.arange(length)
            b = self.bias.tile_values(t.arange(self.heads).view(-1, 1, 1), positions.view(1, -1, 1),
                                      positions.view(1, 1, -1), params=params).to(t.float64)
        group = self.heads // k.shape[2]
        kk, vv = k.double().repeat_interleave(group, 2), v.double().repeat_interleave(group, 2)
        s = t.einsum("bqhd,bkhd->bhqk", q.double(), kk) / math.sqrt(dim) + b
        if causal:
            s = s.masked_fill(positions.view(1, -1) > positions.view(-1, 1), float("-inf"))
        return t.einsum("bhqk,bkhd->bqhd", t.softmax(s, -1), vv), s

    def tiled(self, q, k, v, causal, params):
        from ._python_attention import tiled_attention
        return tiled_attention(q, k, v, self.bias.with_params(params), causal=bool(causal), tile=KERNEL_TILE)

    def describe(self, c):
        return "T=(%d) batch=%d heads=%d/%d d=%d %s tile=%dx%d" % (
            c["T"], c["B"], self.heads, c["Hk"], c["D"], "causal" if c["causal"] else "not causal", *KERNEL_TILE)

    def shrunk_call(self, call, failure):
        """The failing call with fewer tokens and a batch of 1, while `failure` still finds an error."""
        def valid(c):
            return c["T"] >= 1 and c["B"] >= 1
        p = _shrink({"T": call["T"], "B": call["B"]}, lambda c: failure(dict(call, **c)) is not None, valid, budget=40)
        return dict(call, **p)

    def law_attention_kernel(self):
        t = self.torch
        formula = "tiled attention(Q, K, V) = softmax(Q K^T / sqrt(d) + B + mask) V in float64, Q K V float32"
        tolerance = "max |error| <= 64 eps32 (1 + max|logit|) max|V|"

        def failure(c):
            q, k, v, _ = self.tensors(c, t.float32)
            got = self.tiled(q, k, v, c["causal"], self.bias.params).double()
            want, logits = self.dense(q, k, v, c["causal"], self.params64)
            err = (got - want).abs()
            finite = logits[t.isfinite(logits)]
            bound = 64 * EPS32 * (1 + (finite.abs().max().item() if finite.numel() else 0.0)) * v.abs().max().item()
            over = ~(err <= bound)
            if not bool(over.any()):
                return None
            at = tuple(int(i) for i in over.nonzero()[0])
            return at, float(got[at]), float(want[at]), float(err[at]), bound

        for _ in range(self.trials):
            c = self.call()
            if failure(c) is not None:
                c = self.shrunk_call(c, failure)
                at, a, b, err, bound = failure(c)
                return self.result("attention_kernel", formula, tolerance, Counterexample(
                    self.describe(c), a, b, err, bound, "out%s" % list(at)))
        return self.result("attention_kernel", formula, tolerance)

    def entries(self):
        """(param index, flat index) pairs of the floating parameters to difference this trial."""
        picked = []
        for i, p in enumerate(self.params64):
            if p.is_floating_point() and p.numel():
                picked += [(i, self.rng.randrange(p.numel())) for _ in range(min(FD_ENTRIES_PER_TRIAL, p.numel()))]
        return picked

    def law_bias_gradient(self):
        t = self.torch
        formula = ("dL/dθ_i of the tiled backward (autograd of fn per tile) = (L(θ + εe_i) − L(θ − εe_i))/2ε, "
                   "L = Σ w·out of the dense float64 reference")
        tolerance = "|error| <= 1e-6 (|lhs| + |rhs|) + 16 eps64 Σ|w·out| / ε, ε = 1e-6 (1 + |θ_i|)"
        if not any(p.is_floating_point() and p.numel() for p in self.params64):
            return self.result("bias_gradient", formula, tolerance, run=False,
                               why_not_run="the bias has no floating-point parameter")

        def failure(c, picks):
            q, k, v, w = self.tensors(c, t.float64)
            leaves = [p.clone().requires_grad_(p.is_floating_point()) for p in self.params64]
            out = self.tiled(q, k, v, c["causal"], leaves)
            grads = t.autograd.grad((out * w).sum(), [p for p in leaves if p.requires_grad], allow_unused=True)
            grads = iter(grads)
            by_param = [next(grads) if p.requires_grad else None for p in leaves]
            for i, j in picks:
                lhs = 0.0 if by_param[i] is None else float(by_param[i].reshape(-1)[j])
                theta = float(self.params64[i].reshape(-1)[j])
                eps = 1e-6 * (1 + abs(theta))
                losses = []
                for sign in (1, -1):
                    moved = [p.clone() for p in self.params64]
                    moved[i].view(-1)[j] += sign * eps
                    dense_out, _ = self.dense(q, k, v, c["causal"], moved)
                    losses.append(dense_out * w)
                rhs = float((losses[0].sum() - losses[1].sum()) / (2 * eps))
                bound = 1e-6 * (abs(lhs) + abs(rhs)) + 16 * EPS64 * float(losses[0].abs().sum()) / eps
                if not abs(lhs - rhs) <= bound:
                    return (i, j), lhs, rhs, abs(lhs - rhs), bound
            return None

        for _ in range(self.trials):
            c, picks = self.call(), self.entries()
            found = failure(c, picks)
            if found is not None:
                c = self.shrunk_call(c, lambda cc: failure(cc, [found[0]]))
                (i, j), lhs, rhs, err, bound = failure(c, [found[0]])
                index = list(int(x) for x in _unravel(j, tuple(self.params64[i].shape)))
                return self.result("bias_gradient", formula, tolerance, Counterexample(
                    self.describe(c), lhs, rhs, err, bound, "dL/d%s%s" % (
                        _param_name(self.timed.fn, i), index) + ("" if _param_name(self.timed.fn, i).startswith(
                            "params[") else " (params[%d])" % i)))
        return self.result("bias_gradient", formula, tolerance)

    def law_attention_gradient(self):
        t = self.torch
        formula = "dq, dk, dv of the tiled backward (float64) = float64 autograd of the dense reference"
        tolerance = "max |error| <= 1e-9 max(1, max|reference|) per tensor"

        def failure(c):
            q, k, v, w = self.tensors(c, t.float64)
            q, k, v = (x.requires_grad_() for x in (q, k, v))
            got = t.autograd.grad((self.tiled(q, k, v, c["causal"], self.params64) * w).sum(), (q, k, v))
            dense_out, _ = self.dense(q, k, v, c["causal"], self.params64)
            want = t.autograd.grad((dense_out * w).sum(), (q, k, v))
            for name, a, b in zip(("dq", "dk", "dv"), got, want):
                err = (a - b).abs()
                bound = 1e-9 * max(1.0, b.abs().max().item())
                over = ~(err <= bound)
                if bool(over.any()):
                    at = tuple(int(x) for x in over.nonzero()[0])
                    return "%s%s" % (name, list(at)), float(a[at]), float(b[at]), float(err[at]), bound
            return None

        for _ in range(self.trials):
            c = self.call()
            if failure(c) is not None:
                c = self.shrunk_call(c, failure)
                what, a, b, err, bound = failure(c)
                return self.result("attention_gradient", formula, tolerance,
                                   Counterexample(self.describe(c), a, b, err, bound, what))
        return self.result("attention_gradient", formula, tolerance)

    def result(self, name, formula, tolerance, counterexample=None, claimed=True, run=True, why_not_run=None):
        return LawResult(name, formula, claimed, counterexample is None and run, self.trials if run else 0, tolerance,
                         counterexample, run, why_not_run)


def _unravel(flat, shape):
    index = []
    for extent in reversed(shape):
        index.append(flat % extent)
        flat //= extent
    return reversed(index)


def _param_name(fn, i):
    """fn's name for its i-th parameter (the argument after head, q_pos, k_pos), where Python knows it."""
    import inspect
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return names[3 + i] if len(names) > 3 + i else "params[%d]" % i


def check_python(bias, trials=100, seed=1, max_position=None):
    """grape.check(bias) for a grape.python_bias: the CheckReport of its laws (see the module)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials <= 0:
        raise GrapeError(f"grape: trials: must be a positive int (got {trials!r})")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise GrapeError(f"grape: seed: must be an int (got {seed!r})")
    top = bias.max_position if max_position is None else max_position
    if isinstance(top, bool) or not isinstance(top, int) or top <= 0:
        raise GrapeError(f"grape: max_position: must be a positive int (got {top!r})")
    checker = _Checker(bias, trials, seed, top)
    import torch
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):  # the laws draw with their own generators; leave the caller's alone
        laws = [checker.law_finite(), checker.law_relative(), checker.law_attention_kernel(),
                checker.law_bias_gradient(), checker.law_attention_gradient()]
    total = time.perf_counter() - start
    t = checker.timed
    params = ", ".join("%s %s%s" % (_param_name(bias.fn, i), str(p.dtype).replace("torch.", ""), list(p.shape))
                       for i, p in enumerate(bias.params)) or "none"
    notes = [
        "the laws called the Python fn %d times (once per point or tile), %.3f s of the check's %.3f s (torch %s)"
        % (t.calls, t.seconds, total, torch.__version__),
        "the kernel laws ran grape's tiled Python attention (grape.torch.attention's python_bias path) with "
        "%dx%d tiles on sequences of 1..%d tokens, %d query heads, GQA by the divisors" %
        (KERNEL_TILE[0], KERNEL_TILE[1], min(MAX_KERNEL_LENGTH, top + 1), checker.heads),
    ]
    if bias.causal_only:
        notes.append("causal_only: the points have n <= m and the attention calls are causal")
    return CheckReport(
        encoding=bias.name, summary=bias.summary,
        parameters="the object's params as given: %s (float64 copies for the laws)" % params,
        positions="0..%d (the kernel laws: 0..T-1)" % top,
        position_draws="1 draw in %d an edge case (m = n, 0, ±1, max_position %d); a failing draw is shrunk "
                       "toward position 0" % (EDGE_SHARE, top),
        reference="fn itself in float64 at single points; for the kernel laws a dense float64 "
                  "softmax(Q K^T / sqrt(d) + B + mask) V, its central differences and its autograd",
        notes=notes, seed=seed, trials=trials, laws=laws)
