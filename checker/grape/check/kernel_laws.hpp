#pragma once
// Laws that run the compiled kernels on the encoding under test, built-in or a user's own, through
// the same calls a user makes: the CPU rotate_qk on a random call (strides with gaps, GQA, padded
// or varlen batches, int32/int64 ids or offsets, in or out of place, f32/f16/bf16), the CUDA
// instance body emulated on the CPU over its grid, the lift kernel (GRAPE-A) and the score-bias
// tiles. Each compares with
// the encoding's float64 path (the representation's apply, itself held to exp(Σ c_k L_k) by
// reference_agreement; the bias formula). They are claimed whenever they apply: a kernel that
// disagrees with its encoding is a defect whatever the encoding promises.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cpu/encode_bias.hpp"
#include "cpu/encode_embedding.hpp"
#include "cpu/encode_qk.hpp"
#include "cpu/lift_qk.hpp"
#include "cuda/host_storage.hpp"
#include "grape/check/builtin_laws.hpp"
#include "grape/check/device_emulation.hpp"
#include "grape/check/kernel_case.hpp"
#include "grape/check/report.hpp"
#include "grape/check/trial.hpp"
#include "grape/view/concepts.hpp"

namespace grape::detail {

/// E's representation has no device-safe view (view() const, grape/view/concepts.hpp): its
/// mathematical laws run, the kernels cannot, and their rows say so.
template <class E>
constexpr bool lacks_view = [] {
  if constexpr (has_representation<E>) return !KernelRepresentation<typename E::representation>;
  else return false;
}();

/// E's instance rotates Q and K (rotate_qk, alone or in a composition), or lifts them (lift_qk):
/// what the rotation and lift kernels take, given a view.
template <class E>
constexpr bool rotates_qk = rotates_qk_part<typename E::instance>;
template <class E>
constexpr bool lifts_qk = is_lift_instance<typename E::instance>;

/// The row of a kernel law that would take E's kind but cannot run it.
inline constexpr std::string_view no_view = "no view() — see docs/concepts.md";

/// E's instance rotates Q and K through cpu::rotate_qk, with a representation that has a view.
template <class E>
constexpr bool runs_rotate_kernels = [] {
  if constexpr (has_representation<E>) {
    return KernelRepresentation<typename E::representation> &&
           requires(const typename E::instance& i, const cpu::rotate_qk_args& a) { cpu::rotate_qk(i, a); };
  } else {
    return false;
  }
}();

/// Positions for one kernel trial: a base from the trial's draws (small, or log-uniform up to the
/// encoding's range), then a window of `spread` above it, all in [0, limit).
template <class E>
position_draw kernel_positions(const trial_inputs<E>& t) {
  const std::int64_t spread = std::min<std::int64_t>(64, t.limit);
  const std::int64_t base = std::min(std::abs(t.draw_position()), t.limit - spread);
  return {base, spread};
}

inline constexpr std::string_view storage_rule =
    "max |error| <= tol(storage) sqrt(d) max|reference|, tol = 4e-6 f32, 2e-3 f16, 1.6e-2 bf16";

template <class T>
constexpr std::string_view storage_name() {
  if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, Eigen::half>) return "f16";
  else return "bf16";
}

/// The verdict on one call: the worst entry against storage_rule.
template <class T, class Call, class Entry>
std::optional<counterexample> call_verdict(const Call& call, const Entry& w, const char* kernel, std::string extra) {
  const double tol = storage_tolerance<T>() * std::sqrt(static_cast<double>(call.d)) * w.scale;
  return judge(fmt::format("{} {} tokens={} q_heads={} k_heads={} positions {}..{}{}", storage_name<T>(),
                           call.cu_seqlens.empty() ? "padded" : "varlen", call.total, call.q_heads, call.k_heads,
                           call.coords.empty() ? 0 : call.coords.front()[0], call.coords.empty() ? 0 : call.coords.back()[0],
                           extra),
               w.got, w.want, w.error, tol,
               fmt::format("{} {}[token {}, head {}, channel {}] vs float64 encode", kernel, w.key ? "k" : "q", w.token,
                           w.head, w.channel));
}

