#pragma once
// Eigen's GEMM building blocks — its packing routines and its register-blocked kernel (gebp) —
// with the packing under the caller's control. An Eigen product packs both operands on every call;
// the flash forward multiplies the same K and V tiles with every query block and the same query
// block with every key tile, so it packs each K and V tile once per sequence and each query block
// once, which saves repacking both for every pair (docs/performance.md, appendix "Fused
// attention"). This is Eigen 3.4's internal API (the one its own products call), hence one small
// header: the rest of grape sees pack_lhs / pack_rhs / multiply_add and a buffer type.
#include <Eigen/Core>
#include <cstdint>
#include <vector>

namespace grape::cpu::detail::packed {

using index = Eigen::Index;
using traits = Eigen::internal::gebp_traits<float, float>;
template <int Order>
using source = Eigen::internal::const_blas_data_mapper<float, index, Order>;
using result = Eigen::internal::blas_data_mapper<float, index, Eigen::ColMajor, Eigen::Unaligned, 1>;

/// Packed operands: the kernel loads the lhs with aligned packet loads, so every lhs block starts
/// on a packet boundary (Eigen's allocator aligns the buffer, lhs_floats rounds each block).
using buffer = std::vector<float, Eigen::aligned_allocator<float>>;

/// Packed blocks of one kind: `per_head` blocks of `floats` floats for each head, one buffer.
struct blocks {
  buffer data;
  std::int64_t per_head = 0, floats = 0;
  void shape(std::int64_t heads, std::int64_t count, std::int64_t block_floats) {
    per_head = count, floats = block_floats;
    data.resize(static_cast<std::size_t>(heads * count * block_floats));
  }
  float* at(std::int64_t head, std::int64_t block) { return data.data() + (head * per_head + block) * floats; }
  const float* at(std::int64_t head, std::int64_t block) const {
    return data.data() + (head * per_head + block) * floats;
  }
};

/// Columns per panel of a packed rhs: a packed rhs of n columns can be read from column c0 on, as
/// a block of m columns, when c0 is a multiple of this and c0 + m is too or is n.
inline constexpr index rhs_panel = traits::nr;

/// Floats an lhs block of rows × depth takes in a buffer of consecutive blocks.
inline index lhs_floats(index rows, index depth) {
  constexpr index packet = Eigen::internal::packet_traits<float>::size;
  return (rows * depth + packet - 1) / packet * packet;
}

/// Packs the lhs A [rows × depth], element (r, k) at a[r·ld + k] (RowMajor) or a[k·ld + r]
/// (ColMajor), into block (lhs_floats(rows, depth) floats, aligned).
template <int Order>
void pack_lhs(float* block, const float* a, index ld, index rows, index depth) {
  Eigen::internal::gemm_pack_lhs<float, index, source<Order>, traits::mr, traits::LhsProgress,
                                 typename traits::LhsPacket4Packing, Order>
      pack;
  pack(block, source<Order>(a, ld), depth, rows);
}

/// Packs the rhs B [depth × cols], element (k, c) at b[c·ld + k] (ColMajor) or b[k·ld + c]
/// (RowMajor), into block (depth·cols floats).
template <int Order = Eigen::ColMajor>
void pack_rhs(float* block, const float* b, index ld, index depth, index cols) {
  Eigen::internal::gemm_pack_rhs<float, index, source<Order>, traits::nr, Order> pack;
  pack(block, source<Order>(b, ld), depth, cols);
}

/// C += A·B for A [rows × depth] and B [depth × cols] packed as above; element (r, c) of C at
/// c_data[c·ldc + r].
inline void multiply_add(float* c_data, index ldc, const float* a, const float* b, index rows, index depth,
                         index cols) {
  Eigen::internal::gebp_kernel<float, float, index, result, traits::mr, traits::nr> kernel;
  kernel(result(c_data, ldc), a, b, rows, depth, cols, 1.0f);
}

}  // namespace grape::cpu::detail::packed

namespace grape::cpu::detail {

/// Floats per cache line; n floats rounded up to whole lines; p moved up to a line boundary (the
/// parts of a thread's scratch start on lines: unaligned score rows slow the forward;
/// docs/performance.md, appendix "Fused attention").
inline constexpr std::int64_t cache_line_floats = 16;
inline std::int64_t line_floats(std::int64_t n) { return (n + cache_line_floats - 1) / cache_line_floats * cache_line_floats; }
inline float* align_to_line(float* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  return p + (-address % (cache_line_floats * sizeof(float))) / sizeof(float);
}

}  // namespace grape::cpu::detail
