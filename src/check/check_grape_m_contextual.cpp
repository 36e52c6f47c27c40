// The checker instantiated for one built-in (see include/grape/check/builtin_checks.hpp).
#include "grape/check/checker.hpp"
#include "grape/encodings/grape_m_contextual.hpp"

template grape::check_report grape::check<grape::grape_m_contextual>(
    const std::optional<grape::grape_m_contextual::params>&, const grape::check_options&);