/// Runs body<T>() for the storage type the trial picks.
template <class Body>
std::optional<counterexample> for_drawn_storage(Body&& body) {
  switch (full_size(rc::gen::inRange(0, 3))) {
    case 0: return body.template operator()<float>();
    case 1: return body.template operator()<Eigen::half>();
    default: return body.template operator()<Eigen::bfloat16>();
  }
}

/// What the two rotate_qk laws share: the storage tolerance, and whom they apply to.
struct rotate_kernel_law {
  static constexpr std::string_view tolerance = storage_rule;
  template <class E>
  static constexpr bool applies = runs_rotate_kernels<E>;
  template <class E>
  static constexpr std::string_view not_run = lacks_view<E> && rotates_qk<E> ? no_view : "";
};

struct cpu_kernel_law : rotate_kernel_law {
  static constexpr std::string_view name = "cpu_kernel";
  static constexpr std::string_view formula =
      "cpu::rotate_qk(instance, random call) = float64 encode of every head";

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const position_draw positions = kernel_positions(t);
    return for_drawn_storage([&]<class T>() {
      kernel_case<typename E::instance, T> call(t.rng, t.instance, positions);
      cpu::rotate_qk(call.inst, call.args);
      return call_verdict<T>(call, call.worst_vs_apply(call.q_out, call.k_out), "cpu::rotate_qk", "");
    });
  }
};

struct cuda_body_law : rotate_kernel_law {
  static constexpr std::string_view name = "cuda_body_emulated";
  static constexpr std::string_view formula =
      "the CUDA kernel cuda::rotate_qk runs for this instance (chunked rotary body for rotation planes, else the "
      "instance body), emulated over its grid (blocks 1/7/32) = float64 encode of every head";

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const position_draw positions = kernel_positions(t);
    const int block = std::array{1, 7, 32}[full_size(rc::gen::inRange(0, 3))];
    return for_drawn_storage([&]<class T>() -> std::optional<counterexample> {
      kernel_case<typename E::instance, T> call(t.rng, t.instance, positions);
      if (emulate_device_call<T>(call.inst, call.args, call.total, block) != 0)
        return counterexample{fmt::format("block={}", block), 0, 1, 1, 0, "the kernel flagged a position in range"};
      return call_verdict<T>(call, call.worst_vs_apply(call.q_out, call.k_out), "emulated CUDA kernel",
                             fmt::format(" block={}", block));
    });
  }
};

/// E's instance lifts Q and K (lift_qk, GRAPE-A) with a representation that has a view.
template <class E>
constexpr bool runs_lift_kernel = [] {
  if constexpr (has_representation<E>) {
    return KernelRepresentation<typename E::representation> &&
           requires(const typename E::instance& i, const cpu::rotate_qk_args& a, const cpu::lifted_tensor& l) {
             cpu::lift_qk(i, a, l, l);
           };
  } else {
    return false;
  }
}();

