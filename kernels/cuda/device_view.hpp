#pragma once
// A representation's view with its arrays copied to device memory, and an encoding instance
// ready for the CUDA kernels (its device view and the shape the plan checks). Host code: compiles
// with the host compiler or nvcc; build once per model, like device_rotary.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/device_arrays.hpp"
#include "cuda/rotate_qk_cuda.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/schedule/spec_check.hpp"
#include "grape/view/concepts.hpp"
#include "grape/view/kernel_traits.hpp"

namespace grape::cuda {

template <RepresentationView View>
class device_view {
 public:
  /// Copies every array `host` points into (View::relocate lists them) to device memory.
  explicit device_view(View host) : view_(host) {
    view_.relocate([this](auto*& pointer, std::int64_t count) { pointer = arrays_.copy(pointer, count, "a view array"); });
  }
  device_view(const device_view&) = delete;
  device_view& operator=(const device_view&) = delete;

  /// The view with device pointers: pass it to a kernel by value.
  const View& view() const { return view_; }

 private:
  device_arrays arrays_;  // before view_: a throwing copy frees what was copied
  View view_;
};

/// A rotate_qk instance on the device: cuda::rotate_qk(encoding, args, ...) (encode_qk_cuda.cuh).
/// Rotation planes with one axis per plane (kernel_traits) also get the rotary_spec kernel's
/// tables, and that chunked kernel takes their calls.
template <class R, layout_kind QLayout, layout_kind KLayout>
class device_encoding {
 public:
  using view_type = decltype(std::declval<const R&>().view());
  static constexpr layout_kind q_layout = QLayout, k_layout = KLayout;

  /// Checks the instance's shape, then uploads its plane tables (rotation planes) or its view.
  explicit device_encoding(const rotate_instance<R, QLayout, KLayout>& inst)
      : shape_(checked(shape_of(inst))), spec_(kernel_traits<R>::plane_spec(inst)) {
    if (spec_) tables_ = std::make_unique<device_rotary>(*spec_);
    else view_.emplace(inst.rep.view());
  }

  /// The device view; only without plane_spec() (the chunked kernel takes those calls).
  const view_type& view() const { return view_->view(); }
  const encoding_shape& shape() const { return shape_; }
  /// Set when the specialised kernel takes the calls: the instance as a rotary_spec, its tables.
  const rotary_spec* plane_spec() const { return spec_ ? &*spec_ : nullptr; }
  const device_rotary* plane_tables() const { return tables_.get(); }

 private:
  static encoding_shape checked(const encoding_shape& s) {
    check_shape(s);
    return s;
  }

  encoding_shape shape_;
  std::optional<rotary_spec> spec_;
  std::optional<device_view<view_type>> view_;  // not for plane specs
  std::unique_ptr<device_rotary> tables_;
};

}  // namespace grape::cuda
