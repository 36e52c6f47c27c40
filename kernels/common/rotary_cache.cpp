// The float32 cos/sin cache, built with the same exact phase as the on-the-fly path, so both
// paths give identical tables.
#include <cmath>
#include <string>

#include "common/qk_args.hpp"
#include "common/rotate_plan.hpp"
#include "grape/detail/error.hpp"
#include "grape/math/sincos.hpp"

namespace grape::kernel {

rotary_cache rotary_cache::build(const rotary_spec& spec, std::int64_t max_position,
                                 std::int64_t first_position) {
  check_rotary_spec(spec);
  if (first_position < 0) throw input_error("first_position is negative");
  if (max_position <= first_position) throw input_error("max_position must exceed first_position");
  const std::int64_t count = max_position - first_position;
  if (count > (std::int64_t{1} << 36) / spec.rotary_dim)
    throw input_error("max_position - first_position = " + std::to_string(count) +
                      " rows is too large for a cache");
  rotary_cache c;
  c.rotary_dim = spec.rotary_dim;
  c.first_position = first_position;
  c.max_position = max_position;
  c.attention_factor = spec.attention_factor;
  c.turn_fractions = turn_fractions_of(spec.inv_freq);
  c.rows.resize(static_cast<std::size_t>(count) * spec.rotary_dim);
  const int half = spec.rotary_dim / 2;
  const float factor = static_cast<float>(spec.attention_factor);
  float* rows = c.rows.data();
  const math::phase_t* f = c.turn_fractions.data();
  // One thread: the rows' page faults and zero fill take most of the time, not this loop (perf,
  // 131072 rows × 128 channels: 9 % here; two OpenMP threads gained nothing).
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int64_t m = first_position + r;
    float* row = rows + r * spec.rotary_dim;
    for (int i = 0; i < half; ++i) {
      const math::sin_cos sc = math::sincos_of_phase(math::phase_at(m, f[i]));
      row[i] = factor * sc.cos;
      row[half + i] = factor * sc.sin;
    }
  }
  return c;
}

}  // namespace grape::kernel
