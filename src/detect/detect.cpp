// detect(): channels passed through, the pairing of the others into planes, then per plane the
// frequency, attention factor, common position offset and angle precision (detect.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "detect/phase_fit.hpp"
#include "grape/detail/error.hpp"

namespace grape::detect {

namespace {

using internal::plane_phases;
constexpr double pi = std::numbers::pi;

void validate(const detect_input& in) {
  const tensor3& x = in.before;
  const tensor3& y = in.after;
  if (x.tokens != y.tokens || x.heads != y.heads || x.head_dim != y.head_dim)
    throw input_error(fmt::format("--output: shape [{}, {}, {}] differs from --input's [{}, {}, {}]", y.tokens,
                                  y.heads, y.head_dim, x.tokens, x.heads, x.head_dim));
  for (const tensor3* t : {&x, &y}) {
    const char* what = t == &x ? "--input" : "--output";
    if (t->tokens < 2 || t->heads < 1 || t->head_dim < 2)
      throw input_error(fmt::format("{}: needs at least 2 tokens, 1 head and 2 channels (got [{}, {}, {}])", what,
                                    t->tokens, t->heads, t->head_dim));
    if (static_cast<std::int64_t>(t->values.size()) != t->tokens * t->heads * t->head_dim)
      throw input_error(fmt::format("{}: {} values for shape [{}, {}, {}]", what, t->values.size(), t->tokens,
                                    t->heads, t->head_dim));
    for (std::size_t i = 0; i < t->values.size(); ++i)
      if (!std::isfinite(t->values[i]))
        throw input_error(fmt::format("{}: element {} is not finite", what, i));
  }
  if (in.positions && static_cast<std::int64_t>(in.positions->size()) != x.tokens)
    throw input_error(fmt::format("--positions: {} positions for {} tokens", in.positions->size(), x.tokens));
  if (in.positions)
    for (auto p : *in.positions)
      if (std::abs(p) > (std::int64_t{1} << 52))
        throw input_error(fmt::format("--positions: {} is beyond 2^52 (not exact in float64)", p));
}

struct view {
  const tensor3& t;
  double at(std::int64_t tok, std::int64_t h, int c) const {
    return t.values[static_cast<std::size_t>((tok * t.heads + h) * t.head_dim + c)];
  }
};

// Channels copied unchanged: every element equal, or within the output type's rounding when the
// output is stored coarser than the input. (A rotation by a tiny angle changes some element by
// more, except where the output type cannot show it at all.)
std::vector<int> passthrough_channels(const detect_input& in) {
  const view x{in.before}, y{in.after};
  const double tol = in.output_roundoff > in.input_roundoff ? in.output_roundoff : 0.0;
  std::vector<int> out;
  for (int c = 0; c < in.before.head_dim; ++c) {
    bool same = true;
    for (std::int64_t t = 0; t < in.before.tokens && same; ++t)
      for (std::int64_t h = 0; h < in.before.heads && same; ++h)
        same = std::abs(y.at(t, h, c) - x.at(t, h, c)) <= tol * std::abs(x.at(t, h, c));
    if (same) out.push_back(c);
  }
  return out;
}

// Relative residual of "channels (a, b) are one plane turned by a per-token angle with one common
// factor": 1 − (Σ_t |S_t|)² / (Σ_t N_t · Σ_t Y_t) over a subset of tokens (Cauchy–Schwarz: 0 exactly
// for a plane, near 1 for unrelated channels).
std::vector<double> pair_residuals(const detect_input& in, const std::vector<int>& ch) {
  const view x{in.before}, y{in.after};
  const std::size_t n = ch.size();
  std::vector<double> abs_s(n * n, 0.0), xn_sum(n * n, 0.0), yn_sum(n * n, 0.0);
  const std::int64_t tokens = in.before.tokens, step = std::max<std::int64_t>(1, tokens / 256);
  std::vector<double> m(n * n), xn(n), yn(n);
  for (std::int64_t t = 0; t < tokens; t += step) {
    std::fill(m.begin(), m.end(), 0.0);
    std::fill(xn.begin(), xn.end(), 0.0);
    std::fill(yn.begin(), yn.end(), 0.0);
    for (std::int64_t h = 0; h < in.before.heads; ++h)
      for (std::size_t a = 0; a < n; ++a) {
        const double ya = y.at(t, h, ch[a]);
        xn[a] += x.at(t, h, ch[a]) * x.at(t, h, ch[a]);
        yn[a] += ya * ya;
        for (std::size_t b = 0; b < n; ++b) m[a * n + b] += ya * x.at(t, h, ch[b]);
      }
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = a + 1; b < n; ++b) {
        const double re = m[a * n + a] + m[b * n + b], im = m[b * n + a] - m[a * n + b];
        abs_s[a * n + b] += std::sqrt(re * re + im * im);  // no overflow at these magnitudes; hypot is slower
        xn_sum[a * n + b] += xn[a] + xn[b];
        yn_sum[a * n + b] += yn[a] + yn[b];
      }
  }
  std::vector<double> r(n * n, 1.0);
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b) {
      const double den = xn_sum[a * n + b] * yn_sum[a * n + b];
      const double v = den > 0 ? std::max(0.0, 1.0 - abs_s[a * n + b] * abs_s[a * n + b] / den) : 1.0;
      r[a * n + b] = r[b * n + a] = v;
    }
  return r;
}

