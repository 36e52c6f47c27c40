// The precision certificate (precision_certificate.hpp). The reference angle is m·θ in long double
// reduced modulo 2π (error about m·θ·2^-64, far below the float32 errors measured).
#include "cli/precision_certificate.hpp"

#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numbers>

#include "cpu/rotate_qk.hpp"

namespace grape::cli {

namespace {

// docs/precision.md: every float32 output element for a unit-norm pair is within 2e-6 of the exact
// rotation, for positions below 2^31. bfloat16 storage adds the output's rounding: half an ulp of
// a value in [1, 2), 2^-8 (a unit pair rounded to bfloat16 has norm up to 1 + 2^-8, so an output
// element may exceed 1).
constexpr double float32_bound = 2e-6;
constexpr double bfloat16_rounding = 0x1p-8;
constexpr std::int64_t position_limit = (std::int64_t{1} << 31) - 1;
constexpr int samples = 16;  // positions measured below each row's position

long double reduced(std::int64_t m, double theta) {
  constexpr long double two_pi = 2.0L * std::numbers::pi_v<long double>;
  return std::fmod(static_cast<long double>(m) * static_cast<long double>(theta), two_pi);
}

// Largest error of the kernel's output against the exact rotation, for unit pairs at `pos`.
template <class Storage>
double kernel_error(rotary_spec spec, cpu::dtype type, const std::vector<std::int64_t>& pos) {
  spec.attention_factor = 1.0;
  const int d = spec.rotary_dim, h = d / 2;
  const auto tokens = static_cast<std::int64_t>(pos.size());
  std::vector<Storage> x(static_cast<std::size_t>(tokens * spec.head_dim)), y(x.size());
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < h; ++i) {
      const double alpha = 0.7 * i + 1.3 * static_cast<double>(t);  // unit pairs at varied angles
      const int a = spec.layout == layout_kind::interleaved ? 2 * i : i;
      const int b = spec.layout == layout_kind::interleaved ? 2 * i + 1 : i + h;
      x[t * spec.head_dim + a] = Storage(static_cast<float>(std::cos(alpha)));
      x[t * spec.head_dim + b] = Storage(static_cast<float>(std::sin(alpha)));
    }
  cpu::apply_rotary(spec, type, x.data(), y.data(), tokens, 1, pos.data());
  double worst = 0;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < h; ++i) {
      const int a = spec.layout == layout_kind::interleaved ? 2 * i : i;
      const int b = spec.layout == layout_kind::interleaved ? 2 * i + 1 : i + h;
      const long double ang = reduced(pos[t], spec.inv_freq[i]);
      const long double xa = static_cast<float>(x[t * spec.head_dim + a]), xb = static_cast<float>(x[t * spec.head_dim + b]);
      const long double ya = xa * std::cos(ang) - xb * std::sin(ang), yb = xb * std::cos(ang) + xa * std::sin(ang);
      worst = std::max({worst, static_cast<double>(std::abs(static_cast<float>(y[t * spec.head_dim + a]) - ya)),
                        static_cast<double>(std::abs(static_cast<float>(y[t * spec.head_dim + b]) - yb))});
    }
  return worst;
}

// A textbook float32 implementation's largest cos/sin error: angle = float32(m)·float32(θ) in float32.
double textbook_error(const rotary_spec& spec, const std::vector<std::int64_t>& pos) {
  double worst = 0;
  for (auto m : pos)
    for (double theta : spec.inv_freq) {
      const float a32 = static_cast<float>(m) * static_cast<float>(theta);
      const long double exact = reduced(m, theta);
      worst = std::max({worst, static_cast<double>(std::abs(std::cos(static_cast<long double>(a32)) - std::cos(exact))),
                        static_cast<double>(std::abs(std::sin(static_cast<long double>(a32)) - std::sin(exact)))});
    }
  return worst;
}

}  // namespace

std::vector<certificate_row> precision_certificate(const rotary_spec& spec, std::int64_t context) {
  std::vector<certificate_row> rows;
  if (context <= 0 || spec.rotary_dim <= 0) return rows;
  for (std::int64_t mult : {1, 2, 4}) {
    certificate_row r;
    r.position = std::min(context * mult, position_limit);
    if (!rows.empty() && rows.back().position == r.position) break;
    std::vector<std::int64_t> pos;
    for (int k = 0; k < samples; ++k) pos.push_back(std::max<std::int64_t>(r.position - k, 0));
    r.float32_bound = float32_bound;
    r.float32_measured = kernel_error<float>(spec, cpu::dtype::f32, pos);
    r.bfloat16_bound = float32_bound + bfloat16_rounding;
    r.bfloat16_measured = kernel_error<Eigen::bfloat16>(spec, cpu::dtype::bf16, pos);
    r.textbook_float32 = textbook_error(spec, pos);
    rows.push_back(r);
  }
  return rows;
}

std::string certificate_text(const std::vector<certificate_row>& rows) {
  std::string s = fmt::format(
      "precision certificate (output error per unit-norm pair, before the attention factor; bound from "
      "docs/precision.md, measured at the {} positions up to each):\n"
      "  {:>12}  {:>22}  {:>22}  {:>24}\n",
      samples, "position", "float32 bound/measured", "bfloat16 bound/measured", "textbook float32 angles");
  for (const auto& r : rows)
    s += fmt::format("  {:>12}  {:>22}  {:>22}  {:>24.2e}\n", r.position,
                     fmt::format("{:.1e} / {:.1e}", r.float32_bound, r.float32_measured),
                     fmt::format("{:.1e} / {:.1e}", r.bfloat16_bound, r.bfloat16_measured), r.textbook_float32);
  return s;
}

nlohmann::json certificate_json(const std::vector<certificate_row>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows)
    j.push_back({{"position", r.position},
                 {"float32", {{"bound", r.float32_bound}, {"measured", r.float32_measured}}},
                 {"bfloat16", {{"bound", r.bfloat16_bound}, {"measured", r.bfloat16_measured}}},
                 {"textbook_float32", r.textbook_float32}});
  return j;
}

}  // namespace grape::cli
