// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/xpos.hpp"

template grape::check_report grape::check<grape::xpos>(const std::optional<grape::xpos::params>&,
                                                      const grape::check_options&);
