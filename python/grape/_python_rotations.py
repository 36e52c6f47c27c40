"""Rotations written in Python (grape.python_rotation): ρ(pos) from a per-plane angle function, from
commuting skew-symmetric generators or from a frequency table, applied to Q and K in torch, run by
grape.torch.attention and checked by grape.check with the laws of grape/_check_python_rotation.py."""
from ._grape import GrapeError, RotaryEncoding
from ._python_encodings import DEFAULT_MAX_POSITION, _positive_int, _torch

LAYOUTS = ("half_split", "interleaved")


def _table_angle(plane, pos, inv_freq):
    return pos * inv_freq[plane]


class PythonRotation:
    """A rotation ρ(pos) of head_dim channels written in Python (see python_rotation)."""

    def __init__(self, kind, fn, params, head_dim, axes, layout, name, max_position, summary):
        self.kind = kind            # "angle" (fn(plane, pos, *params)) or "generators" (params = (L [A, d, d],))
        self.fn = fn
        self.params = params
        self.head_dim = head_dim
        self.axes = axes
        self.layout = layout
        self.name = name
        self.max_position = max_position
        self.summary = summary

    def with_fn(self, fn):
        """The same rotation with another angle function (the checker's timed wrapper)."""
        return PythonRotation(self.kind, fn, self.params, self.head_dim, self.axes, self.layout, self.name,
                              self.max_position, self.summary)

    def with_params(self, params):
        """The same rotation with other parameter tensors (the checker's float64 copies)."""
        return PythonRotation(self.kind, self.fn, tuple(params), self.head_dim, self.axes, self.layout, self.name,
                              self.max_position, self.summary)

    def __repr__(self):
        shapes = ", ".join("%s%s" % (str(p.dtype).replace("torch.", ""), list(p.shape)) for p in self.params)
        return "python_rotation(%s, %s, head_dim=%d, axes=%d, params=[%s])" % (self.name, self.kind, self.head_dim,
                                                                            self.axes, shapes)

    def positions_tensor(self, positions, tokens):
        """positions as int64 [tokens, axes]: 0..tokens-1 on every axis when None."""
        torch = _torch()
        if positions is None:
            return torch.arange(tokens, dtype=torch.int64).view(-1, 1).expand(tokens, self.axes)
        if not isinstance(positions, torch.Tensor) or positions.is_floating_point() or positions.is_complex() \
                or positions.dtype == torch.bool:
            raise GrapeError(f"grape: positions: must be an integer torch tensor (got {type(positions).__name__}"
                             + (f" {positions.dtype})" if isinstance(positions, torch.Tensor) else ")"))
        p = positions.to(torch.int64).cpu()
        if p.dim() == 1 and self.axes == 1:
            p = p.view(-1, 1)
        if p.dim() != 2 or p.shape[1] != self.axes or p.shape[0] != tokens:
            raise GrapeError(f"grape: positions: must be [{tokens}, {self.axes}]" + (f" or [{tokens}]" if self.axes == 1
                             else "") + f" for these tokens (got shape {list(positions.shape)})")
        return p

    def angles(self, pos, params=None):
        """The angle function on int64 positions [N] -> float angles [N, head_dim/2] (autograd flows)."""
        torch = _torch()
        planes = self.head_dim // 2
        plane = torch.arange(planes, dtype=torch.int64).view(1, -1)
        # float64 positions: exact integers, and an angle fn that multiplies them by float32 parameters
        # is promoted to float64, so large positions do not lose the angle to float32 rounding
        p = pos.reshape(-1, 1).to(torch.float64)
        try:
            a = self.fn(plane, p, *(self.params if params is None else params))
        except GrapeError:
            raise
        except Exception as e:  # the user's function: say which argument failed, keep its traceback
            raise GrapeError("grape: angle: raised %s: %s (positions %d..%d)" % (
                type(e).__name__, str(e).splitlines()[0] if str(e) else "", int(pos.min()), int(pos.max()))) from e
        if not isinstance(a, torch.Tensor):
            raise GrapeError(f"grape: angle: must return a torch tensor (got {type(a).__name__})")
        if not a.is_floating_point():
            raise GrapeError(f"grape: angle: must return a floating-point tensor (got {a.dtype})")
        target = (p.shape[0], planes)
        try:
            fits = torch.broadcast_shapes(tuple(a.shape), target) == torch.Size(target)
        except RuntimeError:
            fits = False
        if not fits:
            raise GrapeError("grape: angle: returned shape %s, which does not broadcast to [N, head_dim/2] = %s"
                             % (list(a.shape), list(target)))
        return a.expand(target)

    def exponent(self, pos, params=None):
        """Σ_a pos_a L_a for int64 positions [N, axes], float64 [N, d, d] (generator rotations)."""
        torch = _torch()
        gens = (self.params if params is None else params)[0].to(torch.float64)
        return torch.einsum("na,aij->nij", pos.to(torch.float64), gens)

    def matrices(self, pos, params=None):
        """ρ(pos) as float64 [N, d, d] for int64 positions [N, axes]: x -> ρ x."""
        torch = _torch()
        if self.kind == "generators":
            return torch.matrix_exp(self.exponent(pos, params))
        a = self.angles(pos[:, 0], params).to(torch.float64)
        cos, sin = torch.cos(a), torch.sin(a)
        first, second = self.pairs()
        r = torch.zeros(a.shape[0], self.head_dim, self.head_dim, dtype=torch.float64)
        rows = torch.arange(a.shape[0]).view(-1, 1)
        r[rows, first, first] = cos
        r[rows, second, second] = cos
        r[rows, first, second] = -sin
        r[rows, second, first] = sin
        return r

    def pairs(self):
        """The channels of each plane: plane i turns (first[i], second[i])."""
        torch = _torch()
        planes = self.head_dim // 2
        if self.layout == "half_split":
            return torch.arange(planes), torch.arange(planes, 2 * planes)
        return torch.arange(0, 2 * planes, 2), torch.arange(1, 2 * planes, 2)

    def apply(self, x, positions=None):
        """x [batch, seq, heads, head_dim] or [tokens, heads, head_dim] rotated by ρ(positions[token])
        (default 0..seq-1), in x's dtype; differentiable in x and in the rotation's params."""
        return self._turn(x, positions, "x")

    def _turn(self, x, positions, name):
        torch = _torch()
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise GrapeError(f"grape: {name}: must be a floating-point torch tensor (got "
                             f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__})")
        if x.dim() not in (3, 4) or x.shape[-1] != self.head_dim:
            raise GrapeError(f"grape: {name}: must be [batch, seq, heads, {self.head_dim}] or [tokens, heads, "
                             f"{self.head_dim}] (got shape {list(x.shape)})")
        pos = self.positions_tensor(positions, x.shape[-3])
        # float64 for float64 input, float32 otherwise (bf16 and f16 are read in float32, as the kernels do)
        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        xw = x.to(work)
        if self.kind == "generators":
            r = self.matrices(pos).to(work)
            out = torch.einsum("tij,...thj->...thi", r, xw)
        else:
            a = self.angles(pos[:, 0])
            cos, sin = torch.cos(a).to(work)[:, None, :], torch.sin(a).to(work)[:, None, :]  # [T, 1, planes]
            first, second = self.pairs()
            u, w = xw[..., first], xw[..., second]
            turned_u, turned_w = u * cos - w * sin, u * sin + w * cos
            out = torch.zeros_like(xw).index_copy(-1, first, turned_u).index_copy(-1, second, turned_w)
        return out.to(x.dtype).contiguous()  # the fused attention reads channels contiguously

    def rotate_qk(self, q, k, positions=None):
        """(ρ q, ρ k) at the same positions: the scores then depend on ρ(m)ᵀρ(n) = ρ(n − m) only."""
        return self._turn(q, positions, "q"), self._turn(k, positions, "k")


