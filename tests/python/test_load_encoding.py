"""grape.load_encoding: the tutorial's own C++ encodings (examples/quaternion_rope.hpp,
examples/log_distance.hpp), unchanged, loaded in one call each and used wherever a built-in goes:
check (and the broken variants' counterexamples), rotate_qk, the fused attention forward, backward
and decode, grape.torch.attention with gradients against float64 autograd (the slopes' too), and the
cache. The references are the encodings' formulas in float64: the quaternion rotation's angle
m·base^(-4b/d) and its left-multiplication structure, the bias -λ_h·log(1 + |m − n|) with
λ_h = 2^(-8(h+1)/H)."""
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import grape
import grape.torch as gt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
BROKEN = os.path.join(ROOT, "tests", "python", "encodings", "broken_variants.hpp")


@pytest.fixture(scope="module")
def quaternion():
    return grape.load_encoding(os.path.join(EXAMPLES, "quaternion_rope.hpp"), "quaternion_rope<>")


@pytest.fixture(scope="module")
def log_distance():
    return grape.load_encoding(os.path.join(EXAMPLES, "log_distance.hpp"), "log_distance")


def quaternion_matrix(a, b, c, d):
    """Left multiplication by the quaternion a + b i + c j + d k on (x0, x1, x2, x3)."""
    return np.array([[a, -b, -c, -d], [b, a, -d, c], [c, d, a, -b], [d, -c, b, a]])


def rotation_of(enc, head_dim, positions):
    """ρ(m) for each position as grape.rotate_qk applies it (float32), from the unit vectors."""
    n = len(positions)
    eye = np.tile(np.eye(head_dim, dtype=np.float32), (n, 1, 1))  # [n, d (as tokens' heads), d]
    q = eye.copy()
    k = eye.copy()
    q_rot, _ = grape.rotate_qk(q, k, positions=np.asarray(positions, dtype=np.int64), encoding=enc)
    return np.transpose(np.asarray(q_rot, dtype=np.float64), (0, 2, 1))  # column j = ρ(m) e_j


def reference_rotation(enc, head_dim, base, positions):
    """ρ(m) in float64 from the formula: block b is left multiplication by cos(mθ_b) + sin(mθ_b)·u_b,
    θ_b = base^(-4b/d); the axes u_b (drawn from axis_seed) read once from ρ(1)."""
    at_one = rotation_of(enc, head_dim, [1])[0]
    out = np.zeros((len(positions), head_dim, head_dim))
    for b in range(head_dim // 4):
        theta = base ** (-4.0 * b / head_dim)
        vector = at_one[4 * b + 1:4 * b + 4, 4 * b]  # sin(θ)·u
        u = vector / np.linalg.norm(vector)
        for i, m in enumerate(positions):
            angle = m * theta
            out[i, 4 * b:4 * b + 4, 4 * b:4 * b + 4] = quaternion_matrix(math.cos(angle), *(math.sin(angle) * u))
    return out


def test_quaternion_rope_loads_with_the_surface_of_a_built_in(quaternion):
    assert quaternion.name == "quaternion_rope" and quaternion.param_names is None and quaternion.param_count == 3
    enc = quaternion.make(8, 10000.0, 7)
    assert isinstance(enc, grape.BuiltinEncoding)
    assert enc.rotates_qk and enc.head_dim == 8 and not enc.has_bias_tile and enc.params == [8, 10000.0, 7]
    assert enc.injection == "rotate Q and K"


def test_quaternion_rotate_qk_matches_the_formula_at_large_positions(quaternion):
    enc = quaternion.make(8, 10000.0, 7)
    positions = [0, 1, 5, 1000, 123457, 2 ** 30 + 3]
    got = rotation_of(enc, 8, positions)
    want = reference_rotation(enc, 8, 10000.0, positions)
    assert np.abs(got - want).max() < 2e-6  # float32 output of an exact angle (docs/precision.md)


def test_quaternion_check_passes_and_the_wrong_key_action_fails_with_a_counterexample(quaternion):
    report = grape.check(quaternion, trials=30, seed=3)
    assert report.passed and report.encoding == "quaternion_rope"
    assert report.law("relative").holds and report.law("attention_kernel").holds
    broken = grape.load_encoding(BROKEN, "quaternion_rope<wrong_key_turns>", include_dirs=[EXAMPLES],
                                 name="quaternion_rope_wrong_keys")
    bad = broken.check(trials=30, seed=3)
    assert not bad.passed
    relative = bad.law("relative")
    assert not relative.holds and relative.counterexample is not None
    assert relative.counterexample.error > relative.counterexample.tolerance


def test_check_at_given_parameters(quaternion, log_distance):
    report = grape.check(quaternion.make(8, 100.0, 3), trials=20)
    assert report.passed and "8 100 3" in report.parameters
    with pytest.raises(grape.GrapeError, match=r"^grape: quaternion_rope: head_dim: must be a positive multiple of 4$"):
        quaternion.make(6, 100.0, 3)


def dense_attention(q, k, v, bias=None, causal=True):
    """float64 softmax(q kᵀ/√d + bias) v, q/k/v [t, h, d]."""
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    if causal:
        t = q.shape[0]
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)


