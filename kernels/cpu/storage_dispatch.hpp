#pragma once
// A dtype to its storage type: with_storage(type, body) calls body.template operator()<T>() with
// T = float, Eigen::half or Eigen::bfloat16, so that one generic body serves every dtype.
#include <Eigen/Core>

#include "cpu/rotate_qk.hpp"

namespace grape::cpu::detail {

template <class Body>
void with_storage(dtype t, Body&& body) {
  switch (t) {
    case dtype::f32: return body.template operator()<float>();
    case dtype::f16: return body.template operator()<Eigen::half>();
    case dtype::bf16: return body.template operator()<Eigen::bfloat16>();
  }
}

}  // namespace grape::cpu::detail
