// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/mrope.hpp"

template grape::check_report grape::check<grape::mrope>(const std::optional<grape::mrope::params>&,
                                                      const grape::check_options&);