def _params(params):
    torch = _torch()
    if isinstance(params, torch.Tensor) or not isinstance(params, (list, tuple)):
        raise GrapeError(f"grape: params: must be a list or tuple of torch tensors (got {type(params).__name__})")
    for i, p in enumerate(params):
        if not isinstance(p, torch.Tensor):
            raise GrapeError(f"grape: params: item {i} must be a torch tensor (got {type(p).__name__})")
        if p.device.type != "cpu":
            raise GrapeError(f"grape: params: item {i} must be on the CPU (got a {p.device.type} tensor)")
    return tuple(params)


def _generators(generators):
    torch = _torch()
    if isinstance(generators, (list, tuple)):
        if not generators or not all(isinstance(g, torch.Tensor) for g in generators):
            raise GrapeError("grape: generators: must be a non-empty list of torch tensors or a tensor [axes, d, d]")
        if len({tuple(g.shape) for g in generators}) != 1:
            raise GrapeError("grape: generators: must all have one shape (got %s)"
                             % ", ".join(str(list(g.shape)) for g in generators))
        generators = torch.stack(list(generators))  # stack keeps autograd to each learnable generator
    if not isinstance(generators, torch.Tensor):
        raise GrapeError(f"grape: generators: must be a tensor or a list of tensors (got {type(generators).__name__})")
    if not generators.is_floating_point() or generators.device.type != "cpu":
        raise GrapeError(f"grape: generators: must be a floating-point CPU tensor (got {generators.dtype} on "
                         f"{generators.device})")
    g = generators.unsqueeze(0) if generators.dim() == 2 else generators
    if g.dim() != 3 or g.shape[1] != g.shape[2] or g.shape[1] % 2 or g.shape[1] == 0:
        raise GrapeError(f"grape: generators: must be [d, d] or [axes, d, d] with d even (got shape "
                         f"{list(generators.shape)})")
    return g


