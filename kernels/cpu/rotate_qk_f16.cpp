// rotate_qk instantiations for float16 storage (Eigen::half), float32 arithmetic.
#include <Eigen/Core>

#include "cpu/rotate_qk_launch.hpp"

namespace grape::cpu::detail {
void run_rotate_f16(const rotate_plan& plan) { run_rotate<Eigen::half>(plan); }
}  // namespace grape::cpu::detail
