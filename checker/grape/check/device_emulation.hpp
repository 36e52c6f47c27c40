#pragma once
// The CUDA kernels run on the host: the per-thread bodies (kernels/cuda) over the grid they get on
// the device — every block (token) and thread index, both phases with the barrier between them —
// on the plan the CUDA host makes (no reads of index arrays), over a view whose arrays relocate()
// moved, as cuda::device_view moves them (relocated_view). `emulate_device_call` takes the
// path cuda::rotate_qk(device_encoding, ...) takes for the same instance and call: the chunked
// rotary kernel for rotation planes (kernel_traits::plane_spec), 16-byte chunks where the host
// would vectorize, otherwise the instance body over the representation's view.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "common/rotate_plan.hpp"
#include "cuda/encode_qk_thread.hpp"
#include "cuda/rotate_freq_grad_thread.hpp"
#include "cuda/rotate_qk_call.hpp"
#include "cuda/rotate_qk_thread.hpp"
#include "grape/check/kernel_case.hpp"
#include "grape/view/kernel_traits.hpp"

namespace grape::detail {

/// A representation's view as cuda::device_view leaves it: every array relocate() lists copied
/// into memory of this object's own, the view repointed there. A pointer member that relocate()
/// forgets still points at the representation's storage: on a GPU it would read host memory, on
/// the host it reads the right values, so the emulation throws instead of running such a view.
template <class View>
class relocated_view {
 public:
  template <class R>
  explicit relocated_view(const R& rep) : view_(rep.view()) {
    view_.relocate([this](auto*& pointer, std::int64_t count) {
      using T = std::remove_cv_t<std::remove_pointer_t<std::remove_reference_t<decltype(pointer)>>>;
      auto& copy = arrays_.emplace_back(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T));
      if (pointer != nullptr && count > 0) std::memcpy(copy.data(), pointer, static_cast<std::size_t>(count) * sizeof(T));
      pointer = pointer == nullptr ? nullptr : reinterpret_cast<T*>(copy.data());
    });
    // A second copy of the representation holds its arrays elsewhere: a word of the view that
    // differs between the two copies' views is a pointer into them, and one that relocate() left
    // as it was is a forgotten array. Padding is not: the bytes after a scalar can hold whatever a
    // register held, so a word counts only when the same representation gives it twice, when its
    // low half (where a scalar before padding sits) differs too, and when both look like addresses.
    const R twin = rep;
    const View here = rep.view(), again = rep.view(), there = twin.view();
    for (std::size_t at = 0; at + sizeof(std::uintptr_t) <= sizeof(View); at += alignof(std::uintptr_t)) {
      const std::uintptr_t a = word(here, at), b = word(there, at), moved = word(view_, at);
      const bool pointer = a == word(again, at) && ((a ^ b) & 0xffffffffu) != 0 && looks_like_address(a) &&
                           looks_like_address(b);
      if (pointer && moved == a)
        throw std::logic_error(fmt::format(
            "grape: the view's relocate() does not list the array at bytes {}..{} of the view: cuda::device_view "
            "would leave it pointing at host memory (list every pointer member: grape/view/concepts.hpp)",
            at, at + sizeof(std::uintptr_t)));
    }
  }
  relocated_view(const relocated_view&) = delete;
  relocated_view& operator=(const relocated_view&) = delete;

  const View& view() const { return view_; }

 private:
  static std::uintptr_t word(const View& v, std::size_t at) {
    std::uintptr_t w = 0;
    std::memcpy(&w, reinterpret_cast<const std::byte*>(&v) + at, sizeof w);
    return w;
  }
  /// A user-space address on the 64-bit hosts grape runs on (below 2^47, past the first page).
  static bool looks_like_address(std::uintptr_t w) {
    return w >= 4096 && w < (std::uintptr_t{1} << 47) && w % alignof(float) == 0;
  }

  std::vector<std::vector<std::byte>> arrays_;
  View view_;
};

/// The instance body (cuda/encode_qk_thread.hpp) over tokens × `block` threads; the error flag.
template <class T, class View, layout_kind Q, layout_kind K>
int emulate_view_body(const kernel::rotate_plan& p, const View& view, std::int64_t max_position, int block) {
  int flag = 0;
  const cuda::view_shared_layout shared = cuda::shared_layout_of(view);
  const cuda::encode_token_thread<T, View, Q, K> f{p, view, shared, max_position, &flag};
  std::vector<float> smem(static_cast<std::size_t>(shared.floats(block)));
  for (std::int64_t token = 0; token < p.total_tokens; ++token) {
    for (int tid = 0; tid < block; ++tid) f.fill_table(token, tid, block, smem.data());
    for (int tid = 0; tid < block; ++tid) f.rotate(token, tid, block, smem.data());
  }
  return flag;
}

