// CPU emulation of the CUDA flash attention (kernels/cuda/flash_program.hpp): the block program runs
// here over the grid a launch gets — every (query block, sequence, head), each phase to completion
// before the next — with the storage types' host stand-ins, and must match a float64 dense
// softmax(scale·QKᵀ + bias + mask)·V of the same rounded inputs (written here from the formulas)
// and its log-sum-exp. The products here are the lanes' loops; the device's tensor-core path (WMMA)
// computes the same sums in another order, which this does not see. Each case also runs with every
// phase's threads and warps in reverse order and must give the same bits: a phase that read what
// another thread of the same phase writes (a missing barrier) would not.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "flash_case.hpp"

namespace grape {
namespace {

using namespace flash_test;

/// Runs a scenario forward and in reverse order; the first failure as a sentence, or "".
template <class T>
std::string run_case(const scenario& s, std::uint64_t seed, const std::string& what) {
  const flash_case<T> c(s, seed);
  std::vector<double> want, want_lse;
  c.reference(want, want_lse);
  const std::int64_t out_size = c.tokens * s.q_heads * s.v_dim;
  std::vector<T> got(out_size), got_reverse(out_size);
  std::vector<float> lse(c.tokens * s.q_heads), lse_reverse(lse.size());
  int error = 0;
  cuda::flash_args ops = c.operands(got, lse, &error);
  const cuda::flash_smem at = cuda::flash_smem_of(kernel::element_bytes(ops.type), s.rows, s.cols, s.head_dim, s.v_dim);
  const cuda::flash_plan plan{s.rows, s.cols, 2 * s.rows, at.bytes};
  auto run = [&](std::vector<T>& out, std::vector<float>& l) {
    ops.out = out.data();
    ops.lse = l.data();
    with_scores(c, [&](const auto& bias) { emulate<T>(ops, plan, bias); });
  };
  run(got, lse);
  cuda::emulate_in_reverse() = true;
  run(got_reverse, lse_reverse);
  cuda::emulate_in_reverse() = false;
  if (error != 0) return what + ": the error flag is set";
  double worst = 0, worst_lse = 0;
  for (std::int64_t e = 0; e < out_size; ++e) {
    const float x = cuda::storage<T>::load(got[e]);
    if (x != cuda::storage<T>::load(got_reverse[e]))
      return what + ": element " + std::to_string(e) + " differs in reverse order";
    worst = std::max(worst, std::abs(x - want[e]));
  }
  for (std::size_t e = 0; e < lse.size(); ++e) {
    if (lse[e] != lse_reverse[e] && !(std::isnan(lse[e]) && std::isnan(lse_reverse[e])))
      return what + ": lse " + std::to_string(e) + " differs in reverse order";
    if (std::isinf(want_lse[e])) {
      if (!(std::isinf(lse[e]) && lse[e] < 0)) return what + ": lse " + std::to_string(e) + " of an empty row is not -inf";
    } else {
      worst_lse = std::max(worst_lse, std::abs(lse[e] - want_lse[e]));
    }
  }
  if (!(worst < tolerance<T>())) return what + ": output off by " + std::to_string(worst);
  if (!(worst_lse < tolerance<T>())) return what + ": lse off by " + std::to_string(worst_lse);
  return "";
}

TEST(FlashEmulation, MatchesTheDenseFormulaForEveryBiasAndStorageType) {
  for (bias_kind bias :
       {bias_kind::none, bias_kind::alibi, bias_kind::t5, bias_kind::fox, bias_kind::gated_key, bias_kind::gated_qk}) {
    scenario s;
    s.bias = bias;
    s.lengths = {150};
    const std::string what = "bias " + std::to_string(static_cast<int>(bias));
    EXPECT_EQ(run_case<float>(s, 1, what + " f32"), "");
    EXPECT_EQ(run_case<Eigen::half>(s, 2, what + " f16"), "");
    EXPECT_EQ(run_case<Eigen::bfloat16>(s, 3, what + " bf16"), "");
  }
}

TEST(FlashEmulation, ShapesMasksAndTilePlans) {
  struct named {
    const char* what;
    scenario s;
  };
  std::vector<named> cases;
  {
    scenario s;
    s.causal = false;
    s.lengths = {100};
    cases.push_back({"non-causal", s});
  }
  {
    scenario s;
    s.window = 17;
    s.lengths = {130};
    s.bias = bias_kind::alibi;
    cases.push_back({"causal window", s});
  }
  {
    scenario s;
    s.causal = false;
    s.window = 9;
    s.lengths = {90};
    cases.push_back({"two-sided window", s});
  }
  {
    scenario s;
    s.varlen = true;
    s.lengths = {1, 0, 77, 130, 16};
    s.positions = true;
    s.bias = bias_kind::fox;
    cases.push_back({"packed sequences, an empty one, positions", s});
    s.bias = bias_kind::gated_qk;
    cases.push_back({"packed sequences, query+key-gated GRAPE-A", s});
  }
  {
    scenario s;
    s.lengths = {33, 33, 33};
    s.positions = true;
    s.bias = bias_kind::t5;
    s.causal = false;
    cases.push_back({"padded batch, bidirectional T5", s});
  }
  {
    scenario s;
    s.q_heads = 6;
    s.k_heads = 3;
    s.v_heads = 2;
    s.head_dim = 16;
    s.v_dim = 48;
    s.lengths = {50};
    cases.push_back({"GQA with different K and V head counts, v_dim != head_dim", s});
  }
  {
    scenario s;
    s.q_token_pad = 5;
    s.lengths = {40};
    cases.push_back({"strided Q", s});
  }
  for (auto [rows, cols] : {std::pair{32, 16}, {16, 32}, {16, 16}, {64, 32}})
    for (auto& c : cases) {
      scenario s = c.s;
      s.rows = rows;
      s.cols = cols;
      const std::string what = std::string(c.what) + ", tile " + std::to_string(rows) + "x" + std::to_string(cols);
      EXPECT_EQ(run_case<float>(s, 10 + rows + cols, what), "");
      EXPECT_EQ(run_case<Eigen::bfloat16>(s, 20 + rows + cols, what + " bf16"), "");
    }
}

TEST(FlashEmulation, HeadDimsUpTo256PlanWithinASharedMemoryLimit) {
  for (int d : {64, 128, 256}) {
    scenario s;
    s.head_dim = s.v_dim = d;
    s.lengths = {70};
    cuda::flash_args ops;
    ops.type = kernel::dtype::bf16;
    ops.head_dim = ops.v_dim = d;
    for (std::int64_t limit : {48 * 1024, 99 * 1024, 163 * 1024, 227 * 1024}) {
      const cuda::flash_plan p = cuda::plan_flash(ops, limit);
      ASSERT_GT(p.rows, 0) << d << " " << limit;
      EXPECT_LE(p.smem_bytes, limit);
      EXPECT_EQ(p.threads, 2 * p.rows);
    }
    const cuda::flash_plan p = cuda::plan_flash(ops, 99 * 1024);
    s.rows = p.rows;
    s.cols = p.cols;
    EXPECT_EQ(run_case<Eigen::half>(s, 30 + d, "head_dim " + std::to_string(d)), "");
  }
}

TEST(FlashEmulation, ABadSequenceTableSetsTheErrorFlagAndWritesNothing) {
  scenario s;
  s.varlen = true;
  s.lengths = {10, 20};
  flash_case<float> c(s, 5);
  c.cu[2] = c.tokens + 3;  // past the tokens
  std::vector<float> out(c.tokens * s.q_heads * s.v_dim, 7.0f), lse(c.tokens * s.q_heads, 7.0f);
  int error = 0;
  const cuda::flash_args ops = c.operands(out, lse, &error);
  emulate<float>(ops, cuda::plan_flash(ops, 99 * 1024), cuda::no_scores{});
  EXPECT_EQ(error, 1);
  for (std::int64_t t = c.cu[1]; t < c.tokens; ++t) EXPECT_EQ(out[t * s.q_heads * s.v_dim], 7.0f);
}

TEST(FlashEmulation, BadArgumentsGetOneLineErrors) {
  scenario s;
  flash_case<float> c(s, 6);
  std::vector<float> out(c.tokens * s.q_heads * s.v_dim), lse(c.tokens * s.q_heads);
  int error = 0;
  auto expect_error = [&](auto edit, const std::string& message) {
    cuda::flash_args ops = c.operands(out, lse, &error);
    edit(ops);
    try {
      cuda::check_flash(ops);
      ADD_FAILURE() << "no error for: " << message;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  };
  expect_error([](auto& o) { o.k_heads = 3; }, "k_heads: must divide q_heads = 2");
  expect_error([](auto& o) { o.head_dim = 24; }, "head_dim: must be a multiple of 16 in [16, 256]");
  expect_error([](auto& o) { o.v_dim = 512; }, "v_dim: must be a multiple of 16");
  expect_error([](auto& o) { o.tokens = 5; }, "tokens: must be batch × seq_len");
  expect_error([](auto& o) { o.scale = std::nanf(""); }, "scale: must be finite");
  expect_error([](auto& o) { o.error = nullptr; }, "error: the device flag");
  expect_error([](auto& o) { o.v = nullptr; }, "q, k, v, out: must not be null");
  cuda::flash_args ops = c.operands(out, lse, &error);
  EXPECT_THROW(cuda::check_flash_bias(ops, cuda::fox_scores{c.fox_prefix.data(), 10}), input_error);
  EXPECT_THROW(cuda::check_flash_bias(ops, cuda::gated_scores{c.omega.data(), nullptr, nullptr, 400}), input_error);
  EXPECT_THROW(cuda::check_flash_bias(ops, cuda::t5_scores{c.t5_distances.data(), 1, 20, true}), input_error);
}

// Random shapes: every combination the scenarios above name one by one.
RC_GTEST_PROP(FlashEmulation, RandomScenariosMatchTheDenseFormula, ()) {
  scenario s;
  s.k_heads = *rc::gen::element(1, 2);
  s.v_heads = *rc::gen::element(1, 2);
  s.q_heads = s.k_heads * s.v_heads * *rc::gen::inRange(1, 3);
  s.head_dim = 16 * *rc::gen::inRange(1, 4);
  s.v_dim = 16 * *rc::gen::inRange(1, 4);
  s.varlen = *rc::gen::arbitrary<bool>();
  const int batch = *rc::gen::inRange(1, 4);
  s.lengths.clear();
  for (int b = 0; b < batch; ++b) s.lengths.push_back(*rc::gen::inRange(0, 90));
  if (!s.varlen && s.lengths[0] == 0) s.lengths[0] = 1;
  s.positions = *rc::gen::arbitrary<bool>();
  s.causal = *rc::gen::arbitrary<bool>();
  s.window = *rc::gen::element<std::int64_t>(0, 0, 1, 7, 40);
  s.bias = *rc::gen::element(bias_kind::none, bias_kind::alibi, bias_kind::t5, bias_kind::fox, bias_kind::gated_key,
                             bias_kind::gated_qk);
  s.rows = *rc::gen::element(16, 32, 64);
  s.cols = *rc::gen::element(16, 32, 64);
  const auto seed = *rc::gen::arbitrary<std::uint32_t>();
  RC_ASSERT(run_case<float>(s, seed, "random f32") == "");
  RC_ASSERT(run_case<Eigen::half>(s, seed + 1, "random f16") == "");
}

}  // namespace
}  // namespace grape
