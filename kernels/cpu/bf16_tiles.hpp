#pragma once
// bf16 tile products for the fused attention on AVX512-BF16 (VDPBF16PS: 32 bf16 pairs into 16
// float32 sums per instruction): C (float32) = or += A·B, A rounded to bf16 row by row, B packed
// once into the instruction's pair-interleaved (VNNI) layout. The bodies are in
// bf16_tiles_avx512.cpp, the one unit compiled with -mavx512bf16; call them only where
// matmul_path_for chose matmul_path::avx512_bf16 (cpu/matmul_path.hpp).
//
// Why by hand and not a library (docs/design.md): on the flash tiles (240×128·128×128, one
// thread) this kernel runs about as fast as libxsmm 1.17's JIT and faster than oneDNN 2.6's
// matmul primitive (docs/performance.md, "bf16 tiles on AVX512-BF16"); oneDNN's brgemm
// micro-kernel API, which PyTorch uses, is in neither Debian's oneDNN (2.6) nor PyPI's (built
// without DNNL_EXPERIMENTAL_UKERNEL), and Debian's OpenBLAS has no sbgemm. Sixty lines of
// intrinsics take any tile shape (masked edges) without a JIT per shape and add no dependency to
// grape's users.
#include <cstdint>
#include <vector>

namespace grape::cpu::detail::bf16 {

using element = std::uint16_t;  // a bfloat16's bits
using buffer = std::vector<element>;

/// Pairs of the depth (an odd depth is padded with a zero), and 16-column blocks of the columns.
inline std::int64_t pairs(std::int64_t depth) { return (depth + 1) / 2; }
inline std::int64_t column_blocks(std::int64_t cols) { return (cols + 15) / 16; }
/// Elements of an A row of `depth` (even: the padded pair), and of a packed B of depth × cols.
inline std::int64_t row_elements(std::int64_t depth) { return 2 * pairs(depth); }
inline std::int64_t packed_elements(std::int64_t depth, std::int64_t cols) {
  return pairs(depth) * column_blocks(cols) * 32;
}

/// Packs B [depth × cols], element (k, n) at b[k·k_stride + n·n_stride], rounded to bf16 (to
/// nearest even), into `out` (packed_elements(depth, cols)): for pair p and column block j, 32
/// elements at out[(p·column_blocks + j)·32], lane n holding (B[2p][16j + n], B[2p + 1][16j + n]);
/// the padding is zero. 15·n_stride must fit an int (the lanes' gather offsets).
void pack_b(element* out, const float* b, std::int64_t k_stride, std::int64_t n_stride, std::int64_t depth,
            std::int64_t cols);

/// Rounds A [rows × depth] (row r at a + r·lda) to bf16 rows of row_elements(depth) at out +
/// r·ld_out, the padding zero.
void round_rows(element* out, std::int64_t ld_out, const float* a, std::int64_t lda, std::int64_t rows,
                std::int64_t depth);

/// Rounds the transpose of A [depth × rows] (element (k, r) at a[k·lda + r]) to bf16 rows: out
/// row r holds A's column r, row_elements(depth) long, the padding zero. 15·lda must fit an int.
void round_columns(element* out, std::int64_t ld_out, const float* a, std::int64_t lda, std::int64_t rows,
                   std::int64_t depth);

/// C [rows × cols] (row r at c + r·ldc) = A·B, or += when `accumulate`: A as round_rows wrote it
/// (ld elements apart), B as pack_b packed it; float32 sums. With `toeplitz`, C[r][c] also gets
/// toeplitz[c − r] (read from toeplitz[1 − rows] to toeplitz[cols − 1]) added as the sums are
/// stored: a bias of the offset n − m (ALiBi, T5) without a pass of its own over C, bit for bit
/// what adding it after the product gives.
void multiply(float* c, std::int64_t ldc, const element* a, std::int64_t lda, const element* b, std::int64_t rows,
              std::int64_t cols, std::int64_t depth, bool accumulate, const float* toeplitz = nullptr);

}  // namespace grape::cpu::detail::bf16
