#pragma once
// Non-temporal ("streaming") stores of whole 64-byte lines, for out-of-place kernels whose output
// is larger than the cache: an ordinary store first reads the destination line into the cache
// (read-for-ownership) and later writes it back, so a kernel that reads x and writes y moves three
// lines per line of y; a streaming store writes the line without reading it, so two
// (docs/performance.md has the measured effect).
// x86 only (SSE2 at least); elsewhere plain stores, which are correct, only slower.
#include <cstddef>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace grape::cpu::detail {

inline constexpr std::size_t stream_line_bytes = 64;

// The streaming store of each vector width this build has (each ISA implies the ones before it).
#if defined(__SSE2__)
inline void stream_vector(__m128i* dst, __m128i v) { _mm_stream_si128(dst, v); }
#if defined(__AVX__)
inline void stream_vector(__m256i* dst, __m256i v) { _mm256_stream_si256(dst, v); }
#if defined(__AVX512F__)
inline void stream_vector(__m512i* dst, __m512i v) { _mm512_stream_si512(dst, v); }
#endif
#endif
#endif

/// One packet (16, 32 or 64 bytes; Eigen packet or raw vector) to an address aligned to its size,
/// without reading the destination line; a plain store where the build has no streaming store of
/// that width.
template <class Packet>
inline void stream_packet(void* dst, const Packet& p) {
#if defined(__SSE2__)
  constexpr std::size_t n = sizeof(Packet);
  using vector = std::conditional_t<n == 64, __m512i, std::conditional_t<n == 32, __m256i, __m128i>>;
  if constexpr ((n == 16 || n == 32 || n == 64) && requires(vector* d, vector v) { stream_vector(d, v); }) {
    vector v;
    std::memcpy(&v, &p, n);
    stream_vector(static_cast<vector*>(dst), v);
    return;
  }
#endif
  std::memcpy(dst, &p, sizeof(Packet));
}

/// The widest streaming store of this build, in bytes (plain stores without SSE2).
inline constexpr std::size_t stream_width =
#if defined(__AVX512F__)
    64;
#elif defined(__AVX__)
    32;
#elif defined(__SSE2__)
    16;
#else
    64;
#endif

/// Copies `bytes` (a multiple of 64) from a 64-byte-aligned local buffer to a 64-byte-aligned
/// destination without reading the destination lines. Call stream_fence() before the data is
/// handed to another thread.
inline void stream_lines(const void* src, void* dst, std::size_t bytes) {
  struct alignas(stream_width) chunk {
    unsigned char b[stream_width];
  };
  const auto* from = static_cast<const chunk*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < bytes / stream_width; ++i) stream_packet(to + i * stream_width, from[i]);
}

/// Orders this thread's streaming stores before its later stores (they are weakly ordered).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace grape::cpu::detail
