#pragma once
// Widening loads and narrowing stores of a run of channels between the storage type and float32
// (round to nearest even), through Eigen's half/bfloat16 packet conversions (F16C vcvtph2ps /
// vcvtps2ph, AVX-512 BF16 vcvtneps2bf16, or Eigen's integer rounding where the ISA lacks them).
// Written against Eigen's packet API rather than `.cast<float>()`: GCC 12 compiles Eigen 3.4's
// array cast of bfloat16 to one scalar load per element, while the packet form is one or two
// instructions per 16 elements (docs/performance.md, appendix "Rotary kernels"). Also the pair
// swap of the interleaved packet rotation.
#include <Eigen/Core>
#include <complex>
#include <type_traits>

// Packet types are vector types with attributes; passing them as template arguments is what
// Eigen itself does (and silences the same way).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace grape::cpu::detail {

template <class Storage>
struct storage_packets {
  using storage = typename Eigen::internal::packet_traits<Storage>::type;
  using wide = typename Eigen::internal::packet_traits<float>::type;
  static constexpr int width = Eigen::internal::unpacket_traits<storage>::size;
  // Vectorized when the storage packet holds as many lanes as a float packet.
  static constexpr bool vectorized =
      width > 1 && width == Eigen::internal::unpacket_traits<wide>::size;
  // The complex-float packet of the float packet's width, when there is one (then swap_pairs).
  using complex_wide = typename Eigen::internal::packet_traits<std::complex<float>>::type;
  static constexpr bool pairs_swappable =
      !std::is_same_v<complex_wide, std::complex<float>> && sizeof(complex_wide) == sizeof(wide) &&
      Eigen::internal::unpacket_traits<wide>::size > 1;
};

/// Swaps the two floats of every pair in a float packet (x0 x1 x2 x3 … → x1 x0 x3 x2 …), through
/// Eigen's complex-float packet of the same width (pcplxflip).
template <class F>
inline F swap_pairs(const F& v) {
  using C = typename Eigen::internal::packet_traits<std::complex<float>>::type;
  return Eigen::internal::pcplxflip(C(v)).v;
}

/// Converts n elements between float32 and a storage type, one side float: whole packets, then
/// the tail one element at a time. Narrowing rounds to nearest even.
template <class In, class Out>
inline void convert_n(const In* in, Out* out, int n) {
  constexpr bool widens = std::is_same_v<Out, float>;
  using Storage = std::conditional_t<widens, In, Out>;
  using P = storage_packets<Storage>;
  int i = 0;
  if constexpr (!std::is_same_v<Storage, float> && P::vectorized) {
    using From = std::conditional_t<widens, typename P::storage, typename P::wide>;
    using To = std::conditional_t<widens, typename P::wide, typename P::storage>;
    for (; i + P::width <= n; i += P::width)
      Eigen::internal::pstoreu(out + i, Eigen::internal::pcast<From, To>(Eigen::internal::ploadu<From>(in + i)));
  }
  for (; i < n; ++i) out[i] = static_cast<Out>(in[i]);
}

/// Widens n elements to float32.
template <class Storage>
inline void widen_n(const Storage* in, float* out, int n) {
  convert_n(in, out, n);
}

/// Narrows n float32 values to the storage type (round to nearest even).
template <class Storage>
inline void narrow_n(const float* in, Storage* out, int n) {
  convert_n(in, out, n);
}

/// widen / narrow of a compile-time count N (the specialised dims): the same loops, unrolled.
template <class Storage, int N>
inline void widen(const Storage* in, float* out) {
  widen_n(in, out, N);
}

template <class Storage, int N>
inline void narrow(const float* in, Storage* out) {
  narrow_n(in, out, N);
}

}  // namespace grape::cpu::detail

#pragma GCC diagnostic pop