def python_rotation(angle=None, *, generators=None, inv_freq=None, head_dim=None, params=(), layout="half_split",
                    name="python_rotation", max_position=DEFAULT_MAX_POSITION, summary=None):
    """A rotary encoding written in Python, for rotation.apply(x, positions), grape.torch.attention(q, k, v,
    encoding=rotation) and grape.check(rotation).

    Give exactly one of: angle(plane, pos, *params), a function of plane int64 [1, head_dim/2] and
    pos float64 [N, 1] (whole numbers) returning the angles [N, head_dim/2] (plane i turns channels
    (i, i + d/2) with layout "half_split", (2i, 2i+1) with "interleaved"; e.g. pos * inv_freq[plane]
    with a learnable inv_freq in params); generators, skew-symmetric d x d matrices L_a (a tensor
    [d, d] or [axes, d, d], or a list of them, learnable if they require grad) with ρ(pos) =
    exp(Σ_a pos_a L_a) for positions [N, axes]; or inv_freq, a frequency table [head_dim/2] (or a
    grape.rope(...)/grape.rotary(...) RotaryEncoding, which also gives head_dim and layout): RoPE,
    angle pos * inv_freq[i]. max_position: the largest position the laws draw on each axis."""
    torch = _torch()
    given = [n for n, v in (("angle", angle), ("generators", generators), ("inv_freq", inv_freq)) if v is not None]
    if len(given) != 1:
        raise GrapeError("grape: python_rotation: give exactly one of angle, generators, inv_freq (got %s)"
                         % (", ".join(given) or "none"))
    params = _params(params)
    if layout not in LAYOUTS:
        raise GrapeError(f"grape: layout: must be one of {', '.join(LAYOUTS)} (got {layout!r})")
    if not isinstance(name, str) or not name:
        raise GrapeError(f"grape: name: must be a non-empty str (got {name!r})")
    _positive_int(max_position, "max_position")
    if summary is not None and not isinstance(summary, str):
        raise GrapeError(f"grape: summary: must be a str (got {type(summary).__name__})")
    if head_dim is not None:
        _positive_int(head_dim, "head_dim")
        if head_dim % 2:
            raise GrapeError(f"grape: head_dim: must be even (got {head_dim})")
    if generators is not None:
        if params:
            raise GrapeError("grape: params: not taken with generators (the generators are the parameters)")
        g = _generators(generators)
        if head_dim is not None and head_dim != g.shape[1]:
            raise GrapeError(f"grape: head_dim: {head_dim} is not the generators' d = {g.shape[1]}")
        summary = summary or "rotation written in Python: exp(Σ_a pos_a L_a), %d generator%s of %d x %d" % (
            g.shape[0], "" if g.shape[0] == 1 else "s", g.shape[1], g.shape[1])
        return PythonRotation("generators", None, (g,), int(g.shape[1]), int(g.shape[0]), layout, name, max_position,
                              summary)
    if inv_freq is not None:
        if params:
            raise GrapeError("grape: params: not taken with inv_freq (the table is the parameter)")
        if isinstance(inv_freq, RotaryEncoding):
            enc = inv_freq
            if enc.rotary_dim != enc.head_dim or enc.attention_factor != 1.0 or len(enc.sections) > 1:
                raise GrapeError("grape: inv_freq: a RotaryEncoding must rotate every channel on one axis with "
                                 "attention_factor 1 (got %s)" % enc.describe())
            if head_dim is not None and head_dim != enc.head_dim:
                raise GrapeError(f"grape: head_dim: {head_dim} is not the encoding's {enc.head_dim}")
            head_dim, layout = enc.head_dim, enc.layout
            if layout not in LAYOUTS:
                raise GrapeError(f"grape: inv_freq: layout {layout!r} is not one of {', '.join(LAYOUTS)}")
            table = torch.tensor(list(enc.inv_freq), dtype=torch.float64)
        elif isinstance(inv_freq, torch.Tensor) and inv_freq.is_floating_point() and inv_freq.dim() == 1 \
                and inv_freq.device.type == "cpu":
            table = inv_freq
        else:
            raise GrapeError("grape: inv_freq: must be a floating-point CPU tensor [head_dim/2] or a RotaryEncoding")
        if head_dim is None:
            head_dim = 2 * table.shape[0]
        if table.shape[0] * 2 != head_dim:
            raise GrapeError(f"grape: inv_freq: has {table.shape[0]} entries, head_dim {head_dim} needs {head_dim // 2}")
        summary = summary or "rotation written in Python: RoPE, angle pos * inv_freq[i] (%s layout)" % layout
        return PythonRotation("angle", _table_angle, (table,), head_dim, 1, layout, name, max_position, summary)
    if not callable(angle):
        raise GrapeError(f"grape: angle: must be callable (got {type(angle).__name__})")
    if head_dim is None:
        raise GrapeError("grape: head_dim: needed with an angle function")
    summary = summary or "rotation written in Python: per-plane angles %s.%s (%s layout)" % (
        getattr(angle, "__module__", "?"), getattr(angle, "__qualname__", type(angle).__name__), layout)
    return PythonRotation("angle", angle, params, head_dim, 1, layout, name, max_position, summary)


