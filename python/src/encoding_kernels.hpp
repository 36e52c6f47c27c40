#pragma once
// What an encoding made from its parameters holds for the bindings: its instance behind
// type-erased calls of the kernels its injection takes, so that the bindings (the fused attention:
// attention.cpp) run it without knowing its type. Plain C++ (no Python types): a library that
// grape.load_encoding compiles for a user's own type makes one (user_encoding.tpp) and the module
// adopts it (user_encoding_loader.cpp), so the layout below is part of that library's interface:
// change it and bump encoding_kernels_abi.
#include <functional>
#include <string>
#include <vector>

#include "common/attention_args.hpp"
#include "cpu/attention_backward.hpp"
#include "cpu/attention_decode.hpp"
#include "cpu/embedding.hpp"
#include "cpu/lift_qk.hpp"
#include "cpu/score_bias.hpp"

namespace grape::python {

/// The version of encoding_kernels' layout; a loaded library built against another is refused.
inline constexpr int encoding_kernels_abi = 3;

struct encoding_kernels {
  std::string name, summary, injection, described;
  std::string params_json;  // every parameter, defaults filled in, as JSON (an object, or a list for unnamed ones)
  int head_dim = 0, num_axes = 1;
  std::function<void(const cpu::rotate_qk_args&, bool backward)> rotate;  // empty: no rotation
  std::function<void(const cpu::bias_tile&)> bias_tile;                   // empty: no score bias
  std::function<void(const cpu::embedding_rows&)> add_embedding;          // empty: no embedding
  // Q and K lifted (or, backward, their gradients from the lifted ones); empty: no lift.
  std::function<void(const cpu::rotate_qk_args&, const cpu::lifted_tensor&, const cpu::lifted_tensor&, bool)> lift;
  int bias_heads = 0;
  // The fused attention (cpu::attention, its backward for dQ, dK, dV and, where bias_parameters is
  // not empty, the bias's parameters, and decode over a paged cache); empty where the injection does
  // not enter attention (an embedding) or, for decode, a lift (it would need lifted keys in the cache).
  std::function<void(const cpu::attention_args&)> attention;
  std::function<void(const cpu::attention_args&, const cpu::attention_grad_args&)> attention_backward;
  std::function<void(const cpu::decode_args&)> attention_decode;
  // A score bias's own parameters (BiasWithParameters and a gradient: log-distance's slopes), and the
  // same encoding with other values of them; empty: none.
  std::vector<double> bias_parameters;
  std::function<encoding_kernels(const std::vector<double>&)> with_bias_parameters;
  // A rotation by planes on one position axis: each plane's frequency θ_i (radians per position),
  // whose gradient the fused attention's backward gives, and the same encoding with other θ; empty:
  // none (another representation: quaternions, scaled planes, ...).
  std::vector<double> frequencies;
  std::function<encoding_kernels(const std::vector<double>&)> with_frequencies;
};

}  // namespace grape::python
