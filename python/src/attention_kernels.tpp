#pragma once
// The definitions behind attention_kernels.hpp, included by the units that instantiate them.
#include "attention_kernels.hpp"

namespace grape::python {

template <class I>
void run_attention(const I& inst, const cpu::attention_args& a) {
  cpu::attention(inst, a);
}

template <class I>
void run_attention_backward(const I& inst, const cpu::attention_args& a, const cpu::attention_grad_args& g) {
  cpu::attention_backward(inst, a, g);
}

template <class I>
void run_attention_decode(const I& inst, const cpu::decode_args& a) {
  cpu::attention_decode(inst, a);
}

}  // namespace grape::python
