#pragma once
// The fused-attention kernels the module calls, one set per kernel instance type. Declared here;
// the module's own encoding kinds (attention.cpp: RoPE, ALiBi, T5, FoX, the paper's biases, ...) are
// explicitly instantiated in attention_kernels_*.cpp, a few instance types per translation unit, so
// that no unit compiles every flash loop (each is a forward, a backward and a decode, per dtype);
// any other built-in's in its own unit (builtin_kernels_one.cpp), a loaded type's in its library.
#include "cpu/attention_backward.hpp"
#include "cpu/attention_decode.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/encodings/fox.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/encodings/mrope.hpp"
#include "grape/encodings/rotary_table.hpp"
#include "grape/encodings/t5_buckets.hpp"
#include "grape/inject/compose.hpp"
#include "grape/inject/rotate_by_phase.hpp"

namespace grape::python {

using rotary_half = rotary_table<layout_kind::half_split>::instance;
using rotary_interleaved = rotary_table<layout_kind::interleaved>::instance;
using rotary_half_alibi = composed_instance<rotary_half, alibi::instance>;
using rotary_interleaved_alibi = composed_instance<rotary_interleaved, alibi::instance>;
using gated_grape_a = bias_instance<gated_linear_bias>;  // grape_a_key_gated and grape_a_qk_gated
using path_integral = bias_instance<path_integral_bias>;  // grape_ap_relative
// contextual GRAPE-M: phase_rotation itself

template <class I>
void run_attention(const I& inst, const cpu::attention_args& a);
template <class I>
void run_attention_backward(const I& inst, const cpu::attention_args& a, const cpu::attention_grad_args& g);
template <class I>
void run_attention_decode(const I& inst, const cpu::decode_args& a);

/// Explicit instantiation declarations (with EXTERN = extern) or definitions (with nothing) of the
/// three kernels for instance type I; a lift's without decode (it would need lifted keys in the cache).
#define GRAPE_PYTHON_ATTENTION_KERNELS_NO_DECODE(EXTERN, I)                                             \
  EXTERN template void run_attention<I>(const I&, const cpu::attention_args&);                          \
  EXTERN template void run_attention_backward<I>(const I&, const cpu::attention_args&,                  \
                                                 const cpu::attention_grad_args&);
#define GRAPE_PYTHON_ATTENTION_KERNELS(EXTERN, I)      \
  GRAPE_PYTHON_ATTENTION_KERNELS_NO_DECODE(EXTERN, I)  \
  EXTERN template void run_attention_decode<I>(const I&, const cpu::decode_args&);

// A library grape.load_encoding compiles has none of the module's instantiations to link against: it
// instantiates what its type needs itself (user_encoding.tpp defines GRAPE_PYTHON_OWN_KERNELS).
#ifndef GRAPE_PYTHON_OWN_KERNELS
GRAPE_PYTHON_ATTENTION_KERNELS(extern, cpu::no_encoding)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, rotary_half)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, rotary_interleaved)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, mrope::instance)  // a RotaryEncoding with M-RoPE's sections
GRAPE_PYTHON_ATTENTION_KERNELS(extern, alibi::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, fox::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, t5_buckets::instance)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, rotary_half_alibi)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, rotary_interleaved_alibi)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, gated_grape_a)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, path_integral)
GRAPE_PYTHON_ATTENTION_KERNELS(extern, phase_rotation)
#endif

}  // namespace grape::python
