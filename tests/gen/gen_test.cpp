// grape gen, end to end: for every bundled rotary config the CLI writes a C++ source, g++ builds it
// into a shared library, and the loaded entry point must agree with grape::cpu::rotate_qk on the
// same input (f32, bf16, f16; several heads, GQA, strided layouts, positions up to 2^31 - 1). The
// baked turn fractions must be the library's, the embedded math the library's own header text.
// With nvcc (GRAPE_NVCC from CMake, or the GRAPE_GEN_NVCC environment variable), the CUDA sources
// must compile for every arch with no register spill and no stack frame. Bad input: one-line
// errors, exit 2, no output file.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "gen_support.hpp"
#include "gen/embedded_headers.hpp"
#include "gen/kernel_gen.hpp"
#include "grape/detail/error.hpp"
#include "grape/math/phase.hpp"
#include "model/rope_schedule.hpp"
#include "model/model_config.hpp"

namespace {

using namespace grape_gen_test;

using rope_fn = int (*)(void*, void*, const std::int64_t*, std::int64_t, std::int64_t, std::int64_t,
                        std::int64_t, std::int64_t, std::int64_t, std::int64_t, int);

struct bundled_model {
  std::string dir;     // folder name under examples/configs
  fs::path config;
  std::string name;    // entry point fragment
  grape::rotary_spec spec;
};

// The spec `grape gen` uses by default: the schedule evaluated at max_position_embeddings (or the
// original context when that is all there is), the reference's float32 frequencies, as in
// cli::evaluate_model.
grape::rotary_spec default_spec(const grape::model::model_description& m) {
  const auto& s = m.rotary.schedule;
  const std::int64_t len =
      m.max_position_embeddings > 0 ? m.max_position_embeddings : s.original_max_position_embeddings;
  const auto table = grape::evaluate(s, len, grape::frequency_precision::float32_reference);
  return grape::make_rotary_spec(table, m.rotary.head_dim, m.rotary.rotary_dim, m.rotary.layout);
}

const std::vector<bundled_model>& rotary_models() {
  static const std::vector<bundled_model> models = [] {
    std::vector<bundled_model> v;
    for (const auto& e : fs::directory_iterator(fs::path(GRAPE_SOURCE_DIR) / "examples/configs")) {
      const fs::path cfg = e.path() / "config.json";
      if (!fs::exists(cfg)) continue;
      const auto m = grape::model::load_model_config(cfg.string());
      if (m.kind != grape::model::encoding_kind::rotary) continue;
      v.push_back({e.path().filename().string(), cfg, grape::gen::model_name_from_path(cfg.string()),
                   default_spec(m)});
    }
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.dir < b.dir; });
    return v;
  }();
  return models;
}

// Every rotary config generated through the CLI and built into one shared library, once.
const built_library& cpp_library() {
  static const built_library lib = [] {
    built_library b;
    std::string files;
    for (const auto& m : rotary_models()) {
      const fs::path out = work_dir() / (m.name + ".cpp");
      const auto r = run_grape("gen --config " + quote(m.config.string()) + " --target cpp --out " +
                               quote(out.string()));
      if (r.code != 0) {
        b.error = "grape gen failed for " + m.dir + ": " + r.err;
        return b;
      }
      b.sources[m.dir] = slurp(out);
      files += " " + quote(out.string());
    }
    build_and_load(b, files, work_dir() / "generated_rope.so");
    return b;
  }();
  return lib;
}

rope_fn entry(const built_library& lib, const bundled_model& m) {
  return reinterpret_cast<rope_fn>(
      dlsym(lib.handle, grape::gen::entry_point_name(m.name, grape::gen::target::cpp).c_str()));
}

std::vector<std::int64_t> test_positions(std::int64_t tokens, std::mt19937_64& rng) {
  std::vector<std::int64_t> p = {0, 1, 2147483647, 4096, 131071};
  std::uniform_int_distribution<std::int64_t> any(0, 2147483647);
  while (static_cast<std::int64_t>(p.size()) < tokens) p.push_back(any(rng));
  p.resize(static_cast<std::size_t>(tokens));
  return p;
}

