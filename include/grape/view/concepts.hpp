#pragma once
// RepresentationView: the device-safe form of a representation that every kernel takes.
//
// A view is trivially copyable: pointers into the representation's own storage and scalars, no
// std::vector, Eigen or Hana. It is valid while the representation it came from lives. It acts
// in two steps, so that what depends on the position alone is computed once per token, not once
// per head (a token has 8 to 128 heads):
//   static constexpr int rank;                      position axes (== the group's rank)
//   int dim() const;                                channels it acts on (the rotary window)
//   int state_floats() const;                       floats of per-token state
//   int scratch_floats() const;                     floats of per-head scratch (0 for none)
//   void prepare(c, key, state) const;              the state of coordinates c (rank int64
//                                                   values) for ρ (key = false) or κ (key = true)
//   void apply(state, key, x, y, scratch) const;    y = ρ(c)x or κ(c)x, x != y, float32
//   void relocate(move);                            calls move(pointer, count) on every pointer
//                                                   member, so the arrays can be copied to device
//                                                   memory (cuda::device_view) and the view
//                                                   repointed; host-only
// All of it GRAPE_HOST_DEVICE: the CPU per-token item and the CUDA per-thread body call the same
// functions. A representation opts in to the kernels with `view() const`; its float `apply`
// then goes through the view (apply_view below), so the checker's element law tests the code
// the kernels run.
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace grape {

namespace detail {
/// A `move` argument for the concept check: accepts any pointer member and its element count.
struct any_array {
  template <class T>
  void operator()(const T*&, std::int64_t) const {}
};
}  // namespace detail

template <class V>
concept RepresentationView =
    std::is_trivially_copyable_v<V> &&
    requires(const V& v, const std::int64_t* c, const float* x, float* y, float* state, float* scratch) {
      { V::rank } -> std::convertible_to<int>;
      { v.dim() } -> std::convertible_to<int>;
      { v.state_floats() } -> std::convertible_to<int>;
      { v.scratch_floats() } -> std::convertible_to<int>;
      v.prepare(c, true, state);
      v.apply(static_cast<const float*>(state), true, x, y, scratch);
    } && requires(V& v, const detail::any_array& move) { v.relocate(move); };

template <class R>
concept KernelRepresentation = requires(const R& r) {
  { r.view() } -> RepresentationView;
};

/// One vector through a view on the host (the representations' float path; the checker's).
template <RepresentationView V>
void apply_view(const V& v, const std::int64_t* c, bool key, const float* x, float* y) {
  std::vector<float> state(static_cast<std::size_t>(v.state_floats()) + 1);
  std::vector<float> scratch(static_cast<std::size_t>(v.scratch_floats()) + 1);
  v.prepare(c, key, state.data());
  v.apply(state.data(), key, x, y, scratch.data());
}

}  // namespace grape
