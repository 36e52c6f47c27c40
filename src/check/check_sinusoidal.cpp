// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/sinusoidal.hpp"

template grape::check_report grape::check<grape::sinusoidal>(const std::optional<grape::sinusoidal::params>&,
                                                      const grape::check_options&);