plane_phases phases_of(const detect_input& in, int a, int b, double* factor) {
  const view x{in.before}, y{in.after};
  plane_phases p;
  const std::int64_t tokens = in.before.tokens;
  p.phase.resize(tokens);
  p.weight.resize(tokens);
  std::vector<double> mag(tokens);
  double abs_sum = 0, n_sum = 0, n_max = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::complex<double> s = 0;
    double nx = 0;
    for (std::int64_t h = 0; h < in.before.heads; ++h) {
      const std::complex<double> zx(x.at(t, h, a), x.at(t, h, b)), zy(y.at(t, h, a), y.at(t, h, b));
      s += zy * std::conj(zx);
      nx += std::norm(zx);
    }
    p.phase[t] = std::arg(s);
    p.weight[t] = nx;
    abs_sum += std::abs(s);
    n_sum += nx;
    n_max = std::max(n_max, nx);
  }
  // Tokens whose plane is (nearly) zero in every head carry no phase.
  for (auto& w : p.weight)
    if (w <= 1e-12 * n_max) w = 0;
  *factor = n_sum > 0 ? abs_sum / n_sum : 0.0;
  return p;
}

layout_found classify(const std::vector<std::pair<int, int>>& planes, const std::vector<int>& ch) {
  const std::size_t h = ch.size() / 2;
  auto all = [&](auto pair_of) {
    std::vector<std::pair<int, int>> want;
    for (std::size_t i = 0; i < h; ++i) want.push_back(pair_of(i));
    auto got = planes;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    return got == want;
  };
  if (all([&](std::size_t i) { return std::pair{ch[i], ch[i + h]}; })) return layout_found::half_split;
  if (all([&](std::size_t i) { return std::pair{ch[2 * i], ch[2 * i + 1]}; })) return layout_found::interleaved;
  return layout_found::permutation;
}

struct pairing {
  std::vector<int> partner;  // index into the channel list; empty: no candidate holds
  double residual = INFINITY;  // the chosen candidate's worst plane, or the best seen
  double margin = 0.0;         // smallest (next-best partner / best partner) residual ratio
};

// Candidates: half-split and interleaved over the channels, and (unless standard_only) the
// matching in which each channel's best partner chooses it back (any fixed permutation). A
// candidate holds when every one of its planes fits; a standard layout that holds is preferred,
// since planes that barely turn (slow planes in a coarse output type) cannot pick their partner.
pairing pair_channels(const detect_input& in, const std::vector<int>& ch, double accept, bool standard_only) {
  const std::size_t n = ch.size();
  const std::vector<double> r = pair_residuals(in, ch);
  pairing out;
  std::vector<int> mutual(n, -1);
  out.margin = INFINITY;
  for (std::size_t a = 0; a < n; ++a) {
    double best = INFINITY, second = INFINITY;
    for (std::size_t b = 0; b < n; ++b) {
      if (b == a) continue;
      if (r[a * n + b] < best) second = best, best = r[a * n + b], mutual[a] = static_cast<int>(b);
      else second = std::min(second, r[a * n + b]);
    }
    out.margin = std::min(out.margin, second / std::max(best, 1e-300));
  }
  bool chosen_back = !standard_only;
  for (std::size_t a = 0; a < n && chosen_back; ++a) chosen_back = mutual[mutual[a]] == static_cast<int>(a);
  if (!chosen_back) mutual.clear();
  std::vector<int> half(n), inter(n);
  for (std::size_t a = 0; a < n; ++a) {
    half[a] = static_cast<int>(a < n / 2 ? a + n / 2 : a - n / 2);
    inter[a] = static_cast<int>(a ^ 1u);
  }
  auto worst = [&](const std::vector<int>& m) {
    double w = 0;
    for (std::size_t a = 0; a < n; ++a) w = std::max(w, r[a * n + m[a]]);
    return w;
  };
  double seen = INFINITY;
  for (const auto* m : {&half, &inter, &mutual}) {
    if (m->empty()) continue;
    const double w = worst(*m);
    seen = std::min(seen, w);
    if (w <= accept && (out.partner.empty() || (m != &mutual && w < out.residual))) out.partner = *m, out.residual = w;
  }
  if (out.partner.empty()) out.residual = seen;
  return out;
}