void reference(const grape::rotary_spec& spec, grape::cpu::dtype type, void* q, void* k,
               const std::vector<std::int64_t>& pos, const qk_layout& l) {
  grape::cpu::rotate_qk_args a;
  a.type = type;
  a.q = {q, q, l.q_heads, l.q_size, 0, l.q_ts, l.q_hs};
  a.k = {k, k, l.k_heads, l.k_size, 0, l.k_ts, l.k_hs};
  a.batch = 1;
  a.seq_len = l.tokens;
  a.position_ids = pos.data();
  a.position_type = grape::cpu::index_type::i64;
  a.threads = 1;
  grape::cpu::rotate_qk(spec, a);
}

class GenCpp : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& lib = cpp_library();
    ASSERT_NE(lib.handle, nullptr) << lib.error;
    ASSERT_GE(rotary_models().size(), 10u);
  }
};

TEST_F(GenCpp, Float32MatchesTheCpuKernelForEveryBundledModel) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (const auto& m : rotary_models()) {
    SCOPED_TRACE(m.dir);
    const rope_fn fn = entry(cpp_library(), m);
    ASSERT_NE(fn, nullptr);
    for (auto [q_heads, k_heads] : {std::pair{4, 2}, std::pair{8, 1}, std::pair{3, 3}}) {
      const qk_layout l = make_qk_layout(m.spec.head_dim, 9, q_heads, k_heads);
      std::vector<float> q(static_cast<std::size_t>(l.q_size)), k(static_cast<std::size_t>(l.k_size));
      for (auto& x : q) x = unit(rng);
      for (auto& x : k) x = unit(rng);
      const auto pos = test_positions(l.tokens, rng);
      auto q_ref = q, k_ref = k;
      reference(m.spec, grape::cpu::dtype::f32, q_ref.data(), k_ref.data(), pos, l);
      ASSERT_EQ(fn(q.data(), k.data(), pos.data(), l.tokens, l.q_heads, l.k_heads, l.q_ts, l.q_hs,
                   l.k_ts, l.k_hs, 0),
                0);
      double worst = 0;
      for (std::size_t i = 0; i < q.size(); ++i) worst = std::max(worst, double(std::fabs(q[i] - q_ref[i])));
      for (std::size_t i = 0; i < k.size(); ++i) worst = std::max(worst, double(std::fabs(k[i] - k_ref[i])));
      EXPECT_LE(worst, 1e-6) << "q_heads " << q_heads << " k_heads " << k_heads;
    }
  }
}

// bf16 (dtype 1) and f16 (dtype 2): within one unit in the last place of the reference.
void check_half(grape::cpu::dtype type, int code, std::uint16_t (*narrow)(float), float (*widen)(std::uint16_t)) {
  std::mt19937_64 rng(11 + code);
  std::uniform_real_distribution<float> unit(-4.0f, 4.0f);
  for (const auto& m : rotary_models()) {
    SCOPED_TRACE(m.dir);
    const rope_fn fn = entry(cpp_library(), m);
    ASSERT_NE(fn, nullptr);
    const qk_layout l = make_qk_layout(m.spec.head_dim, 9, 4, 2);
    std::vector<std::uint16_t> q(static_cast<std::size_t>(l.q_size)), k(static_cast<std::size_t>(l.k_size));
    for (auto& x : q) x = narrow(unit(rng));
    for (auto& x : k) x = narrow(unit(rng));
    const auto pos = test_positions(l.tokens, rng);
    auto q_ref = q, k_ref = k;
    reference(m.spec, type, q_ref.data(), k_ref.data(), pos, l);
    ASSERT_EQ(fn(q.data(), k.data(), pos.data(), l.tokens, l.q_heads, l.k_heads, l.q_ts, l.q_hs,
                 l.k_ts, l.k_hs, code),
              0);
    int worst = 0, differ = 0;
    std::string first_bad;
    auto compare = [&](const std::vector<std::uint16_t>& got, const std::vector<std::uint16_t>& want, const char* what) {
      for (std::size_t i = 0; i < got.size(); ++i) {
        int ulps = std::abs(ordered16(got[i]) - ordered16(want[i]));
        differ += ulps != 0;
        // Where x0·c − x1·s cancels, the result is far below the inputs and its ulp far below
        // float32's rounding of the products (the library is built with -march=native and may
        // contract to FMA; the generated file here is not): there the float32 bound applies,
        // 1e-6 per unit of input (inputs up to 4).
        if (ulps > 1 && std::fabs(widen(got[i]) - widen(want[i])) <= 4e-6f) ulps = 1;
        worst = std::max(worst, ulps);
        if (ulps > 1 && first_bad.empty())
          first_bad = std::string(what) + "[" + std::to_string(i) + "]: " + std::to_string(widen(got[i])) +
                      " vs " + std::to_string(widen(want[i]));
      }
    };
    compare(q, q_ref, "q");
    compare(k, k_ref, "k");
    EXPECT_LE(worst, 1) << differ << " elements differ; " << first_bad;
  }
}

