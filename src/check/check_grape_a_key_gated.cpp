// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/grape_a_gated.hpp"

template grape::check_report grape::check<grape::grape_a_key_gated>(const std::optional<grape::grape_a_key_gated::params>&,
                                                      const grape::check_options&);
