// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/learned_absolute.hpp"

template grape::check_report grape::check<grape::learned_absolute>(const std::optional<grape::learned_absolute::params>&,
                                                      const grape::check_options&);