TEST_F(GenCpp, Bfloat16WithinOneUlpOfTheCpuKernel) { check_half(grape::cpu::dtype::bf16, 1, to_bf16, from_bf16); }

TEST_F(GenCpp, Float16WithinOneUlpOfTheCpuKernel) { check_half(grape::cpu::dtype::f16, 2, to_f16, from_f16); }

// The kTurnFractions initializer of a generated file, in plane order.
std::vector<std::uint64_t> baked_fractions(const std::string& src) {
  const std::regex fraction(R"(0x([0-9a-f]{16})ull,\s*//\s*(\d+): theta)");
  std::vector<std::uint64_t> baked;
  for (auto it = std::sregex_iterator(src.begin(), src.end(), fraction); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(std::stoul((*it)[2].str()), baked.size());
    baked.push_back(std::stoull((*it)[1].str(), nullptr, 16));
  }
  return baked;
}

TEST_F(GenCpp, BakesTheLibrarysTurnFractionsAndConstants) {
  const std::regex af(R"(constexpr double kAttentionFactor = ([^;]+);)");
  for (const auto& m : rotary_models()) {
    SCOPED_TRACE(m.dir);
    const std::string& src = cpp_library().sources.at(m.dir);
    const std::vector<std::uint64_t> baked = baked_fractions(src);
    ASSERT_EQ(baked.size(), m.spec.inv_freq.size());
    for (std::size_t i = 0; i < baked.size(); ++i)
      EXPECT_EQ(baked[i], grape::math::turn_fraction_of(m.spec.inv_freq[i])) << "plane " << i;
    std::smatch match;
    ASSERT_TRUE(std::regex_search(src, match, af));
    EXPECT_EQ(std::strtod(match[1].str().c_str(), nullptr), m.spec.attention_factor);
    EXPECT_NE(src.find("constexpr int kHeadDim = " + std::to_string(m.spec.head_dim) + ";"), std::string::npos);
    EXPECT_NE(src.find("constexpr int kRotaryDim = " + std::to_string(m.spec.rotary_dim) + ";"), std::string::npos);
    const std::string lay = m.spec.layout == grape::layout_kind::half_split ? "half_split" : "interleaved";
    EXPECT_NE(src.find("kLayout = grape::math::layout_kind::" + lay + ";"), std::string::npos);
  }
}

// The element math is the library's header text, not a copy typed again: every header, less its
// #pragma once and #include lines, appears verbatim in the generated file, and the build-time
// embedding holds the current source.
TEST_F(GenCpp, EmbedsTheLibrarysOwnMathHeaders) {
  const std::string& src = cpp_library().sources.begin()->second;
  ASSERT_EQ(grape::gen::embedded_math_headers().size(), 4u);
  for (const auto& h : grape::gen::embedded_math_headers()) {
    SCOPED_TRACE(h.path);
    const std::string on_disk = slurp(fs::path(GRAPE_SOURCE_DIR) / "include" / h.path);
    EXPECT_EQ(on_disk, h.text) << "rebuild: the embedded copy is stale";
    std::istringstream in(on_disk);
    std::string line, stripped;
    while (std::getline(in, line))
      if (line.rfind("#pragma once", 0) != 0 && line.rfind("#include", 0) != 0) stripped += line + "\n";
    EXPECT_NE(src.find(stripped), std::string::npos);
  }
  EXPECT_EQ(src.find("#include \"grape/"), std::string::npos);
  EXPECT_EQ(src.find("#pragma once"), std::string::npos);
}

