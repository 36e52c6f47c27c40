// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/fox.hpp"

template grape::check_report grape::check<grape::fox>(const std::optional<grape::fox::params>&,
                                                      const grape::check_options&);
