#pragma once
// The host steps of cuda::attention and cuda::attention_decode that the emulation tests share: a
// random instance whose head_dim the CUDA tiles take, and the rotation the device applies, run on
// the host (the device's rotation is the CPU kernel's: encode_qk, rotate_qk and GRAPE-M emulation
// tests), with contextual GRAPE-M's phases gathered by the device body.
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "cpu/attention_backward.hpp"
#include "cuda/attention_host_steps.hpp"
#include "cuda/phase_gather_thread.hpp"
#include "grape/detail/random.hpp"
#include "grape/view/kernel_traits.hpp"

namespace grape::emulation {

template <class I>
constexpr bool rotates = rotates_qk_part<I> || cpu::rotates_by_phase<I>;

/// The rotation planes of an instance's rotation (RoPE and its kin), which have frequencies.
template <class I>
std::optional<rotary_spec> plane_spec_of(const I& inst) {
  if constexpr (rotates_qk_part<I>) {
    const auto& rotation = rotation_part(inst);
    return kernel_traits<decltype(rotation.rep)>::plane_spec(rotation);
  } else {
    return std::nullopt;
  }
}

/// Contextual GRAPE-M's spec with the call's phases gathered by the device body over its items.
struct gathered_phases {
  std::vector<double> values;
  cpu::grape_m_spec spec;
};
inline gathered_phases gather_phases(const phase_rotation& r, const cpu::qk_args& qk, std::int64_t total) {
  gathered_phases g;
  const cuda::phase_table_call call{r.phase_rows, r.length, cuda::position_source_of(qk), total};
  g.values.assign(static_cast<std::size_t>(call.items()), std::numeric_limits<double>::quiet_NaN());
  int error = 0;
  const cuda::phase_gather gather{call, r.phases.data(), g.values.data(), &error};
  for (std::int64_t item = 0; item < call.items(); ++item) gather(item);
  RC_ASSERT(error == 0);
  g.spec = kernel::grape_m_spec_of(r);
  g.spec.phases = g.values.data();
  return g;
}

/// The rotation cuda::attention applies, into q_rot and k_rot (the inputs' strides): the rotary
/// kernel (the device's is the CPU's: encode_qk_emulation_test), or for contextual GRAPE-M
/// GRAPE-M's kernel (the device's is the CPU's: grape_m_emulation_test) on the phases gathered.
template <class I, class T>
void rotate_as_the_device(const I& inst, const cpu::qk_args& qk, std::int64_t total, T* q_rot, T* k_rot) {
  if constexpr (cpu::rotates_by_phase<I>)
    cpu::grape_m_rotate_qk(gather_phases(inst, qk, total).spec,
                           cuda::rotation_into(kernel::without_positions(qk), q_rot, k_rot));
  else if constexpr (rotates<I>)
    cpu::rotate_qk(rotation_part(inst), cuda::rotation_into(qk, q_rot, k_rot));
}

/// A random instance of E whose head_dim the flash tiles take (a multiple of 16).
template <class E>
typename E::instance instance_of(std::mt19937_64& rng) {
  auto p = E::random_params(rng);
  const auto round_up = [](int d) { return std::max(16, (d + 15) / 16 * 16); };
  if constexpr (requires { p.phases; }) {  // contextual GRAPE-M: θ's rows redrawn for the new width
    const std::size_t rows = p.freqs.size() / static_cast<std::size_t>(p.head_dim / 2);
    p.head_dim = round_up(p.head_dim);
    p.freqs.resize(rows * static_cast<std::size_t>(p.head_dim / 2));
    for (auto& f : p.freqs) f = detail::log_uniform(rng, 1e-4, 2.0);
  } else if constexpr (requires { p.head_dim; }) p.head_dim = round_up(p.head_dim);
  else if constexpr (requires { p.rotary.head_dim; }) p.rotary.head_dim = round_up(p.rotary.head_dim);
  return E::make(p);
}

}  // namespace grape::emulation
