// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/alibi.hpp"

template grape::check_report grape::check<grape::alibi>(const std::optional<grape::alibi::params>&,
                                                      const grape::check_options&);
