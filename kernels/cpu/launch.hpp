#pragma once
// The one CPU launcher: an OpenMP loop over work items (tokens, bias rows, embedding rows), each
// calling the item's operator() with per-thread float scratch. The CUDA backend reuses the items.
// An exception thrown by an item (a bias asked for a position outside its content, say) must not
// leave the OpenMP region: the first one is kept, the remaining items are skipped, and it is
// rethrown on the calling thread.
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#include "cpu/threads.hpp"

namespace grape::cpu::detail {

/// min_parallel: fewer items than this run on the calling thread (waking the team costs more than
/// a handful of small items); a caller with few large items (decode) lowers it.
template <class Item>
void launch_items(std::int64_t count, int scratch_floats, int threads, const Item& item,
                  [[maybe_unused]] std::int64_t min_parallel = 16) {  // unused without OpenMP
  if (count <= 0) return;
  [[maybe_unused]] const int n = threads > 0 ? threads : max_threads();  // unused without OpenMP
  // A handful of items costs less than waking the thread team.
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  std::mutex first;
#pragma omp parallel num_threads(n) if (count >= min_parallel)
  {
    std::vector<float> scratch(static_cast<std::size_t>(scratch_floats) + 16);
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < count; ++t) {
      if (failed.load(std::memory_order_relaxed)) continue;
      try {
        item(t, scratch.data());
      } catch (...) {
        const std::lock_guard<std::mutex> lock(first);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
    if constexpr (requires { item.finish_thread(); }) item.finish_thread();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace grape::cpu::detail