struct fitted {
  std::pair<int, int> plane;
  plane_phases phases;
  double theta, factor;
};

// The offset k with phase = (p + k)·θ in every plane: each plane's phase minus p·θ is k·θ, read
// from the slowest plane (no wrap for moderate k) and refined plane by plane up to the fastest (the
// finest resolution). Planes turning by less than `informative` over the range carry no offset;
// `slowest` receives the slowest plane used.
double common_offset(const std::vector<fitted>& planes, const std::vector<std::int64_t>& pos, double informative,
                     double* slowest) {
  std::vector<std::size_t> by_theta(planes.size());
  for (std::size_t j = 0; j < planes.size(); ++j) by_theta[j] = j;
  std::sort(by_theta.begin(), by_theta.end(), [&](auto a, auto b) { return planes[a].theta < planes[b].theta; });
  const auto [pmin_it, pmax_it] = std::minmax_element(pos.begin(), pos.end());
  const double span = static_cast<double>(std::max<std::int64_t>(*pmax_it - *pmin_it, 1));
  double k = 0;
  bool first = true;
  for (std::size_t j : by_theta) {
    const fitted& f = planes[j];
    if (f.theta * span < informative) continue;
    *slowest = std::min(*slowest, f.theta);
    std::complex<double> m = 0;
    for (std::size_t t = 0; t < pos.size(); ++t)
      m += f.phases.weight[t] * std::polar(1.0, f.phases.phase[t] - static_cast<double>(pos[t]) * f.theta);
    const double rho = std::arg(m);
    k = first ? rho / f.theta : k + internal::wrap_angle(rho - k * f.theta) / f.theta;
    first = false;
  }
  return k;
}

detection not_found(detection d, std::string why) {
  d.found = false;
  d.reason = "no rotary structure found: " + std::move(why);
  return d;
}

}  // namespace

