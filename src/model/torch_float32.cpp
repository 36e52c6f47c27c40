// The float32 operations of PyTorch's CPU kernels (torch_float32.hpp). Built with
// -ffp-contract=off (src/CMakeLists.txt): a fused multiply-add where torch rounds twice would
// change the last bit.
#include "model/torch_float32.hpp"

#include <sleef.h>

#include <cmath>
#include <cstddef>

namespace grape::torch_cpu {

namespace {

// ATen's vectorized loop steps by 2 × Vectorized<float>::size() = 16 under its AVX2 capability,
// the one it selects on x86-64 CPUs with AVX2 and FMA (torch.backends.cpu.get_cpu_capability()).
constexpr std::size_t vector_block = 16;

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

}  // namespace

std::vector<float> rope_exponents(int d) {
  std::vector<float> e(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) e[i] = static_cast<float>(2 * i) / static_cast<float>(d);
  return e;
}

std::vector<float> pow_scalar_base(float base, const std::vector<float>& exponents) {
  const std::size_t n = exponents.size();
  const std::size_t vectorized = cpu_has_avx2_fma() ? n - n % vector_block : 0;
  std::vector<float> out(n);
  // SLEEF's scalar FMA build evaluates exactly what each lane of Sleef_powf8_u10avx2 does.
  for (std::size_t i = 0; i < vectorized; ++i) out[i] = Sleef_powf1_u10purecfma(base, exponents[i]);
  for (std::size_t i = vectorized; i < n; ++i) out[i] = std::pow(base, exponents[i]);
  return out;
}

float pow_single(float base, double exponent) {
  return static_cast<float>(std::pow(static_cast<double>(base), exponent));
}

}  // namespace grape::torch_cpu
