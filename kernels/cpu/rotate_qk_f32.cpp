// rotate_qk instantiations for float32 storage (one file per dtype keeps compile time apart).
#include "cpu/rotate_qk_launch.hpp"

namespace grape::cpu::detail {
void run_rotate_f32(const rotate_plan& plan) { run_rotate<float>(plan); }
}  // namespace grape::cpu::detail
