// grape detect on the fault matrix: for every bundled rotary config and for random schedules of
// every kind, Q is rotated by grape's CPU kernel under one deliberate fault at a time, and detect
// must name exactly that fault (and nothing on the faithful output). A textbook float64
// implementation written here from the formulas (not grape's kernel) provides the float32-angle
// fault and a second faithful source, so detection does not lean on grape's own rounding.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include <Eigen/Core>

#include "cpu/rotate_qk.hpp"
#include "detect/detect.hpp"
#include "model/model_config.hpp"

namespace {

using namespace grape;
namespace fs = std::filesystem;

constexpr std::int64_t tokens = 40, heads = 2;

enum class fault { none, layout, base, scaling_dropped, offset_one, offset_random, attention_factor,
                   float32_angles, permutation, textbook };

const char* name(fault f) {
  switch (f) {
    case fault::none: return "none";
    case fault::layout: return "layout";
    case fault::base: return "base";
    case fault::scaling_dropped: return "scaling_dropped";
    case fault::offset_one: return "offset_one";
    case fault::offset_random: return "offset_random";
    case fault::attention_factor: return "attention_factor";
    case fault::float32_angles: return "float32_angles";
    case fault::permutation: return "permutation";
    case fault::textbook: return "textbook";
  }
  return "?";
}

// The fields detect must name for a fault (empty: none).
std::set<std::string> expected_fields(fault f) {
  switch (f) {
    case fault::none: case fault::textbook: return {};
    case fault::layout: case fault::permutation: return {"layout"};
    case fault::base: return {"theta"};
    case fault::scaling_dropped: return {"scaling"};
    case fault::offset_one: case fault::offset_random: return {"positions"};
    case fault::attention_factor: return {"attention_factor"};
    case fault::float32_angles: return {"precision"};
  }
  return {};
}

std::vector<std::int64_t> test_positions(std::mt19937_64& rng) {
  std::vector<std::int64_t> p;
  for (std::int64_t t = 0; t < 12; ++t) p.push_back(t);  // small differences first: no wrap in θ's first guess
  std::uniform_int_distribution<std::int64_t> far(12, 8191);
  while (static_cast<std::int64_t>(p.size()) < tokens) p.push_back(far(rng));
  std::sort(p.begin(), p.end());
  return p;
}

std::vector<float> test_input(std::mt19937_64& rng, int head_dim) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(tokens * heads * head_dim));
  for (auto& v : x) v = n(rng);
  return x;
}

// Textbook RoPE in float64 from rope-scaling.md: plane i = (i, i + d/2) or (2i, 2i + 1),
// out = af·[x_a cos − x_b sin, x_b cos + x_a sin]; the angle m·θ_i exact, or as float32 m times
// float32 θ_i (the reference's precision). Stored as float32.
std::vector<float> textbook(const std::vector<float>& x, int head_dim, int rotary_dim, bool interleaved,
                            const std::vector<double>& theta, double af, const std::vector<std::int64_t>& pos,
                            bool float32_angles) {
  std::vector<float> y(x);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t row = static_cast<std::size_t>((t * heads + h) * head_dim);
      for (int i = 0; i < rotary_dim / 2; ++i) {
        const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + rotary_dim / 2;
        const double angle = float32_angles ? static_cast<double>(static_cast<float>(pos[t]) * static_cast<float>(theta[i]))
                                            : static_cast<double>(pos[t]) * theta[i];
        const double xa = x[row + a], xb = x[row + b];
        y[row + a] = static_cast<float>(af * (xa * std::cos(angle) - xb * std::sin(angle)));
        y[row + b] = static_cast<float>(af * (xb * std::cos(angle) + xa * std::sin(angle)));
      }
    }
  return y;
}

detect::tensor3 widen(const std::vector<float>& v, int head_dim) {
  return {tokens, heads, head_dim, std::vector<double>(v.begin(), v.end())};
}

struct outcome {
  std::set<std::string> fields;
  std::string text;  // every finding, for the failure message
  bool found = false;
};

outcome detect_and_compare(const detect::detect_input& in, const detect::expected_encoding& e) {
  const detect::detection d = detect::detect(in);
  outcome o;
  o.found = d.found;
  o.text = detect::report_text(d);
  for (const auto& finding : detect::compare(d, in, e)) {
    o.fields.insert(finding.field);
    o.text += "  finding: " + finding.text + "\n";
  }
  return o;
}

