// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/rope.hpp"

template grape::check_report grape::check<grape::rope_interleaved>(const std::optional<grape::rope_interleaved::params>&,
                                                      const grape::check_options&);
