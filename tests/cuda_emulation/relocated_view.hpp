#pragma once
// A view whose arrays live in buffers owned here, as cuda::device_view holds them in device
// memory: the emulation tests run the CUDA bodies on views whose instance has died, so a pointer
// `relocate` missed reads freed memory under ASan.
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace grape {

template <class View>
struct relocated_view {
  View view;
  std::vector<std::unique_ptr<unsigned char[]>> arrays;

  explicit relocated_view(View host) : view(host) {
    view.relocate([this](auto*& pointer, std::int64_t count) {
      using T = std::remove_cv_t<std::remove_reference_t<decltype(*pointer)>>;
      auto copy = std::make_unique<unsigned char[]>(static_cast<std::size_t>(count) * sizeof(T) + 1);
      std::memcpy(copy.get(), pointer, static_cast<std::size_t>(count) * sizeof(T));
      pointer = reinterpret_cast<const T*>(copy.get());
      arrays.push_back(std::move(copy));
    });
  }
};

}  // namespace grape