TEST_F(GenCpp, BadArgumentsReturnNonZeroAndWriteNothing) {
  const auto& m = rotary_models().front();
  const rope_fn fn = entry(cpp_library(), m);
  ASSERT_NE(fn, nullptr);
  const int d = m.spec.head_dim;
  std::vector<float> q(static_cast<std::size_t>(4 * 2 * d), 0.5f), k(q);
  const auto q0 = q;
  std::vector<std::int64_t> pos = {0, 5, 9, 100};
  // [tokens, heads, d]: token stride 2d, head stride d.
  EXPECT_EQ(fn(q.data(), k.data(), pos.data(), 4, 2, 2, 2 * d, d, 2 * d, d, 0), 0);
  q = q0, k = q0;
  EXPECT_EQ(fn(nullptr, k.data(), pos.data(), 4, 2, 2, 2 * d, d, 2 * d, d, 0), 1);
  EXPECT_EQ(fn(q.data(), nullptr, pos.data(), 4, 2, 2, 2 * d, d, 2 * d, d, 0), 1);
  EXPECT_EQ(fn(q.data(), k.data(), nullptr, 4, 2, 2, 2 * d, d, 2 * d, d, 0), 1);
  EXPECT_EQ(fn(q.data(), k.data(), pos.data(), -1, 2, 2, 2 * d, d, 2 * d, d, 0), 2);
  EXPECT_EQ(fn(q.data(), k.data(), pos.data(), 4, 2, 2, 2 * d, -d, 2 * d, d, 0), 2);
  EXPECT_EQ(fn(q.data(), k.data(), pos.data(), 4, 2, 2, d, d, 2 * d, d, 0), 2);       // rows overlap
  EXPECT_EQ(fn(q.data(), k.data(), pos.data(), 4, 2, 2, 2 * d, d - 1, 2 * d, d, 0), 2);
  EXPECT_EQ(fn(q.data(), k.data(), pos.data(), 4, 2, 2, 2 * d, d, 2 * d, d, 7), 3);
  pos[2] = -1;
  EXPECT_EQ(fn(q.data(), k.data(), pos.data(), 4, 2, 2, 2 * d, d, 2 * d, d, 0), 4);
  EXPECT_EQ(q, q0);
  EXPECT_EQ(k, q0);
  // Nothing to do is fine, with or without pointers; K alone (q_heads 0, q null) works.
  EXPECT_EQ(fn(nullptr, nullptr, nullptr, 0, 2, 2, 2 * d, d, 2 * d, d, 0), 0);
  pos[2] = 9;
  EXPECT_EQ(fn(nullptr, k.data(), pos.data(), 4, 0, 2, 0, 0, 2 * d, d, 0), 0);
  EXPECT_NE(k, q0);
  EXPECT_EQ(fn(q.data(), nullptr, pos.data(), 4, 2, 0, 2 * d, d, 0, 0, 0), 0);
  EXPECT_EQ(q, k);  // the same rotation of the same input
}