// Rotates with one fault applied and compares the detection with the expected encoding.
outcome run_fault(const detect::expected_encoding& e, fault f, std::mt19937_64& rng) {
  const std::vector<std::int64_t> pos = test_positions(rng);
  const std::vector<float> x = test_input(rng, e.head_dim);
  const std::int64_t seq_len = pos.back() + 1;
  rope_schedule s = e.schedule;
  layout_kind layout = e.layout;
  std::vector<std::int64_t> applied = pos;
  if (f == fault::layout)
    layout = layout == layout_kind::half_split ? layout_kind::interleaved : layout_kind::half_split;
  if (f == fault::base) s.base *= std::uniform_real_distribution<double>(1.5, 4.0)(rng);
  if (f == fault::scaling_dropped) {
    rope_schedule plain;
    plain.base = s.base;
    plain.rotary_dim = s.rotary_dim;
    s = plain;
  }
  if (f == fault::offset_one || f == fault::offset_random) {
    const std::int64_t k = f == fault::offset_one ? 1 : std::uniform_int_distribution<std::int64_t>(2, 500)(rng);
    for (auto& p : applied) p += k;
  }
  const schedule_table table = evaluate(s, seq_len);
  rotary_spec spec = make_rotary_spec(table, e.head_dim, e.rotary_dim, layout);
  if (f == fault::attention_factor)
    spec.attention_factor = spec.attention_factor == 1.0 ? 1.25 : spec.attention_factor * spec.attention_factor;

  std::vector<float> y(x.size());
  if (f == fault::float32_angles || f == fault::textbook) {
    y = textbook(x, e.head_dim, e.rotary_dim, layout == layout_kind::interleaved, table.inv_freq, table.attention_factor,
                 pos, f == fault::float32_angles);
  } else if (f == fault::permutation) {
    // The engine pairs channels through a fixed permutation of the rotary channels.
    std::vector<int> perm(static_cast<std::size_t>(e.rotary_dim));
    for (int c = 0; c < e.rotary_dim; ++c) perm[c] = c;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<float> xp(x), yp(x.size());
    for (std::int64_t r = 0; r < tokens * heads; ++r)
      for (int c = 0; c < e.rotary_dim; ++c) xp[r * e.head_dim + c] = x[r * e.head_dim + perm[c]];
    cpu::apply_rotary(spec, cpu::dtype::f32, xp.data(), yp.data(), tokens, heads, applied.data());
    y = yp;
    for (std::int64_t r = 0; r < tokens * heads; ++r)
      for (int c = 0; c < e.rotary_dim; ++c) y[r * e.head_dim + perm[c]] = yp[r * e.head_dim + c];
  } else {
    cpu::apply_rotary(spec, cpu::dtype::f32, x.data(), y.data(), tokens, heads, applied.data());
  }

  detect::detect_input in{widen(x, e.head_dim), widen(y, e.head_dim), pos, 0x1p-24};
  return detect_and_compare(in, e);
}

std::vector<fault> faults_for(const detect::expected_encoding& e) {
  std::vector<fault> f = {fault::none, fault::textbook, fault::base, fault::offset_one, fault::offset_random,
                          fault::attention_factor, fault::float32_angles};
  if (e.rotary_dim > 2) f.push_back(fault::layout);
  if (e.rotary_dim >= 8) f.push_back(fault::permutation);
  const schedule_table t = evaluate(e.schedule, 8192);
  if (e.schedule.type != rope_type::default_rope && t.inv_freq != rope_inv_freq(e.schedule.rotary_dim, e.schedule.base))
    f.push_back(fault::scaling_dropped);
  return f;
}

TEST(DetectFaults, EveryBundledRotaryConfigEveryFault) {
  std::mt19937_64 rng(15);
  int configs = 0;
  for (const auto& dir : fs::directory_iterator(fs::path(GRAPE_SOURCE_DIR) / "examples/configs")) {
    const model::model_description m = model::load_model_config((dir.path() / "config.json").string());
    if (m.kind != model::encoding_kind::rotary) continue;
    ++configs;
    const auto& r = m.rotary;
    const detect::expected_encoding e{r.schedule, r.layout, r.head_dim, r.rotary_dim, m.max_position_embeddings};
    for (fault f : faults_for(e)) {
      const outcome o = run_fault(e, f, rng);
      EXPECT_TRUE(o.found) << dir.path().filename() << " " << name(f) << "\n" << o.text;
      EXPECT_EQ(o.fields, expected_fields(f)) << dir.path().filename() << " fault " << name(f) << "\n" << o.text;
    }
  }
  EXPECT_GE(configs, 10);
}

