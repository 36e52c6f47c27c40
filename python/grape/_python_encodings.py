"""Score biases written in Python (grape.python_bias): the object that grape.torch.attention runs through
its tiled Python attention and grape.check checks with the laws of grape/_check_python.py."""
from ._grape import GrapeError

# The laws a Python bias may claim beyond the ones every bias is held to (finite, attention_kernel and
# the two gradient laws).
CLAIMABLE = ("relative",)
DEFAULT_TILE = 128
DEFAULT_MAX_POSITION = 1 << 20


def _torch():
    try:
        import torch
    except ImportError as e:  # the object holds torch tensors: without torch there is nothing to hold
        raise GrapeError("grape: python_bias: needs PyTorch (import torch failed: %s)" % e) from None
    return torch


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GrapeError(f"grape: {name}: must be a positive int (got {value!r})")
    return value


class PythonBias:
    """A score bias b(h, m, n) computed by a Python function of integer tensors (see python_bias)."""

    def __init__(self, fn, params, name, claims, causal_only, heads, max_position, tile, summary):
        self.fn = fn
        self.params = params
        self.name = name
        self.claims = claims
        self.causal_only = causal_only
        self.heads = heads
        self.max_position = max_position
        self.tile = tile
        self.summary = summary

    def with_fn(self, fn):
        """The same bias computed by another function (the checker's timed wrapper)."""
        return PythonBias(fn, self.params, self.name, self.claims, self.causal_only, self.heads, self.max_position,
                          self.tile, self.summary)

    def with_params(self, params):
        """The same function with other parameter tensors (the checker's float64 and perturbed copies)."""
        return PythonBias(self.fn, tuple(params), self.name, self.claims, self.causal_only, self.heads,
                          self.max_position, self.tile, self.summary)

    def __repr__(self):
        shapes = ", ".join("%s%s" % (str(p.dtype).replace("torch.", ""), list(p.shape)) for p in self.params)
        return "python_bias(%s, params=[%s], claims=%s%s)" % (self.name, shapes, self.claims,
                                                               ", causal_only" if self.causal_only else "")

    def tile_values(self, heads, q_positions, k_positions, params=None):
        """fn on one tile: heads [H, 1, 1], q_positions [1, Tq, 1], k_positions [1, 1, Tk] (int64
        tensors) -> the bias expanded to [H, Tq, Tk], in fn's own dtype (autograd flows through it).
        Whatever fn gets wrong about the contract is a GrapeError naming fn."""
        torch = _torch()
        target = (heads.shape[0], q_positions.shape[1], k_positions.shape[2])
        try:
            b = self.fn(heads, q_positions, k_positions, *(self.params if params is None else params))
        except GrapeError:
            raise
        except Exception as e:  # the user's function: say which argument failed, keep its traceback
            raise GrapeError("grape: fn: raised %s: %s (heads %s, q_pos %d..%d, k_pos %d..%d)"
                             % (type(e).__name__, str(e).splitlines()[0] if str(e) else "", target[0],
                                int(q_positions.min()), int(q_positions.max()), int(k_positions.min()),
                                int(k_positions.max()))) from e
        if not isinstance(b, torch.Tensor):
            raise GrapeError(f"grape: fn: must return a torch tensor (got {type(b).__name__})")
        if not b.is_floating_point():
            raise GrapeError(f"grape: fn: must return a floating-point tensor (got {b.dtype})")
        try:
            fits = torch.broadcast_shapes(tuple(b.shape), target) == torch.Size(target)
        except RuntimeError:
            fits = False
        if not fits:
            raise GrapeError("grape: fn: returned shape %s, which does not broadcast to [H, Tq, Tk] = %s"
                             % (list(b.shape), list(target)))
        return b.expand(target)


def python_bias(fn, params=(), name="python_bias", claims=("relative",), causal_only=False, heads=None,
                max_position=DEFAULT_MAX_POSITION, tile=DEFAULT_TILE, summary=None):
    """A score bias written in Python, for grape.torch.attention(q, k, v, encoding=bias) and grape.check(bias).

    fn(head, q_pos, k_pos, *params) takes broadcastable int64 tensors head [H, 1, 1], q_pos [1, Tq, 1],
    k_pos [1, 1, Tk] and returns the logits to add, a floating tensor that broadcasts to [H, Tq, Tk]
    (e.g. -lam[head] * torch.log1p((q_pos - k_pos).abs())). params: torch tensors handed to fn after
    the positions; those that require grad get gradients from autograd of fn per tile, per-token ones
    (a gate g[head, k_pos]) included. claims: the optional laws the bias claims ("relative": it
    depends on q_pos - k_pos only). causal_only: fn is meant for keys at or before the query only
    (attention refuses causal=False, the laws draw n <= m). heads: the query heads fn expects (None:
    any number). max_position: the largest position the laws draw (a per-token tensor's length - 1).
    tile: the query and key block of the tiled attention (an int or (q_block, k_block))."""
    torch = _torch()
    if not callable(fn):
        raise GrapeError(f"grape: fn: must be callable (got {type(fn).__name__})")
    if isinstance(params, torch.Tensor) or not isinstance(params, (list, tuple)):
        raise GrapeError(f"grape: params: must be a list or tuple of torch tensors (got {type(params).__name__})")
    for i, p in enumerate(params):
        if not isinstance(p, torch.Tensor):
            raise GrapeError(f"grape: params: item {i} must be a torch tensor (got {type(p).__name__})")
        if p.device.type != "cpu":
            raise GrapeError(f"grape: params: item {i} must be on the CPU (got a {p.device.type} tensor)")
    if not isinstance(name, str) or not name:
        raise GrapeError(f"grape: name: must be a non-empty str (got {name!r})")
    if isinstance(claims, str) or not isinstance(claims, (list, tuple)):
        raise GrapeError(f"grape: claims: must be a tuple of law names (got {claims!r})")
    for c in claims:
        if c not in CLAIMABLE:
            raise GrapeError(f"grape: claims: unknown law {c!r} (a Python bias may claim {', '.join(CLAIMABLE)})")
    if heads is not None:
        _positive_int(heads, "heads")
    _positive_int(max_position, "max_position")
    blocks = (tile, tile) if isinstance(tile, int) and not isinstance(tile, bool) else tile
    if not isinstance(blocks, (list, tuple)) or len(blocks) != 2:
        raise GrapeError(f"grape: tile: must be an int or a (q_block, k_block) pair (got {tile!r})")
    for b in blocks:
        _positive_int(b, "tile")
    if summary is not None and not isinstance(summary, str):
        raise GrapeError(f"grape: summary: must be a str (got {type(summary).__name__})")
    if summary is None:
        summary = "score bias written in Python: %s.%s" % (getattr(fn, "__module__", "?"),
                                                            getattr(fn, "__qualname__", type(fn).__name__))
    return PythonBias(fn, tuple(params), name, tuple(claims), bool(causal_only), heads, max_position,
                      tuple(blocks), summary)
