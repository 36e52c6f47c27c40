#pragma once
// The CPU kernels speak the vocabulary both backends share (kernels/common, namespace grape::kernel)
// as their own: cpu::rotate_qk_args or cpu::detail::rotate_plan name what grape::kernel defines, so
// a CPU caller spells the CPU's names and kernels/common stays free of the CPU.
#include "common/qk_args.hpp"

namespace grape::cpu {
using namespace grape::kernel;
}
namespace grape::cpu::detail {
using namespace grape::kernel;
}
