// Expected: "grape: cpu::attention takes a rotate_qk, lift_qk or score_bias encoding (or a composition)"
// Not expected: "error: .* has no member named"
#include "cpu/attention.hpp"
#include "grape/encodings/sinusoidal.hpp"

// An absolute embedding is added to the input; attention alone would silently drop it.
void run(const grape::cpu::attention_args& args) { grape::cpu::attention(grape::sinusoidal::make({8, 1e4}), args); }
