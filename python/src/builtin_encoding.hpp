#pragma once
// What a grape.encoding(name, **params) object holds (builtin_encoding.cpp makes it): the built-in's
// instance behind type-erased calls of the kernels its injection takes, so that the other bindings
// (the fused attention: attention.cpp) run it without knowing its type.
#include <nanobind/nanobind.h>

#include <functional>
#include <string>

#include "cpu/attention_args.hpp"
#include "cpu/attention_decode.hpp"
#include "cpu/embedding.hpp"
#include "cpu/lift_qk.hpp"
#include "cpu/score_bias.hpp"

namespace grape::python {

struct builtin_encoding {
  std::string name, summary, injection, described;
  nanobind::dict params;
  int head_dim = 0, num_axes = 1;
  std::function<void(const cpu::rotate_qk_args&, bool backward)> rotate;  // empty: no rotation
  std::function<void(const cpu::bias_tile&)> bias_tile;                   // empty: no score bias
  std::function<void(const cpu::embedding_rows&)> add_embedding;          // empty: no embedding
  // Q and K lifted (or, backward, their gradients from the lifted ones); empty: no lift.
  std::function<void(const cpu::rotate_qk_args&, const cpu::lifted_tensor&, const cpu::lifted_tensor&, bool)> lift;
  int bias_heads = 0;
  // The fused attention (cpu::attention, its backward for dQ, dK, dV, and decode over a paged
  // cache); empty where the injection does not enter attention (an embedding) or, for decode, a
  // lift (it would need lifted keys in the cache).
  std::function<void(const cpu::attention_args&)> attention;
  std::function<void(const cpu::attention_args&, const cpu::attention_grad_args&)> attention_backward;
  std::function<void(const cpu::decode_args&)> attention_decode;
};

}  // namespace grape::python
