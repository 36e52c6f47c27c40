#pragma once
// The one CPU launcher: an OpenMP loop over work items (tokens, bias rows, embedding rows), each
// calling the item's operator() with per-thread float scratch. The CUDA backend reuses the items.
#include <cstdint>
#include <vector>

#include "cpu/threads.hpp"

namespace grape::cpu::detail {

template <class Item>
void launch_items(std::int64_t count, int scratch_floats, int threads, const Item& item) {
  if (count <= 0) return;
  [[maybe_unused]] const int n = threads > 0 ? threads : max_threads();  // unused without OpenMP
  // A handful of items costs less than waking the thread team.
#pragma omp parallel num_threads(n) if (count >= 16)
  {
    std::vector<float> scratch(static_cast<std::size_t>(scratch_floats) + 16);
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < count; ++t) item(t, scratch.data());
    if constexpr (requires { item.finish_thread(); }) item.finish_thread();
  }
}

}  // namespace grape::cpu::detail
