#pragma once
// Representations other than RoPE's table through the instance road, cpu::rotate_qk(instance,
// args), on the same Q/K buffers as the RoPE cases (32 heads × 128, f32, in place): each against
// the in-place memory pass with the same traffic, to say what each representation's arithmetic
// costs above memory. Positions are the token indices (no position ids; every axis equal).
// GRAPE-M's learnable and contextual rotations (cpu::grape_m_rotate_qk) run with one frequency
// row per head, by integer positions (exact phases) and by float64 per-token phases.
// GRAPE-A's lift (cpu::lift_qk) writes lifted copies of Q and K, head_dim + 2 channels a head, to
// buffers of its own: its baseline is the copy into them with the two augmented constants.
#include <cstring>
#include <string>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "cpu/grape_m.hpp"
#include "cpu/lift_qk.hpp"
#include "grape/encodings/grape_a.hpp"
#include "grape/encodings/grape_m.hpp"
#include "grape/encodings/rope.hpp"
#include "grape/encodings/string_rope.hpp"
#include "grape/encodings/xpos.hpp"
#include "rope_workloads.hpp"

namespace grape_bench {

/// The representations measured, by case name.
inline const std::vector<std::string>& representation_names() {
  static const std::vector<std::string> names = {"planes_instance", "planes_generic_body", "xpos_scaled_planes",
                                                 "grape_m_rank2", "string_rope_skew", "grape_a_lift",
                                                 "grape_m_per_head_rows", "grape_m_contextual_phases"};
  return names;
}

inline bool is_lift(const std::string& name) { return name == "grape_a_lift"; }

/// The lifted Q and K of `tokens` tokens: [tokens, heads, head_dim + 2] each.
struct lifted_buffers {
  static constexpr int width = head_dim + 2;
  std::int64_t tokens = 0;
  std::vector<float> q, k;
  grape::cpu::lifted_tensor tensor(std::vector<float>& b) const {
    return {b.data(), static_cast<std::int64_t>(b.size()), 0, heads * width, width};
  }
  std::size_t bytes() const { return (q.size() + k.size()) * sizeof(float); }
};

inline lifted_buffers& lifted_for(std::int64_t tokens) {
  static lifted_buffers b;
  if (b.tokens != tokens) {
    b.tokens = tokens;
    b.q.assign(static_cast<std::size_t>(tokens * heads * lifted_buffers::width), 0.0f);
    b.k.assign(b.q.size(), 0.0f);
  }
  return b;
}

/// The lift's same-traffic pass: every head of Q and K copied to its lifted row, then [1, 0]
/// (queries) or [0, 1] (keys) appended.
inline void lift_baseline(const float* q, const float* k, lifted_buffers& b, int threads) {
  constexpr int w = lifted_buffers::width;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < b.tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      float* lq = b.q.data() + (t * heads + h) * w;
      float* lk = b.k.data() + (t * heads + h) * w;
      std::memcpy(lq, q + t * row + h * head_dim, head_dim * sizeof(float));
      std::memcpy(lk, k + t * row + h * head_dim, head_dim * sizeof(float));
      lq[head_dim] = runtime_one, lq[head_dim + 1] = 0.0f;
      lk[head_dim] = 0.0f, lk[head_dim + 1] = runtime_one;
    }
}

/// One lift of Q and K (args: the content operands, out null) into `b`.
inline void run_lift(grape::cpu::rotate_qk_args args, lifted_buffers& b) {
  static const auto grape_a = grape::grape_a::make({static_cast<int>(heads), head_dim, 8.0});
  args.q.out = args.k.out = nullptr;
  grape::cpu::lift_qk(grape_a, args, b.tensor(b.q), b.tensor(b.k));
}

/// GRAPE-M with a frequency row per head (RoPE's table, each head's scaled apart) and, when
/// `contextual`, a float64 phase per token and head (a cumulative sum of rates below 1/16).
inline void run_grape_m(const grape::cpu::rotate_qk_args& args, bool contextual) {
  static const std::vector<double> freqs = [] {
    std::vector<double> f;
    const auto table = grape::rope_inv_freq(head_dim, 10000.0);
    for (std::int64_t h = 0; h < heads; ++h)
      for (double theta : table) f.push_back(theta * (1.0 + 0.01 * static_cast<double>(h)));
    return f;
  }();
  static std::vector<double> phases;
  const std::int64_t tokens = args.batch * args.seq_len;
  grape::cpu::grape_m_spec spec;
  spec.head_dim = head_dim;
  spec.planes = head_dim / 2;
  spec.freqs = freqs.data();
  spec.freq_rows = static_cast<int>(heads);
  if (contextual) {
    if (static_cast<std::int64_t>(phases.size()) != heads * tokens) {
      phases.resize(static_cast<std::size_t>(heads * tokens));
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t t = 0; t < tokens; ++t)
          phases[h * tokens + t] = static_cast<double>(t) * (0.001 + 0.06 * static_cast<double>(h) / heads);
    }
    spec.phases = phases.data();
    spec.phase_rows = static_cast<int>(heads);
  }
  grape::cpu::grape_m_rotate_qk(spec, args);
}

/// Runs one call of representation `name` on args (built once per process).
inline void run_representation(const std::string& name, const grape::cpu::rotate_qk_args& args) {
  static const auto rope = grape::rope::make({head_dim, head_dim, 10000.0, 1.0});
  static const auto xpos = grape::xpos::make({head_dim, 10000.0, 512.0, 0.4});
  static const auto grape_m = [] {
    auto p = grape::grape_m::default_params();
    std::mt19937_64 rng(7);
    p.head_dim = head_dim;
    p.a = grape::detail::normal_vector(rng, head_dim, 0.09);
    p.b = grape::detail::normal_vector(rng, head_dim, 0.09);
    return grape::grape_m::make(p);
  }();
  static const auto string_rope = grape::string_rope::make({head_dim, 10000.0, 1});
  if (name == "planes_instance") grape::cpu::rotate_qk(rope, args);
  else if (name == "planes_generic_body") grape::cpu::detail::run_instance(rope, args, false);
  else if (name == "xpos_scaled_planes") grape::cpu::rotate_qk(xpos, args);
  else if (name == "grape_m_rank2") grape::cpu::rotate_qk(grape_m, args);
  else if (name == "grape_m_per_head_rows") run_grape_m(args, false);
  else if (name == "grape_m_contextual_phases") run_grape_m(args, true);
  else grape::cpu::rotate_qk(string_rope, args);
}

}  // namespace grape_bench
