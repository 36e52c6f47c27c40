// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/axial_2d.hpp"

template grape::check_report grape::check<grape::axial_2d>(const std::optional<grape::axial_2d::params>&,
                                                      const grape::check_options&);