// Half-precision storage: the kernel reads and writes float16 or bfloat16; detect is told the
// output's roundoff, and must still name the layout, base and offset faults and nothing else.
template <class Half>
outcome run_half(const detect::expected_encoding& e, fault f, cpu::dtype type, double roundoff, std::mt19937_64& rng) {
  const std::vector<std::int64_t> pos = test_positions(rng);
  const std::vector<float> x32 = test_input(rng, e.head_dim);
  std::vector<Half> x(x32.size()), y(x32.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = Half(x32[i]);
  rope_schedule s = e.schedule;
  if (f == fault::base) s.base *= 3;
  std::vector<std::int64_t> applied = pos;
  if (f == fault::offset_one)
    for (auto& p : applied) p += 1;
  const layout_kind layout = f != fault::layout ? e.layout
                             : e.layout == layout_kind::half_split ? layout_kind::interleaved : layout_kind::half_split;
  const rotary_spec spec = make_rotary_spec(evaluate(s, pos.back() + 1), e.head_dim, e.rotary_dim, layout);
  cpu::apply_rotary(spec, type, x.data(), y.data(), tokens, heads, applied.data());
  detect::detect_input in;
  in.before = {tokens, heads, e.head_dim, {}};
  in.after = in.before;
  for (std::size_t i = 0; i < x.size(); ++i) {
    in.before.values.push_back(static_cast<double>(static_cast<float>(x[i])));
    in.after.values.push_back(static_cast<double>(static_cast<float>(y[i])));
  }
  in.positions = pos;
  in.output_roundoff = in.input_roundoff = roundoff;
  return detect_and_compare(in, e);
}

TEST(DetectFaults, HalfPrecisionOutputs) {
  std::mt19937_64 rng(16);
  for (const char* name_ : {"llama-3.1-8b", "qwen2.5-7b-instruct-yarn", "gpt-j-6b"}) {
    const auto m = model::load_model_config((fs::path(GRAPE_SOURCE_DIR) / "examples/configs" / name_ / "config.json").string());
    const auto& r = m.rotary;
    const detect::expected_encoding e{r.schedule, r.layout, r.head_dim, r.rotary_dim, m.max_position_embeddings};
    for (fault f : {fault::none, fault::layout, fault::base, fault::offset_one}) {
      const outcome h = run_half<Eigen::half>(e, f, cpu::dtype::f16, 0x1p-11, rng);
      EXPECT_TRUE(h.found) << name_ << " f16 " << name(f) << "\n" << h.text;
      EXPECT_EQ(h.fields, expected_fields(f)) << name_ << " f16 " << name(f) << "\n" << h.text;
      const outcome b = run_half<Eigen::bfloat16>(e, f, cpu::dtype::bf16, 0x1p-8, rng);
      EXPECT_TRUE(b.found) << name_ << " bf16 " << name(f) << "\n" << b.text;
      EXPECT_EQ(b.fields, expected_fields(f)) << name_ << " bf16 " << name(f) << "\n" << b.text;
    }
  }
}

rope_schedule random_schedule(std::mt19937_64& rng) {
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  rope_schedule s;
  s.type = static_cast<rope_type>(std::uniform_int_distribution<int>(0, 6)(rng));
  s.rotary_dim = 16 * std::uniform_int_distribution<int>(1, 8)(rng);
  s.base = std::exp(uniform(std::log(1e3), std::log(2e6)));
  s.factor = uniform(2.0, 40.0);
  s.original_max_position_embeddings = std::int64_t{1024} << std::uniform_int_distribution<int>(0, 4)(rng);
  s.max_position_embeddings = s.original_max_position_embeddings;  // dynamic NTK rescales below 8192
  if (s.type == rope_type::llama3) s.high_freq_factor = 4.0;
  if (s.type == rope_type::longrope) {
    double ext = 1.0;
    for (int i = 0; i < s.rotary_dim / 2; ++i) {
      s.short_factor.push_back(ext);
      s.long_factor.push_back(ext * s.factor / 4);
      ext += uniform(0.0, 0.5);
    }
  }
  return s;
}

RC_GTEST_PROP(DetectFaults, RandomSchedulesEveryFault, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const rope_schedule s = random_schedule(rng);
  const int head_dim = s.rotary_dim + 16 * std::uniform_int_distribution<int>(0, 1)(rng);
  const detect::expected_encoding e{s, std::uniform_int_distribution<int>(0, 1)(rng) ? layout_kind::interleaved
                                                                                    : layout_kind::half_split,
                                    head_dim, s.rotary_dim, s.max_position_embeddings};
  const auto faults = faults_for(e);
  const fault f = faults[std::uniform_int_distribution<std::size_t>(0, faults.size() - 1)(rng)];
  const outcome o = run_fault(e, f, rng);
  RC_LOG() << "schedule " << to_string(s.type) << " base " << s.base << " factor " << s.factor << " d "
           << s.rotary_dim << " fault " << name(f) << "\n" << o.text;
  RC_ASSERT(o.found);
  RC_ASSERT(o.fields == expected_fields(f));
}

}  // namespace