struct lift_kernel_law {
  static constexpr std::string_view name = "lift_kernel";
  static constexpr std::string_view formula =
      "cpu::lift_qk(instance, random call) = float64 ρ_h(m)[q;1;0] and κ_h(n)[k;0;1] for every query head";
  static constexpr std::string_view tolerance = storage_rule;
  template <class E>
  static constexpr bool applies = runs_lift_kernel<E>;
  template <class E>
  static constexpr std::string_view not_run = lacks_view<E> && lifts_qk<E> ? no_view : "";

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const auto& inst = t.instance;
    // f16 holds lifted entries (generator entries × position) only up to 65504: the kernel
    // refuses more, so f16 calls take positions below that bound.
    double scale = 0;
    for (int h = 0; h < inst.heads(); ++h)
      for (int axis = 0; axis < E::group::rank; ++axis)
        scale = std::max(scale, inst.representation(h).generator(axis).cwiseAbs().maxCoeff());
    const position_draw drawn = kernel_positions(t);
    return for_drawn_storage([&]<class T>() {
      position_draw positions = drawn;
      if constexpr (std::is_same_v<T, Eigen::half>) {
        const auto f16_limit = static_cast<std::int64_t>(60000.0 / std::max(scale, 1e-300));
        positions.spread = std::min<std::int64_t>(positions.spread, std::max<std::int64_t>(1, f16_limit / 2));
        positions.base = std::min(positions.base, std::max<std::int64_t>(0, f16_limit / 2 - 32));
      }
      kernel_case<typename E::instance, T> call(t.rng, inst, positions, inst.heads());
      call.args.q.out = nullptr;  // lift_qk reads Q and K and writes the lifted tensors
      call.args.k.out = nullptr;
      const int dl = call.d + 2;
      const std::int64_t heads = call.q_heads, token_stride = heads * dl;
      const std::int64_t batch_stride = call.cu_seqlens.empty() ? call.args.seq_len * token_stride : 0;
      std::vector<T> q_lifted(static_cast<std::size_t>((call.total + 1) * token_stride), T(0)), k_lifted(q_lifted);
      const auto size = static_cast<std::int64_t>(q_lifted.size());
      cpu::lift_qk(call.inst, call.args, {q_lifted.data(), size, batch_stride, token_stride, dl},
                   {k_lifted.data(), size, batch_stride, token_stride, dl});
      typename kernel_case<typename E::instance, T>::worst_entry w;
      std::vector<double> x(dl), y(dl);
      const std::int64_t group = heads / call.k_heads;
      for (std::int64_t tok = 0; tok < call.total; ++tok)
        for (std::int64_t h = 0; h < heads; ++h)
          for (const bool key : {false, true}) {
            const std::vector<T>& in = key ? call.k : call.q;
            const std::int64_t from = call.at(key ? call.args.k : call.args.q, tok, key ? h / group : h);
            for (int c = 0; c < call.d; ++c) x[c] = static_cast<double>(in[from + c]);
            x[call.d] = key ? 0.0 : 1.0;
            x[call.d + 1] = key ? 1.0 : 0.0;
            const auto& rep = inst.representation(static_cast<int>(h));
            if (key) rep.apply_key(call.coords[tok], x.data(), y.data());
            else rep.apply(call.coords[tok], x.data(), y.data());
            const std::vector<T>& out = key ? k_lifted : q_lifted;
            const std::int64_t at = (call.cu_seqlens.empty() ? (tok / call.args.seq_len) * batch_stride +
                                                                   (tok % call.args.seq_len) * token_stride
                                                             : tok * token_stride) + h * dl;
            for (int c = 0; c < dl; ++c) w.take(static_cast<double>(out[at + c]), y[c], tok, h, c, key);
          }
      return call_verdict<T>(call, w, "cpu::lift_qk", "");
    });
  }
};

/// The tolerance of one float32 result of a float64 value: a few roundings of its magnitude.
inline double float32_result_tolerance(double want) { return 4 * eps32 * (1 + std::abs(want)); }

/// E's instance has a score-bias tile kernel (cpu::bias_tile_of).
template <class E>
constexpr bool has_bias_tile =
    requires(const typename E::instance& i, const cpu::bias_tile& tile) { cpu::bias_tile_of(i, tile); };

