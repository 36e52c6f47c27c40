// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/grape_a.hpp"

template grape::check_report grape::check<grape::grape_a>(const std::optional<grape::grape_a::params>&,
                                                      const grape::check_options&);