// The OpenMP path (-fopenmp) gives the same bits as the serial one.
TEST_F(GenCpp, OpenMpBuildAgreesWithTheSerialBuild) {
  const auto& m = rotary_models().back();
  const fs::path src = work_dir() / (m.name + ".cpp");
  built_library lib;
  build_and_load(lib, " " + quote(src.string()), work_dir() / "generated_rope_omp.so", "-fopenmp");
  ASSERT_NE(lib.handle, nullptr) << lib.error;
  const auto omp = entry(lib, m);
  ASSERT_NE(omp, nullptr);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const qk_layout l = make_qk_layout(m.spec.head_dim, 257, 4, 2);
  std::vector<float> q(static_cast<std::size_t>(l.q_size)), k(static_cast<std::size_t>(l.k_size));
  for (auto& x : q) x = unit(rng);
  for (auto& x : k) x = unit(rng);
  const auto pos = test_positions(l.tokens, rng);
  auto q2 = q, k2 = k;
  ASSERT_EQ(omp(q.data(), k.data(), pos.data(), l.tokens, 4, 2, l.q_ts, l.q_hs, l.k_ts, l.k_hs, 0), 0);
  ASSERT_EQ(entry(cpp_library(), m)(q2.data(), k2.data(), pos.data(), l.tokens, 4, 2, l.q_ts, l.q_hs,
                                    l.k_ts, l.k_hs, 0),
            0);
  EXPECT_EQ(q, q2);
  EXPECT_EQ(k, k2);
  dlclose(lib.handle);
}

// ---- CLI errors ------------------------------------------------------------------------------

bool dir_has_entries_starting(const fs::path& dir, const std::string& prefix) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

