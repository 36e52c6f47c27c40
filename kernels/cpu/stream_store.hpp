#pragma once
// Non-temporal ("streaming") stores of whole 64-byte lines, for out-of-place kernels whose output
// is larger than the cache: an ordinary store first reads the destination line into the cache
// (read-for-ownership) and later writes it back, so a kernel that reads x and writes y moves three
// lines per line of y; a streaming store writes the line without reading it, so two
// (docs/performance.md has the measured effect).
// x86 only (SSE2 at least); elsewhere plain stores, which are correct, only slower.
#include <cstddef>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace grape::cpu::detail {

inline constexpr std::size_t stream_line_bytes = 64;

/// Copies `bytes` (a multiple of 64) from a 64-byte-aligned local buffer to a 64-byte-aligned
/// destination without reading the destination lines. Call stream_fence() before the data is
/// handed to another thread.
inline void stream_lines(const void* src, void* dst, std::size_t bytes) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
#if defined(__AVX512F__)
  for (std::size_t i = 0; i < bytes; i += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i),
                        _mm512_load_si512(reinterpret_cast<const __m512i*>(s + i)));
#elif defined(__AVX__)
  for (std::size_t i = 0; i < bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(s + i)));
#elif defined(__SSE2__)
  for (std::size_t i = 0; i < bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_load_si128(reinterpret_cast<const __m128i*>(s + i)));
#else
  std::memcpy(d, s, bytes);
#endif
}

/// One packet (16, 32 or 64 bytes; Eigen packet or raw vector) to an address aligned to its size,
/// without reading the destination line.
template <class Packet>
inline void stream_packet(void* dst, const Packet& p) {
#if defined(__AVX512F__)
  if constexpr (sizeof(Packet) == 64) {
    __m512i v;
    std::memcpy(&v, &p, 64);
    _mm512_stream_si512(static_cast<__m512i*>(dst), v);
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (sizeof(Packet) == 32) {
    __m256i v;
    std::memcpy(&v, &p, 32);
    _mm256_stream_si256(static_cast<__m256i*>(dst), v);
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (sizeof(Packet) == 16) {
    __m128i v;
    std::memcpy(&v, &p, 16);
    _mm_stream_si128(static_cast<__m128i*>(dst), v);
    return;
  }
#endif
  std::memcpy(dst, &p, sizeof(Packet));
}

/// Orders this thread's streaming stores before its later stores (they are weakly ordered).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace grape::cpu::detail