def expect_float64_agreement(out, ref, ours, ref_in, param=None, ref_param=None):
    """grape's float32 output and the gradients of q, k, v (and of one encoding parameter) against a
    float64 autograd reference, for one random upstream gradient."""
    assert (out.double() - ref).abs().max() < 2e-5
    grad = torch.randn_like(ref)
    out.backward(grad.float())
    ref.backward(grad)
    for got, want in zip(ours, ref_in):
        assert (got.grad.double() - want.grad).abs().max() < 5e-5
    if param is not None:
        assert (param.grad - ref_param.grad).abs().max() < 1e-4 * max(1.0, ref_param.grad.abs().max().item())


def test_quaternion_trains_through_the_fused_attention_with_float64_gradients(quaternion):
    torch.manual_seed(0)
    t, h, d = 40, 2, 8
    enc = quaternion.make(d, 10000.0, 7)
    positions = list(range(100, 100 + t))
    rho = torch.tensor(reference_rotation(enc, d, 10000.0, positions))  # [t, d, d]
    q, k, v = (torch.randn(t, h, d, dtype=torch.float64) for _ in range(3))
    ours = [x.float().requires_grad_() for x in (q, k, v)]
    out = gt.attention(*ours, enc, positions=torch.tensor(positions), causal=True)
    ref_in = [x.clone().requires_grad_() for x in (q, k, v)]
    rot = lambda x: torch.einsum("tij,thj->thi", rho, x)  # noqa: E731
    ref = dense_attention(rot(ref_in[0]), rot(ref_in[1]), ref_in[2])
    expect_float64_agreement(out, ref, ours, ref_in)


def test_quaternion_decode_matches_the_prefill(quaternion):
    torch.manual_seed(1)
    enc = quaternion.make(8, 10000.0, 7)
    t, h, d = 17, 2, 8
    q, k, v = (torch.randn(t, h, d).numpy() for _ in range(3))
    full = np.asarray(grape.attention(q, k, v, enc, causal=True))
    _, k_rotated = grape.rotate_qk(None, k, enc)  # the cache holds K turned at its positions 0..t-1
    one = grape.attention_decode(q[-1:].copy(), np.asarray(k_rotated)[None].copy(), v[None].copy(),
                                 np.zeros((1, 1), np.int32), np.array([t], np.int64), enc)
    assert np.abs(np.asarray(one)[0] - full[-1]).max() < 1e-5


def log_distance_bias(heads, t, slopes=None):
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)], dtype=torch.float64) \
        if slopes is None else slopes
    pos = torch.arange(t, dtype=torch.float64)
    distance = (pos[:, None] - pos[None, :]).abs()
    return -slopes[:, None, None] * torch.log1p(distance)[None]


def test_log_distance_loads_and_its_tile_is_the_formula(log_distance):
    enc = log_distance.make(4, 8)
    assert enc.has_bias_tile and not enc.rotates_qk
    assert np.allclose(enc.bias_params, [2.0 ** (-8.0 * (h + 1) / 4) for h in range(4)], rtol=0, atol=1e-15)
    tile = np.asarray(enc.bias_tile(6, 9, q_start=3, k_start=0))
    want = log_distance_bias(4, 12).numpy()[:, 3:9, 0:9]
    finite = np.isfinite(tile)
    assert np.array_equal(finite, np.isfinite(want)) or finite.all()
    assert np.abs(tile[finite] - want[finite]).max() < 1e-6


def test_log_distance_check_passes_and_the_flipped_slopes_fail_the_reference(log_distance):
    report = grape.check(log_distance, trials=30, seed=5)
    assert report.passed and report.law("bias_gradient").holds
    flipped = grape.load_encoding(BROKEN, "log_distance_flipped", include_dirs=[EXAMPLES])
    bad = grape.check(flipped, trials=30, seed=5)
    assert not bad.passed and bad.law("score_invariance").holds
    reference = bad.law("reference_agreement")
    assert not reference.holds and reference.counterexample is not None


