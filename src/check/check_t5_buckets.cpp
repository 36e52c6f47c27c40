// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/t5_buckets.hpp"

template grape::check_report grape::check<grape::t5_buckets>(const std::optional<grape::t5_buckets::params>&,
                                                      const grape::check_options&);
