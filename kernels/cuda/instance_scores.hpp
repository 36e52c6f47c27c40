#pragma once
// The score bias of an encoding instance as the CUDA flash attention's functor (flash_scores.hpp):
//
//   cuda::scores_of(bias, place)   // alibi_scores, t5_scores, fox_scores, gated_scores,
//                                  // path_integral_scores (GRAPE-AP), or yours
//
// The built-in biases are converted once to the functor's arrays (ALiBi's slopes as float, T5's
// table by distance, FoX's prefix sums, the gates, GRAPE-AP's projections); `place` puts each array where the kernel reads
// it and returns the pointer: host_placement for the emulation, device memory for a launch
// (cuda::device_attention, attention_cuda.hpp). A bias of your own opts in to the device with
// `score_view() const`: a ScoreView (below), device-safe like a representation's view.
// Host code (C++20); the views' operator() is what runs on the device.
#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/attention_args.hpp"
#include "cuda/flash_args.hpp"
#include "cuda/flash_scores.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/encodings/fox.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/encodings/t5_buckets.hpp"
#include "grape/view/concepts.hpp"

namespace grape::cuda {

/// A score bias in device-safe form: trivially copyable (pointers and scalars), with
///   GRAPE_HOST_DEVICE float operator()(std::int64_t h, std::int64_t m, std::int64_t n) const;
///       the bias of head h between query position m and key position n (−INFINITY: masked)
///   void relocate(move);  calls move(pointer, count) on every pointer member (host only)
/// as a representation's view does (grape/view/concepts.hpp).
template <class V>
concept ScoreView = std::is_trivially_copyable_v<V> && requires(const V& v, std::int64_t p) {
  { v(p, p, p) } -> std::convertible_to<float>;
} && requires(V& v, const grape::detail::any_array& move) { v.relocate(move); };

template <class B>
concept DeviceScoreBias = requires(const B& b) {
  { b.score_view() } -> ScoreView;
};

/// A score view has nothing the host can check.
template <class V>
void check_flash_bias(const flash_args&, const view_scores<V>&) {}

/// Places arrays in host memory (the emulation): keeps each one alive, returns its data.
class host_placement {
 public:
  template <class T>
  const T* operator()(std::vector<T> values) {
    auto kept = std::make_shared<std::vector<T>>(std::move(values));
    arrays_.push_back(kept);
    return kept->data();
  }

 private:
  std::vector<std::shared_ptr<const void>> arrays_;
};

template <class Place>
alibi_scores scores_of(const alibi_bias& b, Place& place) {
  return {place(std::vector<float>(b.slopes.begin(), b.slopes.end()))};
}

template <class Place>
t5_scores scores_of(const t5_bias& b, Place& place) {
  const std::vector<float> table(b.table.begin(), b.table.end());
  return {place(t5_distance_table(table.data(), b.num_heads, b.num_buckets, b.max_distance, b.bidirectional)),
          b.num_heads,
          b.max_distance,
          b.bidirectional,
          place(t5_bucket_table(b.num_buckets, b.max_distance, b.bidirectional)),
          b.num_buckets};
}

template <class Place>
fox_scores scores_of(const forget_gate_bias& b, Place& place) {
  return {place(b.prefix), b.length};
}

template <class Place>
gated_scores scores_of(const gated_linear_bias& b, Place& place) {
  return {place(b.omega), place(b.key_gate), b.query_gate.empty() ? nullptr : place(b.query_gate), b.length,
          b.num_heads};
}

template <class Place>
path_integral_scores scores_of(const path_integral_bias& b, Place& place) {
  return {{b.num_heads, b.dim, b.length, b.norm_eps, place(b.slopes), place(b.rows), place(b.keys), place(b.offset_cos),
           place(b.offset_sin)}};
}

/// A bias of your own, through its score view; its arrays placed like the built-ins'.
template <DeviceScoreBias B, class Place>
auto scores_of(const B& b, Place& place) {
  auto view = b.score_view();
  view.relocate([&](auto*& pointer, std::int64_t count) {
    using T = std::remove_cv_t<std::remove_pointer_t<std::remove_reference_t<decltype(pointer)>>>;
    if (pointer != nullptr && count > 0) pointer = place(std::vector<T>(pointer, pointer + count));
  });
  return view_scores<decltype(view)>{view};
}

/// Whether the CUDA attention takes a bias type: a built-in one, or one with a score view.
template <class B>
concept CudaScoreBias = requires(const B& b, host_placement& place) { scores_of(b, place); };

/// A lift's (GRAPE-A's) score as its linear bias, one coefficient v_d·u_{d+1} per head: the lifts
/// the CUDA attention takes act on the augmented channels only (u and v zero on the content's d),
/// where q̃ᵀk̃ = q̂ᵀk̂ + (m − n)(vᵀq̂)(uᵀk̂) = qᵀk + (m − n)·v_d·u_{d+1} exactly (q̂ = [q; 1; 0],
/// k̂ = [k; 0; 1], vᵀu = 0); another lift is refused.
template <class Instance, class Place>
linear_scores lift_scores(const Instance& inst, Place& place) {
  const int d = inst.content_dim();
  std::vector<float> coef;
  for (std::size_t h = 0; h < inst.reps.size(); ++h) {
    const auto view = inst.reps[h].view();
    if (view.size != d + 2) throw input_error("reps: a lift of dim head_dim + 2 per head is expected");
    for (int c = 0; c < d; ++c)
      if (view.u[c] != 0.0 || view.v[c] != 0.0)
        throw input_error("reps[" + std::to_string(h) +
                          "]: a lift that acts on the content channels is not on CUDA yet (cpu::attention takes it)");
    coef.push_back(static_cast<float>(view.v[d] * view.u[d + 1]));
  }
  return {place(std::move(coef))};
}

/// The score functor of an encoding instance (its bias part's, a composition's included, a lift's
/// linear bias), or no_scores for an instance without a bias.
template <class Instance, class Place>
auto instance_scores(const Instance& inst, Place& place) {
  if constexpr (is_lift_instance<Instance>) {
    return lift_scores(inst, place);
  } else if constexpr (!has_score_bias<Instance>) {
    return no_scores{};
  } else {
    using bias_type = std::remove_cvref_t<decltype(*kernel::bias_part(inst))>;
    static_assert(CudaScoreBias<bias_type>,
                  "grape: this score bias has no device form: give it score_view() const returning a ScoreView "
                  "(kernels/cuda/instance_scores.hpp)");
    return scores_of(*kernel::bias_part(inst), place);
  }
}

}  // namespace grape::cuda