def test_log_distance_slopes_train_with_float64_gradients(log_distance):
    torch.manual_seed(2)
    t, h, d = 33, 4, 8
    enc = log_distance.make(h, d)
    q, k, v = (torch.randn(t, h, d, dtype=torch.float64) for _ in range(3))
    slopes = torch.tensor([0.3, 0.1, 0.7, 0.05], dtype=torch.float64)
    ours = [x.float().requires_grad_() for x in (q, k, v)]
    mine_slopes = slopes.clone().requires_grad_()
    out = gt.attention(*ours, enc, bias_params=mine_slopes, causal=True)
    ref_in = [x.clone().requires_grad_() for x in (q, k, v)]
    ref_slopes = slopes.clone().requires_grad_()
    ref = dense_attention(*ref_in, bias=log_distance_bias(h, t, ref_slopes))
    expect_float64_agreement(out, ref, ours, ref_in, mine_slopes, ref_slopes)


def test_builtin_alibi_slopes_train_through_bias_params():
    torch.manual_seed(3)
    t, h, d = 20, 4, 8
    enc = grape.encoding("alibi", heads=h, head_dim=d)
    slopes = torch.tensor(enc.bias_params, dtype=torch.float64).requires_grad_()
    q, k, v = (torch.randn(t, h, d, requires_grad=True) for _ in range(3))
    gt.attention(q, k, v, enc, bias_params=slopes).sum().backward()
    pos = torch.arange(t, dtype=torch.float64)
    ref_slopes = slopes.detach().clone().requires_grad_()
    bias = -ref_slopes[:, None, None] * (pos[:, None] - pos[None, :]).abs()[None]
    dense_attention(q.detach().double(), k.detach().double(), v.detach().double(), bias=bias).sum().backward()
    assert (slopes.grad - ref_slopes.grad).abs().max() < 1e-4