/// The chunked rotary kernel body (cuda/rotate_qk_thread.hpp) with V elements per chunk over
/// tokens × `block` threads; cache_rows as the device's cache (0 without one). The error flag.
template <class T, int V, layout_kind L>
int emulate_rotary_body(const kernel::rotate_plan& p, int block, std::int64_t max_position,
                        std::int64_t cache_rows = 0) {
  const cuda::unit_counts units{p.rotary_dim / (2 * V), (p.head_dim - p.rotary_dim) / V};
  int flag = 0;
  const cuda::rotate_token_thread<T, V, L> f{p, units, max_position, cache_rows, &flag};
  std::vector<float> shared(static_cast<std::size_t>(p.rotary_dim));
  for (std::int64_t token = 0; token < p.total_tokens; ++token) {
    for (int tid = 0; tid < block; ++tid) f.fill_table(token, tid, block, shared.data());
    for (int tid = 0; tid < block; ++tid) f.rotate(token, tid, block, shared.data());
  }
  return flag;
}

/// The chunked kernel with the chunk width the host picks for this call (launch_typed).
template <class T>
int emulate_rotary_call(const kernel::rotate_plan& p, const rotary_spec& spec, const kernel::rotate_qk_args& args,
                        int block, std::int64_t cache_rows = 0) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const bool half = spec.layout == layout_kind::half_split;
  if (cuda::detail::chunks_fit(spec, args))
    return half ? emulate_rotary_body<T, V, layout_kind::half_split>(p, block, args.max_position, cache_rows)
                : emulate_rotary_body<T, V, layout_kind::interleaved>(p, block, args.max_position, cache_rows);
  return half ? emulate_rotary_body<T, 1, layout_kind::half_split>(p, block, args.max_position, cache_rows)
              : emulate_rotary_body<T, 1, layout_kind::interleaved>(p, block, args.max_position, cache_rows);
}

/// What the device computes for cuda::rotate_qk(device_encoding(inst), args) (forward, or the
/// backward with sin_sign −1), run on the host; args' pointers are host memory. The error flag.
template <class T, class I>
int emulate_device_call(const I& inst, const kernel::rotate_qk_args& args, std::int64_t total_tokens, int block,
                        bool backward = false) {
  const auto& rotation = rotation_part(inst);
  using R = std::remove_cvref_t<decltype(rotation)>;
  const kernel::device_indices device{total_tokens};
  if (const auto spec = kernel_traits<decltype(rotation.rep)>::plane_spec(rotation)) {
    kernel::owned_plan o = kernel::make_rotate_plan(*spec, args, &device);
    o.plan.sin_sign = backward ? -1.0f : 1.0f;
    return emulate_rotary_call<T>(o.plan, *spec, args, block);
  }
  kernel::owned_plan o = kernel::make_instance_plan(shape_of(rotation), args, &device);
  o.plan.sin_sign = backward ? -1.0f : 1.0f;
  const relocated_view<decltype(rotation.rep.view())> moved(rotation.rep);  // as cuda::device_view copies it
  return emulate_view_body<T, std::remove_cvref_t<decltype(moved.view())>, layouts_of<R>::q, layouts_of<R>::k>(
      o.plan, moved.view(), args.max_position, block);
}

/// What cuda::rotate_qk_inv_freq_grad computes (rotate_freq_grad_thread.hpp: a block of `block`
/// threads per token, then a thread per plane), on the plans the host makes from the forward's
/// and the gradients' arguments (host memory; a CPU cache in forward.cache with cache_rows rows).
/// dL/dθ into grad_inv_freq; the error flag.
template <class T>
int emulate_freq_grad(const rotary_spec& spec, const kernel::rotate_qk_args& forward, const kernel::rotate_qk_args& grads,
                      std::int64_t total_tokens, int block, double* grad_inv_freq, std::int64_t cache_rows = 0,
                      kernel::position_origin origin = kernel::position_origin::zero) {
  const auto read_only = [](kernel::rotate_qk_args a) {
    a.q.out = const_cast<void*>(a.q.in);
    a.k.out = const_cast<void*>(a.k.in);
    return a;
  };
  const kernel::device_indices device{total_tokens};
  const kernel::owned_plan x = kernel::make_rotate_plan(spec, read_only(forward), &device);
  const kernel::owned_plan g = kernel::make_rotate_plan(spec, read_only(grads), &device);
  const int half = spec.rotary_dim / 2;
  std::vector<double> partial(static_cast<std::size_t>(x.plan.total_tokens * half),
                              std::numeric_limits<double>::quiet_NaN());
  int flag = 0;
  const cuda::freq_grad_token<T> f{
      {x.plan, g.plan.q, g.plan.k, partial.data(), forward.max_position, cache_rows, &flag, origin}};
  std::vector<float> shared(static_cast<std::size_t>(spec.rotary_dim));
  for (std::int64_t token = 0; token < x.plan.total_tokens; ++token) {
    for (int tid = 0; tid < block; ++tid) f.fill_table(token, tid, block, shared.data());
    for (int tid = 0; tid < block; ++tid) f.rotate(token, tid, block, shared.data());
  }
  const cuda::freq_grad_sum sum{partial.data(), x.plan.total_tokens, half, grad_inv_freq};
  for (int i = 0; i < half; ++i) sum(i);
  return flag;
}

}  // namespace grape::detail
