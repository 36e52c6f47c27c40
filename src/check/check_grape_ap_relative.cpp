// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/grape_ap.hpp"

template grape::check_report grape::check<grape::grape_ap_relative>(const std::optional<grape::grape_ap_relative::params>&,
                                                      const grape::check_options&);
