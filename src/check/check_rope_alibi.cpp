// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/rope_alibi.hpp"

template grape::check_report grape::check<grape::rope_alibi>(const std::optional<grape::rope_alibi::params>&,
                                                      const grape::check_options&);
