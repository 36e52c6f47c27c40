"""grape.check for a rotation written in Python (grape.python_rotation): the group laws on ρ(pos) as
dense float64 matrices at seeded random positions, a failing draw shrunk toward position 0, and the
attention path (Q and K rotated in torch, grape's fused attention) against a dense float64 reference."""
import math
import random
import time

from ._check import CheckReport, Counterexample, LawResult
from ._check_python import EDGE_SHARE, EPS32, EPS64, _Timed, _shrink
from ._grape import GrapeError

MAX_KERNEL_LENGTH = 40  # the attention law's longest sequence (its dense reference is T x T)
LAW_ULPS = 64           # the group laws' tolerance: 64 eps64 (1 + the size of the angles involved)
KERNEL_ULPS = 128       # the attention law's: 128 eps32 (1 + max |logit|) max |v|


class _Checker:
    def __init__(self, rotation, trials, seed, max_position):
        import torch
        self.torch = torch
        self.timed = _Timed(rotation.fn) if rotation.fn is not None else None
        self.rot = rotation.with_fn(self.timed) if self.timed is not None else rotation
        self.params64 = [p.detach().to(torch.float64) if p.is_floating_point() else p.detach()
                         for p in rotation.params]
        self.trials, self.seed, self.max_position = trials, seed, max_position
        self.axes = rotation.axes
        self.rng = random.Random(seed)

    # ---- ρ at single points, in float64 ----

    def rho(self, pos):
        """ρ(pos) float64 [d, d] for a tuple of ints (one per axis)."""
        t = self.torch
        with t.no_grad():
            return self.rot.matrices(t.tensor([list(pos)], dtype=t.int64), params=self.params64)[0]

    def size(self, pos):
        """How large the angles at pos are (the rounding of ρ(pos) grows with them): max |angle| for an
        angle function, the Frobenius norm of Σ_a pos_a L_a for generators."""
        t = self.torch
        with t.no_grad():
            p = t.tensor([list(pos)], dtype=t.int64)
            if self.rot.kind == "generators":
                return float(self.rot.exponent(p, self.params64).norm())
            return float(self.rot.angles(p[:, 0], self.params64).abs().max())

    def position(self, previous=None, top=None):
        """A position in [0, top]; 1 draw in 8 an edge case (the previous position again, 0, one either
        side of it, or an end of the range)."""
        top = self.max_position if top is None else top
        if self.rng.randrange(EDGE_SHARE) == 0:
            options = [0, 1, top, top - 1] + ([] if previous is None else [previous, previous + 1, previous - 1])
            return min(max(self.rng.choice(options), 0), top)
        return self.rng.randint(0, top)

    def point(self, names, bounded_sum=False):
        """{m0: .., n0: .., ...}: per axis m, then n (near m on edge draws; m + n <= max_position when
        bounded_sum, for the homomorphism law)."""
        p = {}
        for a in range(self.axes):
            m = self.position()
            p["%s%d" % (names[0], a)] = m
            if len(names) > 1:
                top = self.max_position - m if bounded_sum else None
                p["%s%d" % (names[1], a)] = self.position(previous=m if not bounded_sum else None, top=top) \
                    if not bounded_sum or top > 0 else 0
        return p

    def get(self, p, name):
        return tuple(p["%s%d" % (name, a)] for a in range(self.axes))

    def describe(self, p, names):
        return " ".join("%s=(%s)" % (n, ", ".join(str(x) for x in self.get(p, n))) for n in names)

    def in_range(self, p):
        return all(0 <= v <= self.max_position for v in p.values())

    def matrix_law(self, name, formula, names, sides, sizes, bounded_sum=False, together=True):
        """A law lhs(point) = rhs(point) on d x d float64 matrices, entry by entry within
        LAW_ULPS eps64 (1 + sizes(point))."""
        t = self.torch
        tolerance = "max |error| <= %d eps64 (1 + the sizes of the angles involved: max |angle| per position, " \
                    "or ||Σ pos_a L_a||_F for generators)" % LAW_ULPS

        def worst(p):
            a, b = sides(p)
            err = (a - b).abs()
            bound = LAW_ULPS * EPS64 * (1 + sizes(p))
            over = ~(err <= bound)  # a NaN is over too
            if not bool(over.any()):
                return None
            i, j = (int(x) for x in over.nonzero()[0])
            return (i, j), float(a[i, j]), float(b[i, j]), float(err[i, j]), bound

        def valid(p):
            if not self.in_range(p):
                return False
            if bounded_sum:
                return all(m + n <= self.max_position for m, n in zip(self.get(p, "m"), self.get(p, "n")))
            return True

        for _ in range(self.trials):
            p = self.point(names, bounded_sum)
            if worst(p) is not None:
                p = _shrink(p, lambda c: worst(c) is not None, valid, together=tuple(p) if together else ())
                (i, j), lhs, rhs, err, bound = worst(p)
                return self.result(name, formula, tolerance, Counterexample(
                    self.describe(p, names), lhs, rhs, err, bound, "entry [%d, %d]" % (i, j)))
        return self.result(name, formula, tolerance)

    def law_finite(self):
        t = self.torch

        def bad(p):
            return not bool(t.isfinite(self.rho(self.get(p, "m"))).all())

        formula, tolerance = "every entry of ρ(m) is finite", "exact (a NaN or an infinity fails)"
        for _ in range(self.trials):
            p = self.point("m")
            if bad(p):
                p = _shrink(p, bad, self.in_range)
                r = self.rho(self.get(p, "m"))
                i, j = (int(x) for x in (~t.isfinite(r)).nonzero()[0])
                return self.result("finite", formula, tolerance, Counterexample(
                    self.describe(p, "m"), float(r[i, j]), 0.0, math.inf, 0.0, "ρ(m)[%d, %d] vs a finite value" % (i, j)))
        return self.result("finite", formula, tolerance)

    def law_norm_preservation(self):
        t = self.torch
        eye = t.eye(self.rot.head_dim, dtype=t.float64)

        def sides(p):
            r = self.rho(self.get(p, "m"))
            return r.T @ r, eye

        return self.matrix_law("norm_preservation", "ρ(m)ᵀρ(m) = I (‖ρ(m)x‖ = ‖x‖ for every x)",
                               "m", sides, lambda p: 2 * self.size(self.get(p, "m")))

    def law_homomorphism(self):
        def sides(p):
            m, n = self.get(p, "m"), self.get(p, "n")
            return self.rho(m) @ self.rho(n), self.rho(tuple(a + b for a, b in zip(m, n)))

        def sizes(p):
            m, n = self.get(p, "m"), self.get(p, "n")
            return self.size(m) + self.size(n) + self.size(tuple(a + b for a, b in zip(m, n)))

        return self.matrix_law("homomorphism", "ρ(m)ρ(n) = ρ(m + n), m + n <= "
                               "max_position", "mn", sides, sizes, bounded_sum=True, together=False)

    def law_relative(self):
        def sides(p):
            m, n = self.get(p, "m"), self.get(p, "n")
            return self.rho(m).T @ self.rho(n), self.rho(tuple(b - a for a, b in zip(m, n)))

        def sizes(p):
            m, n = self.get(p, "m"), self.get(p, "n")
            return self.size(m) + self.size(n) + self.size(tuple(b - a for a, b in zip(m, n)))

        return self.matrix_law("relative", "ρ(m)ᵀρ(n) = ρ(n − m): scores (ρ(m)q)ᵀ(ρ(n)k) depend on n − m only",
                               "mn", sides, sizes)

    def law_skew(self):
        t = self.torch
        gens = self.params64[0]
        formula = "L_a + L_aᵀ = 0 for every generator (ρ(pos) = exp(Σ pos_a L_a) is then orthogonal)"
        tolerance = "max |error| <= 16 eps64 max |L_a|"
        for a in range(gens.shape[0]):
            g = gens[a]
            err = (g + g.T).abs()
            bound = 16 * EPS64 * float(g.abs().max())
            over = ~(err <= bound)
            if bool(over.any()):
                i, j = (int(x) for x in over.nonzero()[0])
                return self.result("skew", formula, tolerance, Counterexample(
                    "a=%d" % a, float(g[i, j]), float(-g[j, i]), float(err[i, j]), bound,
                    "L_%d[%d, %d] vs -L_%d[%d, %d]" % (a, i, j, a, j, i)), trials=gens.shape[0])
        return self.result("skew", formula, tolerance, trials=gens.shape[0])

    def law_generators_commute(self):
        gens = self.params64[0]
        d = gens.shape[1]
        formula = "L_a L_b = L_b L_a for every pair (then exp(Σ pos_a L_a) = Π exp(pos_a L_a) and the relative law can hold)"
        tolerance = "max |error| <= 16 d eps64 max |L_a| max |L_b|"
        pairs = [(a, b) for a in range(gens.shape[0]) for b in range(a + 1, gens.shape[0])]
        for a, b in pairs:
            ab, ba = gens[a] @ gens[b], gens[b] @ gens[a]
            err = (ab - ba).abs()
            bound = 16 * d * EPS64 * float(gens[a].abs().max()) * float(gens[b].abs().max())
            over = ~(err <= bound)
            if bool(over.any()):
                i, j = (int(x) for x in over.nonzero()[0])
                return self.result("generators_commute", formula, tolerance, Counterexample(
                    "a=%d b=%d" % (a, b), float(ab[i, j]), float(ba[i, j]), float(err[i, j]), bound,
                    "(L_%d L_%d)[%d, %d] vs (L_%d L_%d)[%d, %d]" % (a, b, i, j, b, a, i, j)), trials=len(pairs))
        return self.result("generators_commute", formula, tolerance, trials=len(pairs))

    # ---- the attention path ----

    def call(self):
        heads = self.rng.choice([1, 2, 4])
        return {"t": self.rng.randint(1, min(MAX_KERNEL_LENGTH, self.max_position + 1)),
                "start": self.position(), "heads": heads,
                "kv": self.rng.choice([d for d in (1, 2, 4) if heads % d == 0]),
                "causal": self.rng.random() < 0.5, "seed": self.rng.randrange(1 << 30)}

    def call_positions(self, c):
        """int64 [T, axes]: start, start + 1, ... on one axis (clamped to max_position); on several, each
        token a random position within T of start on each axis."""
        t = self.torch
        top = self.max_position
        if self.axes == 1:
            return (c["start"] + t.arange(c["t"])).clamp(max=top).view(-1, 1)
        gen = t.Generator().manual_seed(c["seed"] + 1)
        return (c["start"] + t.randint(0, c["t"], (c["t"], self.axes), generator=gen)).clamp(max=top)

    def tensors(self, c):
        t = self.torch
        gen = t.Generator().manual_seed(c["seed"])
        d = self.rot.head_dim
        q = t.randn(1, c["t"], c["heads"], d, generator=gen, dtype=t.float64)
        k = t.randn(1, c["t"], c["kv"], d, generator=gen, dtype=t.float64)
        v = t.randn(1, c["t"], c["kv"], d, generator=gen, dtype=t.float64)
        return q, k, v

    def dense(self, q, k, v, positions, causal):
        """softmax((ρq)ᵀ(ρk)/√d + mask) V in float64 with ρ the dense matrices, and the logits."""
        t = self.torch
        r = self.rot.matrices(positions, self.params64)
        qr, kr = (t.einsum("tij,bthj->bthi", r, x) for x in (q, k))
        group = q.shape[2] // k.shape[2]
        kr, vv = kr.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
        s = t.einsum("bqhd,bkhd->bhqk", qr, kr) / math.sqrt(q.shape[3])
        if causal:
            n = q.shape[1]
            s = s.masked_fill(t.ones(n, n, dtype=t.bool).triu(1), float("-inf"))
        return t.einsum("bhqk,bkhd->bqhd", t.softmax(s, -1), vv), s

    def law_attention_kernel(self):
        import grape.torch as gt
        t = self.torch
        formula = ("grape.torch.attention(q, k, v, encoding=rotation) in float32 (Q and K rotated in torch, grape's "
                   "fused attention with no encoding) = dense float64 softmax((ρ(m)q)ᵀ(ρ(n)k)/√d + mask) V")
        tolerance = "|error| <= %d eps32 (1 + max |logit|) max |v|" % KERNEL_ULPS
        rot64 = self.rot.with_params(self.params64)

        def failure(c):
            q, k, v = self.tensors(c)
            pos = self.call_positions(c)
            with t.no_grad():
                got = gt.attention(q.float(), k.float(), v.float(), encoding=rot64, positions=pos,
                                   causal=c["causal"]).double()
                want, logits = self.dense(q, k, v, pos, c["causal"])
            finite = logits[t.isfinite(logits)]
            bound = KERNEL_ULPS * EPS32 * (1 + (finite.abs().max().item() if finite.numel() else 0.0)) \
                * v.abs().max().item()
            over = ~((got - want).abs() <= bound)
            if not bool(over.any()):
                return None
            at = tuple(int(i) for i in over.nonzero()[0])
            return at, float(got[at]), float(want[at]), float(abs(got[at] - want[at])), bound

        def describe(c):
            return "T=%d start=%d heads=%d kv_heads=%d causal=%s seed=%d" % (
                c["t"], c["start"], c["heads"], c["kv"], c["causal"], c["seed"])

        def valid(c):
            return (1 <= c["t"] and 0 <= c["start"] <= self.max_position and c["kv"] >= 1 and c["seed"] >= 0
                    and c["heads"] >= 1 and c["heads"] % c["kv"] == 0)

        for _ in range(self.trials):
            c = self.call()
            if failure(c) is not None:
                c = _shrink(c, lambda cc: failure(cc) is not None, valid)
                at, a, b, err, bound = failure(c)
                return self.result("attention_kernel", formula, tolerance,
                                   Counterexample(describe(c), a, b, err, bound, "out%s" % list(at)))
        return self.result("attention_kernel", formula, tolerance)

    def result(self, name, formula, tolerance, counterexample=None, trials=None):
        return LawResult(name, formula, True, counterexample is None, self.trials if trials is None else trials,
                         tolerance, counterexample)


