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

/// Tags a store's width in bytes.
template <std::size_t Bytes>
struct width {};

// The streaming store of each width this build has (each ISA implies the ones before it): `Bytes`
// bytes from src to a destination aligned to them, without reading the destination line.
#if defined(__SSE2__)
inline void stream_bytes(void* dst, const void* src, width<16>) {
  _mm_stream_si128(static_cast<__m128i*>(dst), _mm_loadu_si128(static_cast<const __m128i*>(src)));
}
#if defined(__AVX__)
inline void stream_bytes(void* dst, const void* src, width<32>) {
  _mm256_stream_si256(static_cast<__m256i*>(dst), _mm256_loadu_si256(static_cast<const __m256i*>(src)));
}
#if defined(__AVX512F__)
inline void stream_bytes(void* dst, const void* src, width<64>) {
  _mm512_stream_si512(static_cast<__m512i*>(dst), _mm512_loadu_si512(src));
}
#endif
#endif
#endif

/// Whether the build has a streaming store of `Bytes` bytes.
template <std::size_t Bytes>
inline constexpr bool streams = requires(void* dst, const void* src) { stream_bytes(dst, src, width<Bytes>{}); };

/// One packet (16, 32 or 64 bytes; Eigen packet or raw vector) to an address aligned to its size,
/// without reading the destination line; a plain store where the build has no streaming store of
/// that width.
template <class Packet>
inline void stream_packet(void* dst, const Packet& p) {
  if constexpr (streams<sizeof(Packet)>)
    stream_bytes(dst, &p, width<sizeof(Packet)>{});
  else
    std::memcpy(dst, &p, sizeof(Packet));
}

/// The widest streaming store of this build, in bytes (64, plain stores, without SSE2).
inline constexpr std::size_t stream_width = streams<64> ? 64 : streams<32> ? 32 : streams<16> ? 16 : 64;

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
