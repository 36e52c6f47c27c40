// The CPU's choice of streaming (non-temporal) stores for a rotate_qk call (store_policy): a
// property of this CPU's caches and of the packet kernels, so it is made here, after the shared
// plan (common/rotate_plan.hpp) has checked the call.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "cpu/rotate_qk_item.hpp"
#include "cpu/rotate_qk_plan.hpp"

namespace grape::cpu::detail {
namespace {

__extension__ typedef __int128 wide_int;  // the written bytes without overflow

/// The largest cache this CPU sees, from sysfs (what lscpu reports: the L3 slice of this core
/// complex), else 32 MiB. Not sysconf(_SC_LEVEL3_CACHE_SIZE): in a VM here it reported the host's
/// 384 MiB, 12× the 32 MiB slice.
std::int64_t last_level_cache_bytes() {
  static const std::int64_t bytes = [] {
    std::int64_t largest = 0;
    for (int index = 0; index < 8; ++index) {
      std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
      std::int64_t value = 0;
      char unit = 0;
      if (!(f >> value)) continue;
      f >> unit;
      const std::int64_t scale = unit == 'K' ? 1 << 10 : unit == 'M' ? 1 << 20 : unit == 'G' ? 1 << 30 : 1;
      largest = std::max(largest, value * scale);
    }
    return largest > 0 ? largest : std::int64_t{32} << 20;
  }();
  return bytes;
}

/// Streaming stores write whole 64-byte lines of the rotated channels: every head's rotated
/// block must start on a line and cover whole lines.
bool lines_aligned(const qk_tensor& t, const rotate_plan& p, std::size_t eb) {
  const auto line = static_cast<std::int64_t>(stream_line_bytes);
  const auto bytes = static_cast<std::int64_t>(eb);
  return reinterpret_cast<std::uintptr_t>(t.out) % stream_line_bytes == 0 &&
         (t.head_stride * bytes) % line == 0 && (t.token_stride * bytes) % line == 0 &&
         (p.cu_seqlens != nullptr || (t.batch_stride * bytes) % line == 0) &&
         (p.rotary_dim * bytes) % line == 0;
}

bool use_streaming_stores(const rotate_qk_args& args, const rotate_plan& p) {
  if (args.stores == store_policy::cached) return false;
  // The streaming kernels: the specialised dims (rotate_qk_item.hpp).
  if (p.rotary_dim != 64 && p.rotary_dim != 128 && p.rotary_dim != 256) return false;
  const std::size_t eb = element_bytes(args.type);
  std::int64_t written = 0;
  for (const qk_tensor* t : {&args.q, &args.k}) {
    if (t->heads == 0) continue;
    if (t->in == t->out || !lines_aligned(*t, p, eb)) return false;
    written += t->heads;
  }
  if (written == 0) return false;
  if (args.stores == store_policy::streaming) return true;
  const wide_int bytes = static_cast<wide_int>(written) * p.total_tokens * p.rotary_dim *
                         static_cast<wide_int>(eb);
  return bytes > last_level_cache_bytes();
}

}  // namespace

owned_plan plan_cpu_rotation(const rotary_spec& spec, const rotate_qk_args& args) {
  owned_plan o = make_rotate_plan(spec, args);
  // The fused body writes through ordinary stores (cache slots are scattered rows).
  o.plan.stream_stores = !o.plan.fused.active() && use_streaming_stores(args, o.plan);
  return o;
}

}  // namespace grape::cpu::detail