def check_python_rotation(rotation, trials=100, seed=1, max_position=None):
    """grape.check(rotation) for a grape.python_rotation: the CheckReport of its laws (see the module)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials <= 0:
        raise GrapeError(f"grape: trials: must be a positive int (got {trials!r})")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise GrapeError(f"grape: seed: must be an int (got {seed!r})")
    top = rotation.max_position if max_position is None else max_position
    if isinstance(top, bool) or not isinstance(top, int) or top <= 0:
        raise GrapeError(f"grape: max_position: must be a positive int (got {top!r})")
    import torch
    checker = _Checker(rotation, trials, seed, top)
    start = time.perf_counter()
    laws = []
    with torch.random.fork_rng(devices=[]):  # the laws draw with their own generators; leave the caller's alone
        if rotation.kind == "generators":
            laws += [checker.law_skew(), checker.law_generators_commute()]
        laws += [checker.law_finite(), checker.law_norm_preservation(), checker.law_homomorphism(), checker.law_relative(),
                 checker.law_attention_kernel()]
    total = time.perf_counter() - start
    params = ", ".join("%s%s" % (str(p.dtype).replace("torch.", ""), list(p.shape)) for p in rotation.params) or "none"
    notes = ["the attention law ran grape.torch.attention's python_rotation path (Q and K rotated in torch in "
             "float32, then grape's fused attention) on sequences of 1..%d tokens, 1, 2 or 4 query heads, GQA by "
             "the divisors, with the rotation's float64 parameter copies" % min(MAX_KERNEL_LENGTH, top + 1)]
    if checker.timed is not None:
        notes.insert(0, "the laws called the Python angle function %d times, %.3f s of the check's %.3f s (torch %s)"
                     % (checker.timed.calls, checker.timed.seconds, total, torch.__version__))
    else:
        notes.insert(0, "ρ(pos) = torch.matrix_exp(Σ_a pos_a L_a) in float64; the check took %.3f s (torch %s)"
                     % (total, torch.__version__))
    return CheckReport(
        encoding=rotation.name, summary=rotation.summary,
        parameters="the object's params as given: %s (float64 copies for the laws)" % params,
        positions="0..%d on each of %d ax%s (the attention law: T consecutive positions from a drawn start)"
                  % (top, rotation.axes, "is" if rotation.axes == 1 else "es"),
        position_draws="1 draw in %d an edge case (m = n, 0, ±1, max_position %d); a failing draw is shrunk "
                       "toward position 0" % (EDGE_SHARE, top),
        reference="ρ(pos) as dense float64 %d x %d matrices (cos and sin of the float64 angles, or torch.matrix_exp "
                  "of the generators); for the attention law a dense float64 softmax of the rotated Q and K"
                  % (rotation.head_dim, rotation.head_dim),
        notes=notes, seed=seed, trials=trials, laws=laws)
