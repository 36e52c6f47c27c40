// rotate_qk instantiations for bfloat16 storage (Eigen::bfloat16), float32 arithmetic.
#include <Eigen/Core>

#include "cpu/rotate_qk_launch.hpp"

namespace grape::cpu::detail {
void run_rotate_bf16(const rotate_plan& plan) { run_rotate<Eigen::bfloat16>(plan); }
}  // namespace grape::cpu::detail