detection detect(const detect_input& in) {
  validate(in);
  detection d;
  d.head_dim = in.before.head_dim;
  const double u = std::max(in.output_roundoff, 0x1p-24);
  d.noise_floor = 16 * u;

  d.passthrough = passthrough_channels(in);
  std::vector<int> rotated;
  for (int c = 0; c < d.head_dim; ++c)
    if (!std::binary_search(d.passthrough.begin(), d.passthrough.end(), c)) rotated.push_back(c);
  if (rotated.empty()) return not_found(d, "every channel is unchanged");
  // A plane must fit to about 1% in amplitude (a bfloat16 cos/sin table still does); noise and
  // unrelated channels leave residuals of 0.1 and more.
  const double accept = std::max((64 * u) * (64 * u), 1e-4);
  // Planes that turn too little to change any element in the output type read as unchanged. When
  // the changed channels are not 0..R-1, first try 0..R-1 with R the smallest even count covering
  // them, then the whole head, in a standard layout; then the changed channels as they are.
  const int smallest = (rotated.back() + 2) / 2 * 2;
  const bool leading = static_cast<int>(rotated.size()) == smallest;
  pairing paired;
  if (!leading)
    for (int count : {smallest, static_cast<int>(d.head_dim)}) {
      if (count > d.head_dim) continue;
      std::vector<int> all(static_cast<std::size_t>(count));
      for (int c = 0; c < count; ++c) all[c] = c;
      if (auto p = pair_channels(in, all, accept, true); !p.partner.empty()) {
        rotated = all;
        paired = p;
        break;
      }
    }
  if (paired.partner.empty() && rotated.size() % 2 == 0) paired = pair_channels(in, rotated, accept, false);
  if (paired.partner.empty()) {
    if (rotated.size() % 2 != 0)
      return not_found(d, fmt::format("{} channels change, an odd number, so they cannot form planes", rotated.size()));
    return not_found(d, fmt::format("no pairing of the {} changed channels turns as planes (worst plane residual "
                                    "{:.3g}, at most {:.3g} for a rotation)",
                                    rotated.size(), paired.residual, accept));
  }
  d.passthrough.clear();
  for (int c = 0; c < d.head_dim; ++c)
    if (!std::binary_search(rotated.begin(), rotated.end(), c)) d.passthrough.push_back(c);
  const std::size_t n = rotated.size();
  const std::vector<int>& partner = paired.partner;
  d.pairing_residual = paired.residual;
  d.pairing_margin = paired.margin;

  std::vector<std::int64_t> pos(static_cast<std::size_t>(in.before.tokens));
  d.positions_given = in.positions.has_value();
  for (std::int64_t t = 0; t < in.before.tokens; ++t) pos[t] = d.positions_given ? (*in.positions)[t] : t;

  std::vector<fitted> planes;
  for (std::size_t a = 0; a < n; ++a) {
    if (partner[a] < static_cast<int>(a)) continue;
    fitted f;
    f.plane = {rotated[a], rotated[partner[a]]};
    f.phases = phases_of(in, f.plane.first, f.plane.second, &f.factor);
    const auto theta = internal::theta_from_differences(f.phases, pos);
    if (!theta) return not_found(d, "every token sits at the same position, so no angle can grow with it");
    f.theta = *theta;
    planes.push_back(std::move(f));
  }

  std::vector<std::pair<int, int>> pairs;
  for (const auto& f : planes) pairs.push_back(f.plane);
  d.layout = classify(pairs, rotated);
  // Standard layouts: plane j is the j-th by first channel, turning by the signed θ (a plane that
  // barely turns may read slightly negative); any other pairing: each plane oriented to turn
  // forward, by falling frequency.
  if (d.layout == layout_found::permutation) {
    for (auto& f : planes)
      if (f.theta < 0) {
        std::swap(f.plane.first, f.plane.second);
        f.theta = -f.theta;
        for (auto& ph : f.phases.phase) ph = -ph;
      }
    std::sort(planes.begin(), planes.end(), [](const fitted& a, const fitted& b) { return a.theta > b.theta; });
  } else
    std::sort(planes.begin(), planes.end(), [](const fitted& a, const fitted& b) { return a.plane < b.plane; });
  d.rotary_dim = static_cast<int>(n);

  double slowest = INFINITY;
  const double k = common_offset(planes, pos, 100 * d.noise_floor, &slowest);
  d.offset = static_cast<std::int64_t>(std::llround(k));
  std::int64_t pmax = 0;
  for (auto p : pos) pmax = std::max(pmax, std::abs(p + d.offset));

  double rms_sum = 0;
  for (auto& f : planes) {
    const auto fit = internal::refit_absolute(f.phases, pos, d.offset, f.theta);
    f.theta = fit.theta;
    d.planes.push_back(f.plane);
    d.theta.push_back(fit.theta);
    // Six standard errors; a float32 table's rounding; and what a phase of a few output roundoffs at
    // the largest position allows (a plane whose elements barely change shows no spread at all).
    d.theta_tolerance.push_back(std::max({6 * fit.standard_error, 0x1p-21 * std::abs(fit.theta),
                                          4 * u / static_cast<double>(std::max<std::int64_t>(pmax, 1))}));
    if (fit.max_residual > d.phase_residual)
      d.phase_residual = fit.max_residual, d.phase_residual_position = fit.max_residual_position;
    rms_sum += fit.rms_residual;
    d.float32_angle_scale = std::max(d.float32_angle_scale, static_cast<double>(pmax) * std::abs(fit.theta) * 0x1p-24);
  }
  if (!d.positions_given) d.phase_residual_position += d.offset;
  if (rms_sum / static_cast<double>(planes.size()) > 0.3)
    return not_found(d, fmt::format("the channels pair into planes, but their angles do not grow linearly with "
                                    "position (mean residual {:.2f} rad){}",
                                    rms_sum / static_cast<double>(planes.size()),
                                    d.positions_given ? "" : "; positions were assumed consecutive: give --positions"));
  const double fastest = *std::max_element(d.theta.begin(), d.theta.end());
  if (fastest * static_cast<double>(std::max<std::int64_t>(pmax, 1)) <= d.noise_floor)
    return not_found(d, "no plane turns by more than the output's rounding");
  d.offset_resolved = true;
  if (std::abs(static_cast<double>(d.offset)) * slowest > pi / 2) d.offset_resolved = false;

  std::vector<double> factors;
  for (const auto& f : planes) factors.push_back(f.factor);
  std::nth_element(factors.begin(), factors.begin() + factors.size() / 2, factors.end());
  d.attention_factor = factors[factors.size() / 2];
  for (const auto& f : planes)
    d.attention_factor_spread = std::max(d.attention_factor_spread, std::abs(f.factor / d.attention_factor - 1));

  if (d.phase_residual <= d.noise_floor) d.precision = precision_found::exact;
  else if (d.phase_residual <= 4 * d.float32_angle_scale + d.noise_floor) d.precision = precision_found::float32_angles;
  else d.precision = precision_found::worse;

  d.found = true;
  std::int64_t len = 0;
  for (auto p : pos) len = std::max(len, p + 1);
  d.schedule = internal::identify_schedule(d, len);
  const bool clear = d.pairing_margin >= 100 && d.phase_residual < 0.1;
  d.confidence = fmt::format("{} (next-best pairing residual {:.3g}x the chosen; worst phase residual {:.3g} rad)",
                             clear ? "high" : "low", d.pairing_margin, d.phase_residual);
  return d;
}

}  // namespace grape::detect