struct bias_tile_law {
  static constexpr std::string_view name = "bias_tile";
  static constexpr std::string_view formula = "cpu::bias_tile_of(instance, tile)[h, i, j] = bias(h, i, j) in float64";
  static constexpr std::string_view tolerance = "|error| <= 4 eps32 (1 + |bias|) (the tile is float32)";
  template <class E>
  static constexpr bool applies = has_bias_tile<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const auto& inst = t.instance;
    const auto& bias = score_bias_of(inst);  // a composed instance's bias part
    const std::int64_t q_len = *rc::gen::inRange<std::int64_t>(1, 17), k_len = *rc::gen::inRange<std::int64_t>(1, 17);
    const std::int64_t q_start = std::min(std::abs(t.draw_position()), t.limit - q_len);
    const std::int64_t k_start = std::min(std::abs(t.draw_position()), t.limit - k_len);
    const std::int64_t heads = inst.heads();
    std::vector<float> out(static_cast<std::size_t>(heads * q_len * k_len));
    cpu::bias_tile_of(inst, cpu::bias_tile{out.data(), heads, q_start, q_len, k_start, k_len, 1});
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < q_len; ++i)
        for (std::int64_t j = 0; j < k_len; ++j) {
          const double got = out[static_cast<std::size_t>((h * q_len + i) * k_len + j)];
          const double want = bias.bias(static_cast<int>(h), std::array<std::int64_t, 1>{q_start + i},
                                        std::array<std::int64_t, 1>{k_start + j});
          if (same_score(got, want)) continue;
          if (auto c = judge(fmt::format("m=({}) n=({}) head={}", q_start + i, k_start + j, h), got, want,
                             std::abs(got - want), float32_result_tolerance(want), "tile[h, i, j] vs bias(h, m, n)"))
            return c;
        }
    return std::nullopt;
  }
};

/// E's instance adds an absolute embedding through a kernel (cpu::add_embedding_of).
template <class E>
constexpr bool has_embedding_kernel =
    requires(const typename E::instance& i, const cpu::embedding_rows& rows) { cpu::add_embedding_of(i, rows); };

struct embedding_kernel_law {
  static constexpr std::string_view name = "embedding_kernel";
  static constexpr std::string_view formula =
      "cpu::add_embedding_of(instance, rows with gaps)[t] = x[t] + PE(m_t) in float64";
  static constexpr std::string_view tolerance = "|error| <= 4 eps32 (1 + |x + PE(m)|) (the rows are float32)";
  template <class E>
  static constexpr bool applies = has_embedding_kernel<E>;

  template <class E>
  static std::optional<counterexample> trial(trial_inputs<E>& t) {
    const auto& inst = t.instance;
    const int dim = inst.content_dim();
    const std::int64_t tokens = *rc::gen::inRange<std::int64_t>(1, 17);
    const std::int64_t stride = dim + *rc::gen::inRange<std::int64_t>(0, 4);  // gaps the kernel must skip
    std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
    for (auto& m : positions) m = std::min(std::abs(t.draw_position()), t.limit - 1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(tokens * stride));
    for (auto& v : x) v = normal(t.rng);
    const std::vector<float> before = x;
    cpu::add_embedding_of(inst, cpu::embedding_rows{x.data(), tokens, dim, stride, positions.data(), 1});
    std::vector<double> pe(static_cast<std::size_t>(dim));
    for (std::int64_t tok = 0; tok < tokens; ++tok) {
      inst.table.embed(std::array<std::int64_t, 1>{positions[tok]}, pe.data());
      for (std::int64_t c = 0; c < stride; ++c) {
        const std::size_t at = static_cast<std::size_t>(tok * stride + c);
        const double got = x[at], want = c < dim ? before[at] + pe[c] : before[at];  // a gap stays as it was
        if (auto e = judge(fmt::format("m=({}) token={} channel={} dim={} row_stride={}", positions[tok], tok, c, dim, stride),
                           got, want, std::abs(got - want), float32_result_tolerance(want), "x[t, c] + PE(m)[c] vs float64"))
          return e;
      }
    }
    return std::nullopt;
  }
};

/// The kernel laws in report order, after the built-in laws.
using kernel_laws = law_list<cpu_kernel_law, cuda_body_law, lift_kernel_law, bias_tile_law, embedding_kernel_law>;

}  // namespace grape::detail