def test_a_second_load_in_a_new_process_takes_under_a_second(quaternion):
    code = ("import time, grape; t = time.perf_counter(); grape.load_encoding(%r, 'quaternion_rope<>'); "
            "print(time.perf_counter() - t)" % os.path.join(EXAMPLES, "quaternion_rope.hpp"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(done.stdout.strip().splitlines()[-1]) < 1.0


def test_a_changed_header_is_built_again(tmp_path):
    header = tmp_path / "my_bias.hpp"
    text = open(os.path.join(EXAMPLES, "log_distance.hpp"), encoding="utf-8").read()
    header.write_text(text.replace('"log_distance"', '"my_bias"'))
    first = grape.load_encoding(str(header), "log_distance")
    assert first.name == "my_bias"
    header.write_text(text.replace('"log_distance"', '"my_bias"').replace("-8.0 * (h + 1)", "-4.0 * (h + 1)"))
    second = grape.load_encoding(str(header), "log_distance")
    assert second.library != first.library
    assert abs(second.make(2, 4).bias_params[0] - 2.0 ** -2.0) < 1e-15


@pytest.mark.parametrize("call, message", [
    (lambda: grape.load_encoding("/nonexistent/x.hpp", "x"), r"^grape: load_encoding: header: no file /nonexistent/x.hpp$"),
    (lambda: grape.load_encoding(BROKEN, "not_an_encoding", include_dirs=[EXAMPLES]),
     r"^grape: load_encoding: not_an_encoding: the type given to grape.load_encoding is not a grape::Encoding"),
    (lambda: grape.load_encoding(BROKEN, "no_such_type", include_dirs=[EXAMPLES]),
     r"^grape: load_encoding: no_such_type: \S+/encoding\.cpp:\d+:\d+: .*no_such_type"),
    (lambda: grape.load_encoding(os.path.join(EXAMPLES, "quaternion_rope.hpp"), "quaternion_rope<>", include_dirs=["/nonexistent"]),
     r"^grape: load_encoding: include_dirs: no directory /nonexistent$"),
    (lambda: grape.load_encoding(os.path.join(EXAMPLES, "log_distance.hpp"), "log_distance", name="alibi"),
     r"^grape: load_encoding: name 'alibi' is a built-in's: give name=$"),
])
def test_bad_input_gets_one_line(call, message):
    with pytest.raises(grape.GrapeError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_bad_parameters_get_one_line(quaternion, log_distance):
    with pytest.raises(grape.GrapeError, match=r"^grape: quaternion_rope: its params struct names no members .*give "
                                               r"its 3 values in order$"):
        quaternion.make(head_dim=8)
    with pytest.raises(grape.GrapeError, match=r"^grape: quaternion_rope: its params struct names no members .*give "
                                               r"its 3 values in order as a list \(got \[8,10000.0\]\)$"):
        quaternion.make(8, 10000.0)
    with pytest.raises(grape.GrapeError, match=r"^grape: quaternion_rope\[0\]: must be an integer \(got 8.5\)$"):
        quaternion.make(8.5, 10000.0, 1)
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: bias_params: must be \[4\]"):
        gt.attention(*(torch.randn(5, 4, 8) for _ in range(3)), log_distance.make(4, 8),
                     bias_params=torch.ones(3, dtype=torch.float64))
    with pytest.raises(grape.GrapeError, match=r"^grape: attention: bias_params: this encoding's score bias has no"):
        gt.attention(*(torch.randn(5, 2, 8) for _ in range(3)), quaternion.make(8, 1e4, 1),
                     bias_params=torch.ones(3, dtype=torch.float64))


def test_the_cpp_encoding_lm_example_trains_with_each_encoding():
    sys.path.insert(0, os.path.join(EXAMPLES, "python"))
    try:
        import cpp_encoding_lm
    finally:
        sys.path.pop(0)
    for name in ("quaternion", "log_distance"):
        result = cpp_encoding_lm.main(["--encoding", name, "--steps", "15"])
        assert result["report"].passed
        assert result["losses"][-1] < result["losses"][0] - 0.5
    moved = [float((after - torch.tensor(result["slopes_before"], dtype=torch.float64)).abs().max())
             for after in result["slopes_after"]]
    assert len(moved) == 2 and min(moved) > 1e-3  # the slopes learn


def run_grape(*args):
    """The package's `grape` command (python -m grape): grape gen --header for a user's type."""
    return subprocess.run([sys.executable, "-m", "grape", *args], capture_output=True, text=True)


def test_grape_gen_bakes_the_users_view_into_a_file_that_compiles_without_grape(quaternion, tmp_path):
    out = tmp_path / "quaternion.cpp"
    done = run_grape("gen", "--header", os.path.join(EXAMPLES, "quaternion_rope.hpp"), "--type", "quaternion_rope<>",
                     "--params", "[8, 10000.0, 7]", "--target", "cpp", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "grape_quaternion_rope_encode written (cpp, encoding quaternion_rope)" in done.stdout
    text = out.read_text()
    assert "// ---- begin quaternion_view.hpp (embedded from the user's source) ----" in text
    library = tmp_path / "quaternion.so"
    subprocess.run(["g++", "-std=c++17", "-O2", "-shared", "-fPIC", str(out), "-o", str(library)], check=True)
    import ctypes
    entry = ctypes.CDLL(str(library)).grape_quaternion_rope_encode
    entry.restype = ctypes.c_int
    enc = quaternion.make(8, 10000.0, 7)
    rng = np.random.default_rng(4)
    tokens, heads = 7, 3
    positions = np.array([0, 1, 2, 1000, 65537, 2 ** 28 + 5, 2 ** 31 - 1], dtype=np.int64)
    for dtype, code in ((torch.float32, 0), (torch.bfloat16, 1)):
        q = torch.tensor(rng.standard_normal((tokens, heads, 8)), dtype=dtype)
        k = torch.tensor(rng.standard_normal((tokens, 1, 8)), dtype=dtype)
        want_q, want_k = grape.rotate_qk(q.clone(), k.clone(), enc, positions=positions)
        got_q, got_k = q.clone(), k.clone()
        i64 = ctypes.c_int64
        rc = entry(ctypes.c_void_p(got_q.data_ptr()), ctypes.c_void_p(got_k.data_ptr()),
                   ctypes.c_void_p(positions.ctypes.data), i64(tokens), i64(heads), i64(1), i64(heads * 8), i64(8),
                   i64(8), i64(8), ctypes.c_int(code))
        assert rc == 0
        # grape's kernel is built with -march=native and may contract to FMA, the file here not: f32
        # within 1e-6 max(1, |x|), bf16 within one unit in the last place (tests/gen/gen_instance_test.cpp).
        for got, want in ((got_q, torch.as_tensor(want_q)), (got_k, torch.as_tensor(want_k))):
            g, w = got.double(), want.double()
            if dtype == torch.float32:
                assert ((g - w).abs() / w.abs().clamp(min=1)).max() <= 1e-6
            else:
                ulp = torch.exp2(torch.floor(torch.log2(w.abs().clamp(min=1e-30))) - 7)
                assert ((g - w).abs() <= ulp).all()


def test_grape_gen_cuda_target_and_bad_input(quaternion, log_distance, tmp_path):
    out = tmp_path / "quaternion.cu"
    done = run_grape("gen", "--header", os.path.join(EXAMPLES, "quaternion_rope.hpp"), "--type", "quaternion_rope<>",
                     "--params", "[8, 10000.0, 7]", "--target", "cuda", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "grape_quaternion_rope_encode_cuda" in out.read_text()
    if shutil.which("nvcc"):  # the CUDA toolkit compiles it with no grape include path either
        subprocess.run(["nvcc", "-std=c++17", "-c", str(out), "-o", str(tmp_path / "quaternion.o")], check=True)
    bad = run_grape("gen", "--header", os.path.join(EXAMPLES, "log_distance.hpp"), "--type", "log_distance",
                    "--params", "[4, 8]", "--target", "cpp", "--out", str(tmp_path / "bias.cpp"))
    assert bad.returncode == 2 and not (tmp_path / "bias.cpp").exists()
    assert bad.stderr.strip() == ("grape: gen: log_distance enters attention as 'add a score bias'; grape gen bakes "
                                  "encodings that rotate Q and K through a view")
    missing = run_grape("gen", "--header", os.path.join(EXAMPLES, "quaternion_rope.hpp"), "--type",
                        "quaternion_rope<>", "--target", "cpp", "--out", str(tmp_path / "q.cpp"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == "grape: --params: quaternion_rope has no default_params(): give its parameters"
    cli = subprocess.run([grape._check.cli_path(), "gen", "--header", "x.hpp", "--type", "x", "--target", "cpp",
                          "--out", str(tmp_path / "x.cpp")], capture_output=True, text=True)
    assert cli.returncode == 2 and cli.stderr.startswith("grape: gen: --header and --type compile a type of your own")


def rope_reference(q, k, inv_freq, positions):
    """Half-split RoPE in float64: channel i pairs with i + d/2, turned by positions·inv_freq[i]."""
    angle = positions[:, None].double() * inv_freq[None, :]  # [t, d/2]
    cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]

    def turn(x):
        a, b = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    return turn(q), turn(k)


@pytest.mark.parametrize("source", ["built-in rope", "loaded hour_of_day_rope"])
def test_rotation_frequencies_train_through_the_fused_attention(source):
    torch.manual_seed(5)
    t, h, d = 20, 2, 8
    if source == "built-in rope":
        enc = grape.encoding("rope", head_dim=d, rotary_dim=d)
    else:  # the tutorial's cyclic RoPE, a user's type on rotation planes (examples/hour_of_day_rope.hpp)
        loaded = grape.load_encoding(os.path.join(EXAMPLES, "hour_of_day_rope.hpp"), "hour_of_day_rope<true>")
        enc = loaded.make(d)
        assert np.allclose(enc.inv_freq, [2 * math.pi * (i + 1) / 24 for i in range(d // 2)], rtol=0, atol=1e-15)
    inv_freq = torch.tensor(enc.inv_freq, dtype=torch.float64) * 1.3  # away from the type's own table
    q, k, v = (torch.randn(t, h, d, dtype=torch.float64) for _ in range(3))
    ours = [x.float().requires_grad_() for x in (q, k, v)]
    mine = inv_freq.clone().requires_grad_()
    out = gt.attention(*ours, enc, inv_freq=mine, causal=True)
    ref_in = [x.clone().requires_grad_() for x in (q, k, v)]
    ref_freq = inv_freq.clone().requires_grad_()
    qr, kr = rope_reference(ref_in[0], ref_in[1], ref_freq, torch.arange(t))
    ref = dense_attention(qr, kr, ref_in[2])
    expect_float64_agreement(out, ref, ours, ref_in, mine, ref_freq)
    with pytest.raises(grape.GrapeError, match=r"^grape: inv_freq: \w+ turns 4 planes \(got 3 frequencies\)$"):
        gt.attention(*ours, enc, inv_freq=torch.ones(3, dtype=torch.float64))


def test_setting_parameters_an_encoding_lacks_is_one_line(quaternion, log_distance):
    with pytest.raises(grape.GrapeError, match=r"^grape: bias_params: quaternion_rope has no score bias with "
                                               r"parameters$"):
        quaternion.make(8, 1e4, 1).with_bias_params([1.0])
    with pytest.raises(grape.GrapeError, match=r"^grape: inv_freq: log_distance is not a rotation by planes on one "
                                               r"axis$"):
        log_distance.make(4, 8).with_inv_freq([1.0])
    assert quaternion.make(8, 1e4, 1).inv_freq == []  # quaternion blocks, not planes