_UNSUPPORTED = ("slopes", "inv_freq", "t5_table", "log_forget", "grape_a", "grape_ap", "grape_m", "offsets",
                "cu_seqlens", "key_positions", "key_offsets", "key_cu_seqlens")


def attention(q, k, v, rotation, *, causal, window, scale, layout, positions, fused, **others):
    """grape.torch.attention's branch for a PythonRotation: Q and K rotated in torch at positions (default
    0..seq-1 of each sequence), then fused(q, k, v, None, ...), grape's attention with no encoding; both
    steps are exact and differentiable, so q, k, v and the rotation's params get their gradients."""
    torch = _torch()
    for name in _UNSUPPORTED:
        if others.get(name) is not None:
            raise GrapeError(f"grape: {name}: not taken with a python_rotation encoding")
    if layout not in ("bthd", "bhtd"):
        raise GrapeError(f"grape: layout: must be 'bthd' or 'bhtd' (got {layout!r})")
    turned = []
    for name, x in (("q", q), ("k", k)):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.shape[-1] != rotation.head_dim \
                or x.dim() not in (3, 4) or (layout == "bhtd" and x.dim() != 4):
            raise GrapeError(f"grape: {name}: must be a floating-point tensor [batch, seq, heads, {rotation.head_dim}]"
                             f" (or the layout's order, or [tokens, heads, {rotation.head_dim}]) for this rotation"
                             f" (got {list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__})")
        if layout == "bhtd":  # rotate on [batch, seq, heads, dim] views, hand back the caller's layout
            turned.append(rotation.apply(x.transpose(1, 2), positions).transpose(1, 2))
        else:
            turned.append(rotation.apply(x, positions))
    return fused(turned[0], turned[1], v, None, causal=causal, window=window, scale=scale, layout=layout)


__all__ = ["PythonRotation", "python_rotation", "attention"]
