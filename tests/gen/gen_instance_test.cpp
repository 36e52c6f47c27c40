// grape gen --encoding: a built-in encoding's instance baked into one source file. For xPos,
// GRAPE-M, STRING, LiERE 2-D, M-RoPE, axial 2-D and RoPE the CLI writes the C++ source, g++ builds
// it into a shared library, and the loaded entry point must agree with
// grape::cpu::rotate_qk(E::make(E::default_params()), args) on the same input (f32, bf16, f16;
// positions [rank, tokens]). Instances beyond the defaults (pass-through channels, Q and K in
// different layouts, an attention factor) go through the C++ API. The baked arrays must be the
// instance's, bit for bit, and the baked bytes must rebuild its view; RoPE's file must be the one
// its config gives. With nvcc, the CUDA sources compile for every arch with no spill and no stack
// frame. Bad input: one-line errors, exit 2, no file.
#include <boost/hana/for_each.hpp>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "gen/instance_gen.hpp"
#include "gen_support.hpp"
#include "grape/builtins.hpp"

namespace {

using namespace grape_gen_test;
using grape::layout_kind;

using encode_fn = int (*)(void*, void*, const std::int64_t*, std::int64_t, std::int64_t, std::int64_t,
                          std::int64_t, std::int64_t, std::int64_t, std::int64_t, int);

const std::vector<std::string> baked_encodings = {"xpos",  "grape_m",  "string_rope", "liere_2d",
                                                  "mrope", "axial_2d", "rope",        "rope_interleaved"};

// Sources (stem -> text) written to the scratch folder and built into one shared library.
built_library build_library(std::map<std::string, std::string> sources, const std::string& so_name) {
  built_library lib;
  std::string files;
  for (const auto& [stem, text] : sources) {
    const fs::path p = work_dir() / (stem + ".cpp");
    std::ofstream(p) << text;
    files += " " + quote(p.string());
  }
  lib.sources = std::move(sources);
  build_and_load(lib, files, work_dir() / so_name);
  return lib;
}

// Every encoding of baked_encodings through the CLI, once.
const built_library& cli_library() {
  static const built_library lib = [] {
    std::map<std::string, std::string> sources;
    for (const auto& e : baked_encodings) {
      const fs::path out = work_dir() / ("enc_" + e + ".cpp");
      const auto r = run_grape("gen --encoding " + e + " --target cpp --out " + quote(out.string()));
      if (r.code != 0) {
        built_library bad;
        bad.error = "grape gen --encoding " + e + " failed: " + r.err;
        return bad;
      }
      sources["enc_" + e] = slurp(out);
    }
    return build_library(std::move(sources), "generated_encodings.so");
  }();
  return lib;
}

encode_fn entry(const built_library& lib, const std::string& name) {
  return reinterpret_cast<encode_fn>(dlsym(lib.handle, name.c_str()));
}

// ---- running one instance both ways ------------------------------------------------------------

// [rank, tokens]: 0, 1 and limit - 1 on every axis, then random below limit.
std::vector<std::int64_t> make_positions(int rank, std::int64_t tokens, std::int64_t limit, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> any(0, limit - 1);
  std::vector<std::int64_t> p(static_cast<std::size_t>(rank * tokens));
  for (int a = 0; a < rank; ++a)
    for (std::int64_t t = 0; t < tokens; ++t)
      p[static_cast<std::size_t>(a * tokens + t)] = t == 0 ? 0 : t == 1 ? 1 : t == 2 ? limit - 1 : any(rng);
  return p;
}

// The largest difference of got from want, in units of tol·max(1, |want|) for f32 and in ulps
// for 16-bit storage (where x0·c − x1·s cancels, the float32 bound 1e-5·max(1, |want|) applies:
// the library is built with -march=native and may contract to FMA, the generated file here not).
template <class Instance>
double worst_error(const Instance& inst, encode_fn fn, int rank, std::int64_t limit, grape::cpu::dtype type,
                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  const qk_layout s = make_qk_layout(inst.head_dim, 11, 4, 2);
  const auto pos = make_positions(rank, s.tokens, limit, rng);
  const int code = type == grape::cpu::dtype::f32 ? 0 : type == grape::cpu::dtype::bf16 ? 1 : 2;
  std::vector<float> qf(static_cast<std::size_t>(s.q_size)), kf(static_cast<std::size_t>(s.k_size));
  for (auto& x : qf) x = unit(rng);
  for (auto& x : kf) x = unit(rng);
  std::vector<std::uint16_t> q16(qf.size()), k16(kf.size());
  auto narrow = code == 1 ? to_bf16 : to_f16;
  auto widen = code == 1 ? from_bf16 : from_f16;
  for (std::size_t i = 0; i < qf.size(); ++i) q16[i] = narrow(qf[i]);
  for (std::size_t i = 0; i < kf.size(); ++i) k16[i] = narrow(kf[i]);
  void* q = code == 0 ? static_cast<void*>(qf.data()) : q16.data();
  void* k = code == 0 ? static_cast<void*>(kf.data()) : k16.data();
  auto qf_ref = qf, kf_ref = kf;
  auto q16_ref = q16, k16_ref = k16;
  grape::cpu::rotate_qk_args a;
  a.type = type;
  void* qr = code == 0 ? static_cast<void*>(qf_ref.data()) : q16_ref.data();
  void* kr = code == 0 ? static_cast<void*>(kf_ref.data()) : k16_ref.data();
  a.q = {qr, qr, s.q_heads, s.q_size, 0, s.q_ts, s.q_hs};
  a.k = {kr, kr, s.k_heads, s.k_size, 0, s.k_ts, s.k_hs};
  a.seq_len = s.tokens;
  a.position_ids = pos.data();
  a.position_type = grape::cpu::index_type::i64;
  a.threads = 1;
  grape::cpu::rotate_qk(inst, a);
  if (fn(q, k, pos.data(), s.tokens, s.q_heads, s.k_heads, s.q_ts, s.q_hs, s.k_ts, s.k_hs, code) != 0) return 1e30;
  double worst = 0;
  if (code == 0) {
    for (std::size_t i = 0; i < qf.size(); ++i)
      worst = std::max(worst, std::fabs(qf[i] - qf_ref[i]) / std::max(1.0, double(std::fabs(qf_ref[i]))));
    for (std::size_t i = 0; i < kf.size(); ++i)
      worst = std::max(worst, std::fabs(kf[i] - kf_ref[i]) / std::max(1.0, double(std::fabs(kf_ref[i]))));
    return worst;
  }
  auto ulps = [&](const std::vector<std::uint16_t>& got, const std::vector<std::uint16_t>& want) {
    for (std::size_t i = 0; i < got.size(); ++i) {
      double u = std::abs(ordered16(got[i]) - ordered16(want[i]));
      const double w = widen(want[i]);
      if (u > 1 && std::fabs(widen(got[i]) - w) <= 1e-5 * std::max(1.0, std::fabs(w))) u = 1;
      worst = std::max(worst, u);
    }
  };
  ulps(q16, q16_ref);
  ulps(k16, k16_ref);
  return worst;
}

template <class Instance>
void expect_agreement(const Instance& inst, encode_fn fn, int rank, std::int64_t limit) {
  ASSERT_NE(fn, nullptr);
  EXPECT_LE(worst_error(inst, fn, rank, limit, grape::cpu::dtype::f32, 1), 1e-6) << "f32";
  EXPECT_LE(worst_error(inst, fn, rank, limit, grape::cpu::dtype::bf16, 2), 1.0) << "bf16 (ulps)";
  EXPECT_LE(worst_error(inst, fn, rank, limit, grape::cpu::dtype::f16, 3), 1.0) << "f16 (ulps)";
}

// Calls f with the built-in encoding type named `name`.
template <class F>
void with_encoding(const std::string& name, F&& f) {
  bool found = false;
  boost::hana::for_each(grape::builtin_encodings, [&](auto t) {
    using E = typename decltype(t)::type;
    if constexpr (grape::gen::bakeable_instance<typename E::instance>())
      if (E::name == name) found = true, f(t);
  });
  ASSERT_TRUE(found) << name;
}

template <class E>
std::int64_t position_limit() {
  return std::min<std::int64_t>(E::position_limit, std::int64_t{1} << 20);
}

TEST(GenEncoding, EveryBakedEncodingMatchesTheCpuKernel) {
  const built_library& lib = cli_library();
  ASSERT_NE(lib.handle, nullptr) << lib.error;
  for (const auto& name : baked_encodings) {
    SCOPED_TRACE(name);
    with_encoding(name, [&](auto t) {
      using E = typename decltype(t)::type;
      const auto inst = E::make(E::default_params());
      const bool spec = name == "rope" || name == "rope_interleaved";
      const std::string fn = spec ? grape::gen::entry_point_name(name, grape::gen::target::cpp)
                                  : grape::gen::view_entry_point_name(name, grape::gen::target::cpp);
      expect_agreement(inst, entry(lib, fn), E::group::rank, position_limit<E>());
    });
  }
}

// ---- the C++ API: instances beyond the defaults ----------------------------------------------

TEST(GenEncoding, PassThroughChannelsMixedLayoutsAndAttentionFactor) {
  using namespace grape;
  auto xp = xpos::make(xpos::default_params());
  xp.head_dim += 6;  // channels 64 .. 69 pass through
  xp.attention_factor = 1.25;
  const rotate_instance<rank2_rotation, layout_kind::half_split, layout_kind::interleaved> m{
      grape_m::make(grape_m::default_params()).rep, 68, 0.875};
  const rotate_instance<rotation_planes<2>, layout_kind::interleaved, layout_kind::half_split> ax{
      axial_2d::make(axial_2d::default_params()).rep, 64, 1.0};
  const auto cpp = gen::target::cpp;
  std::map<std::string, std::string> sources = {
      {"api_xpos", gen::generate_instance_source(xp, "api_xpos", {}, cpp).source},
      {"api_m", gen::generate_instance_source(m, "api_m", {}, cpp).source},
      {"api_axial", gen::generate_instance_source(ax, "api_axial", {}, cpp).source},
  };
  const built_library lib = build_library(std::move(sources), "generated_api.so");
  ASSERT_NE(lib.handle, nullptr) << lib.error;
  {
    SCOPED_TRACE("xpos, 6 pass-through channels, attention factor 1.25");
    expect_agreement(xp, entry(lib, "grape_api_xpos_encode"), 1, xpos::position_limit);
  }
  {
    SCOPED_TRACE("grape_m, Q half_split, K interleaved, 4 pass-through channels");
    expect_agreement(m, entry(lib, "grape_api_m_encode"), 1, std::int64_t{1} << 20);
  }
  {
    SCOPED_TRACE("axial_2d, Q interleaved, K half_split");
    expect_agreement(ax, entry(lib, "grape_api_axial_encode"), 2, std::int64_t{1} << 20);
  }
}

// ---- what is baked -------------------------------------------------------------------------

struct parsed_array {
  std::string type;
  std::vector<unsigned char> bytes;
};

template <class T>
void append(std::vector<unsigned char>& out, T v) {
  const auto* b = reinterpret_cast<const unsigned char*>(&v);
  out.insert(out.end(), b, b + sizeof v);
}

// The text between `{` and `};` after `from` (found by search: std::regex over a 100 KB body
// recurses once per character in libstdc++ and overflows the stack under ASan).
std::string braced_after(const std::string& src, std::size_t from) {
  const std::size_t open = src.find('{', from), close = src.find("};", from);
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  return src.substr(open + 1, close - open - 1);
}

// kArray<n> of a generated file, each literal read back into the bytes of its type.
std::vector<parsed_array> parse_arrays(const std::string& src) {
  const std::regex head(R"(static const ([a-z:0-9_]+) kArray(\d+)\[(\d+)\] = )");  // one short line
  std::vector<parsed_array> out;
  for (std::size_t at = src.find("static const "); at != std::string::npos; at = src.find("static const ", at + 1)) {
    const std::string line = src.substr(at, src.find('\n', at) - at);
    std::smatch m;
    if (!std::regex_search(line, m, head) || m.position(0) != 0) continue;
    parsed_array a;
    a.type = m[1].str();
    EXPECT_EQ(std::stoul(m[2].str()), out.size());
    std::stringstream items(braced_after(src, at));
    std::size_t count = 0;
    for (std::string item; std::getline(items, item, ',');) {
      item.erase(std::remove_if(item.begin(), item.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
                 item.end());
      if (item.empty()) continue;
      ++count;
      if (a.type == "float") append(a.bytes, std::strtof(item.c_str(), nullptr));
      else if (a.type == "double") append(a.bytes, std::strtod(item.c_str(), nullptr));
      else if (a.type == "int") append(a.bytes, static_cast<int>(std::stol(item)));
      else if (a.type == "std::int64_t") append(a.bytes, static_cast<std::int64_t>(std::stoll(item)));
      else if (a.type == "std::uint64_t") append(a.bytes, static_cast<std::uint64_t>(std::stoull(item, nullptr, 16)));
      else ADD_FAILURE() << "type " << a.type;
    }
    EXPECT_EQ(count, std::stoul(m[3].str()));
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<unsigned char> parse_view_bytes(const std::string& src) {
  std::vector<unsigned char> out;
  const std::size_t at = src.find("kViewBytes[sizeof(View)] = ");
  if (at == std::string::npos) return out;
  std::stringstream items(braced_after(src, at));
  for (std::string item; std::getline(items, item, ',');)
    if (item.find("0x") != std::string::npos) out.push_back(static_cast<unsigned char>(std::stoul(item, nullptr, 16)));
  return out;
}

TEST(GenEncoding, BakedArraysAreTheInstancesBitForBitAndTheBytesRebuildItsView) {
  const built_library& lib = cli_library();
  ASSERT_FALSE(lib.sources.empty()) << lib.error;
  for (const auto& name : {"xpos", "grape_m", "string_rope", "liere_2d", "mrope", "axial_2d"}) {
    SCOPED_TRACE(name);
    with_encoding(name, [&](auto t) {
      using E = typename decltype(t)::type;
      const auto inst = E::make(E::default_params());
      const std::string& src = lib.sources.at(std::string("enc_") + name);
      auto view = inst.rep.view();
      using V = decltype(view);
      // The instance's arrays, in relocate's order.
      std::vector<std::vector<unsigned char>> want;
      std::vector<const void*> pointers;
      view.relocate([&]<class T>(const T*& p, std::int64_t n) {
        const auto* b = reinterpret_cast<const unsigned char*>(p);
        want.emplace_back(b, b + n * static_cast<std::int64_t>(sizeof(T)));
        pointers.push_back(p);
      });
      const auto got = parse_arrays(src);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i].bytes == want[i]) << "array " << i;
      // The baked bytes, pointed at the instance's arrays, act as the instance's view.
      const auto bytes = parse_view_bytes(src);
      ASSERT_EQ(bytes.size(), sizeof(V));
      V rebuilt;
      std::memcpy(static_cast<void*>(&rebuilt), bytes.data(), sizeof(V));
      std::size_t next = 0;
      rebuilt.relocate([&]<class T>(const T*& p, std::int64_t) { p = static_cast<const T*>(pointers[next++]); });
      EXPECT_EQ(rebuilt.dim(), view.dim());
      std::mt19937_64 rng(5);
      std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
      std::vector<float> x(static_cast<std::size_t>(view.dim())), y1(x.size()), y2(x.size());
      for (auto& v : x) v = unit(rng);
      std::int64_t c[V::rank];
      for (int a = 0; a < V::rank; ++a) c[a] = 37 + a;
      for (bool key : {false, true}) {
        grape::apply_view(view, c, key, x.data(), y1.data());
        grape::apply_view(rebuilt, c, key, x.data(), y2.data());
        EXPECT_EQ(y1, y2) << "key " << key;
      }
      // The same instance gives the same file.
      EXPECT_EQ(grape::gen::generate_instance_source(inst, "again", {}, grape::gen::target::cpp).source,
                grape::gen::generate_instance_source(inst, "again", {}, grape::gen::target::cpp).source);
    });
  }
}

// RoPE's instance is a rotary_spec: its file is llama-2-7b's (head_dim 128, base 10000) but for
// the header lines — frequencies included: the built-in type and the config's schedule in float64
// share one θ table (rope_inv_freq), bit for bit.
TEST(GenEncoding, RopeInstanceTakesTheRotarySpecTemplate) {
  const built_library& lib = cli_library();
  ASSERT_FALSE(lib.sources.empty()) << lib.error;
  const fs::path cfg = fs::path(GRAPE_SOURCE_DIR) / "examples/configs/llama-2-7b/config.json";
  const fs::path out = work_dir() / "llama_for_rope.cpp";
  const auto r = run_grape("gen --config " + quote(cfg.string()) + " --name rope --precision float64 --target cpp --out " +
                           quote(out.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::regex fraction(R"(0x([0-9a-f]{16})ull,  //\s*(\d+): theta [^\n]*\n)");
  auto body = [&](const std::string& s) { return s.substr(s.find("// Baked in:")); };
  const std::string& src = lib.sources.at("enc_rope");
  EXPECT_EQ(body(src), body(slurp(out)));
  EXPECT_NE(src.find("extern \"C\" int grape_rope_rope("), std::string::npos);
  const auto spec = grape::kernel_traits<grape::rotation_planes<1>>::plane_spec(grape::rope::make(grape::rope::default_params()));
  ASSERT_TRUE(spec);
  std::size_t plane = 0;
  for (auto it = std::sregex_iterator(src.begin(), src.end(), fraction); it != std::sregex_iterator(); ++it, ++plane) {
    ASSERT_LT(plane, spec->inv_freq.size());
    EXPECT_EQ(std::stoull((*it)[1].str(), nullptr, 16), grape::math::turn_fraction_of(spec->inv_freq[plane]));
  }
  EXPECT_EQ(plane, spec->inv_freq.size());
}

// ---- CLI errors ------------------------------------------------------------------------------

TEST(GenEncodingCli, EncodingsThatCannotBeBakedAreOneLineErrorsWithNoFile) {
  for (const char* name : {"alibi", "t5_buckets", "fox", "sinusoidal", "learned_absolute", "grape_a", "rope_alibi",
                           "grape_a_key_gated", "grape_ap_relative", "no_such_encoding"}) {
    SCOPED_TRACE(name);
    const fs::path out = work_dir() / (std::string("unbaked_") + name + ".cpp");
    const auto r = run_grape(std::string("gen --encoding ") + name + " --target cpp --out " + quote(out.string()));
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--encoding " + std::string(name)), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST(GenEncodingCli, ExactlyOneOfConfigAndEncoding) {
  const fs::path cfg = fs::path(GRAPE_SOURCE_DIR) / "examples/configs/llama-2-7b/config.json";
  const fs::path out = work_dir() / "both.cpp";
  for (const std::string& args :
       {"--encoding xpos --config " + quote(cfg.string()), std::string(), std::string("--encoding xpos --seq-len 100")}) {
    SCOPED_TRACE(args);
    const auto r = run_grape("gen " + args + " --target cpp --out " + quote(out.string()));
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// ---- CUDA ------------------------------------------------------------------------------------

// Every baked encoding's CUDA source in one translation unit: f32, bf16 and f16 kernels per arch.
TEST(GenEncodingCuda, CompilesForEveryArchWithNoSpillsAndNoStackFrame) {
  const std::string nvcc = nvcc_path();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc (GRAPE_NVCC undefined and GRAPE_GEN_NVCC unset)";
  const auto archs = cuda_archs();
  std::string all;
  for (const auto& e : baked_encodings) {
    const fs::path cu = work_dir() / ("enc_" + e + ".cu");
    const auto g = run_grape("gen --encoding " + e + " --target cuda --out " + quote(cu.string()));
    ASSERT_EQ(g.code, 0) << g.err;
    all += "#include \"" + cu.filename().string() + "\"\n";
  }
  const fs::path combined = work_dir() / "all_encodings.cu";
  std::ofstream(combined) << all;
  check_ptxas(nvcc, archs, combined, 3 * static_cast<int>(archs.size() * baked_encodings.size()));
}

}  // namespace
