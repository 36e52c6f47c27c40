// The checker for a model's rotary table, one instantiation per layout.
#include "grape/check/rotary.hpp"

#include "grape/check/checker.hpp"
#include "grape/encodings/rotary_table.hpp"

template grape::check_report grape::check<grape::rotary_table<grape::layout_kind::half_split>>(
    const std::optional<grape::rotary_spec>&, const grape::check_options&);
template grape::check_report grape::check<grape::rotary_table<grape::layout_kind::interleaved>>(
    const std::optional<grape::rotary_spec>&, const grape::check_options&);

namespace grape {

check_report check_rotary(const rotary_spec& spec, const check_options& options) {
  if (spec.layout == layout_kind::interleaved) return check<rotary_table<layout_kind::interleaved>>(spec, options);
  return check<rotary_table<layout_kind::half_split>>(spec, options);
}

}  // namespace grape
