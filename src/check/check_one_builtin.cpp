// The checker instantiated for one built-in, GRAPE_CHECK_BUILTIN: src/CMakeLists.txt compiles this
// file once per name of the one list GRAPE_BUILTINS (grape/builtins.hpp), so compile time stays
// split per encoding and a new built-in needs no file here.
#include "grape/builtins.hpp"
#include "grape/check/checker.hpp"

#ifndef GRAPE_CHECK_BUILTIN
#error "grape: compile check_one_builtin.cpp with -DGRAPE_CHECK_BUILTIN=<a name of GRAPE_BUILTINS>"
#endif

template grape::check_report grape::check<grape::GRAPE_CHECK_BUILTIN>(
    const std::optional<grape::GRAPE_CHECK_BUILTIN::params>&, const grape::check_options&);