TEST(GenCli, NonRotaryConfigsAreOneLineErrorsWithNoFile) {
  for (const char* model : {"bloom", "mpt-7b", "t5-small"}) {
    SCOPED_TRACE(model);
    const fs::path cfg = fs::path(GRAPE_SOURCE_DIR) / "examples/configs" / model / "config.json";
    ASSERT_TRUE(fs::exists(cfg));
    const fs::path out = work_dir() / (std::string("nonrotary_") + model + ".cpp");
    const auto r = run_grape("gen --config " + quote(cfg.string()) + " --target cpp --out " + quote(out.string()));
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("has no rotary encoding"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(dir_has_entries_starting(work_dir(), out.filename().string()));
  }
}

TEST(GenCli, UnknownTargetIsAOneLineErrorWithNoFile) {
  const fs::path cfg = fs::path(GRAPE_SOURCE_DIR) / "examples/configs/llama-2-7b/config.json";
  const fs::path out = work_dir() / "unknown_target.cpp";
  const auto r = run_grape("gen --config " + quote(cfg.string()) + " --target rust --out " + quote(out.string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--target"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(GenCli, MissingConfigAndUnwritableOutputAreOneLineErrors) {
  const fs::path out = work_dir() / "missing_config.cpp";
  auto r = run_grape("gen --config " + quote((work_dir() / "no_such_config.json").string()) +
                     " --target cpp --out " + quote(out.string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
  const fs::path cfg = fs::path(GRAPE_SOURCE_DIR) / "examples/configs/llama-2-7b/config.json";
  r = run_grape("gen --config " + quote(cfg.string()) + " --target cuda --out " +
                quote((work_dir() / "no_such_dir/out.cu").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
}

TEST(GenCli, NameOptionAndSuccessMessage) {
  const fs::path cfg = fs::path(GRAPE_SOURCE_DIR) / "examples/configs/llama-2-7b/config.json";
  const fs::path out = work_dir() / "named.cu";
  const auto r = run_grape("gen --config " + quote(cfg.string()) + " --target cuda --name My-Model.v2 --out " +
                           quote(out.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("grape_my_model_v2_rope_cuda"), std::string::npos) << r.out;
  EXPECT_NE(slurp(out).find("extern \"C\" int grape_my_model_v2_rope_cuda("), std::string::npos);
}

// --seq-len reaches the schedule: LongRoPE below its original context uses the short factors.
TEST(GenCli, SeqLenSelectsTheScheduleTable) {
  const fs::path cfg = fs::path(GRAPE_SOURCE_DIR) / "examples/configs/synthetic-longrope/config.json";
  const auto m = grape::model::load_model_config(cfg.string());
  const auto& s = m.rotary.schedule;
  ASSERT_GT(s.original_max_position_embeddings, 100);
  const fs::path out = work_dir() / "longrope_short.cpp";
  const auto r = run_grape("gen --config " + quote(cfg.string()) + " --target cpp --seq-len 100 --out " + quote(out.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto table = grape::evaluate(s, 100, grape::frequency_precision::float32_reference);
  const auto spec = grape::make_rotary_spec(table, m.rotary.head_dim, m.rotary.rotary_dim, m.rotary.layout);
  const auto baked = baked_fractions(slurp(out));
  ASSERT_EQ(baked.size(), spec.inv_freq.size());
  for (std::size_t i = 0; i < baked.size(); ++i)
    EXPECT_EQ(baked[i], grape::math::turn_fraction_of(spec.inv_freq[i])) << "plane " << i;
  EXPECT_NE(baked, baked_fractions(cpp_library().sources.at("synthetic-longrope")));
}

TEST(GenNames, FromPaths) {
  EXPECT_EQ(grape::gen::model_name_from_path("examples/configs/llama-3.1-8b/config.json"), "llama_3_1_8b");
  EXPECT_EQ(grape::gen::model_name_from_path("config.json"), "config");
  EXPECT_EQ(grape::gen::model_name_from_path("/x/Mistral-7B.json"), "mistral_7b");
  EXPECT_THROW(grape::gen::sanitize_name("--"), grape::input_error);
  EXPECT_THROW(grape::gen::parse_target("cuda12"), grape::input_error);
}

TEST(GenSpec, MultiAxisAndBadSpecsAreRejected) {
  grape::gen::kernel_description k;
  k.name = "x";
  k.spec.head_dim = 8;
  k.spec.rotary_dim = 8;
  k.spec.inv_freq = {1, 0.1, 0.01, 0.001};
  EXPECT_NO_THROW((void)grape::gen::generate_source(k, grape::gen::target::cpp));
  auto bad = k;
  bad.spec.num_axes = 3;
  bad.spec.plane_axis = {0, 1, 2, 0};
  EXPECT_THROW((void)grape::gen::generate_source(bad, grape::gen::target::cuda), grape::input_error);
  bad = k;
  bad.spec.rotary_dim = 10;
  EXPECT_THROW((void)grape::gen::generate_source(bad, grape::gen::target::cpp), grape::input_error);
  bad = k;
  bad.spec.inv_freq.pop_back();
  EXPECT_THROW((void)grape::gen::generate_source(bad, grape::gen::target::cpp), grape::input_error);
}

// ---- CUDA ------------------------------------------------------------------------------------

// Every bundled rotary model's CUDA source: one compiled on its own (it is self-contained), then
// all of them in one translation unit (one nvcc front-end pass instead of one per model; their
// namespaces keep them apart). f32, bf16 and f16 kernels for every arch.
TEST(GenCuda, CompilesForEveryArchWithNoSpillsAndNoStackFrame) {
  const std::string nvcc = nvcc_path();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc (GRAPE_NVCC undefined and GRAPE_GEN_NVCC unset)";
  const auto archs = cuda_archs();
  ASSERT_FALSE(archs.empty());
  const int per_model = 3 * static_cast<int>(archs.size());
  std::string all;
  fs::path first;
  for (const auto& m : rotary_models()) {
    SCOPED_TRACE(m.dir);
    const fs::path cu = work_dir() / (m.name + ".cu");
    const auto g = run_grape("gen --config " + quote(m.config.string()) + " --target cuda --out " + quote(cu.string()));
    ASSERT_EQ(g.code, 0) << g.err;
    EXPECT_NE(slurp(cu).find("extern \"C\" int grape_" + m.name + "_rope_cuda("), std::string::npos);
    all += "#include \"" + cu.filename().string() + "\"\n";
    if (first.empty()) first = cu;
  }
  ASSERT_FALSE(first.empty());
  check_ptxas(nvcc, archs, first, per_model);
  const fs::path combined = work_dir() / "all_models.cu";
  std::ofstream(combined) << all;
  check_ptxas(nvcc, archs, combined, per_model * static_cast<int>(rotary_models().size()));
}

}  // namespace
