// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/string_rope.hpp"

template grape::check_report grape::check<grape::string_rope>(const std::optional<grape::string_rope::params>&,
                                                      const grape::check_options&);
