// The text both kinds of generated file share (template_parts.hpp).
#include "gen/template_parts.hpp"

#include <cctype>

namespace grape::gen::detail {

const char* const arguments_doc = R"(//   q, k       Q and K, rotated in place. Element (token t, head h, channel c) of Q is
//              q[t * q_token_stride + h * q_head_stride + c] (strides in elements, >= 0;
//              channels contiguous), the same for K. [tokens, heads, head_dim] has
//              token_stride = heads * head_dim, head_stride = head_dim; [heads, tokens, head_dim]
//              has token_stride = head_dim, head_stride = tokens * head_dim. The rows of one
//              tensor must not overlap: the smaller stride (of a count > 1) must be >= head_dim
//              and the larger >= that count times the smaller. Q and K must not overlap.
//              k may be null when k_heads == 0, q when q_heads == 0.
@POSITIONS_DOC@//   tokens, q_heads, k_heads   counts, >= 0 (grouped-query attention: k_heads < q_heads).
//   dtype      storage type of Q and K: 0 = float32, 1 = bfloat16, 2 = float16. Arithmetic is
//              float32; bf16 and f16 results are rounded to nearest even.
)";

const char* const tokens_positions_doc =
    "//   positions  tokens int64 positions, each >= 0 (any value up to 2^63 - 1: the phase is exact).\n";

const char* const shape_checks = R"(// Rows of one tensor (counts n_a, n_b with strides s_a, s_b) do not overlap.
inline bool rows_disjoint(std::int64_t n_a, std::int64_t s_a, std::int64_t n_b, std::int64_t s_b) {
  if (n_a <= 1) s_a = 0, n_a = 1;
  if (n_b <= 1) s_b = 0, n_b = 1;
  if (n_a == 1 && n_b == 1) return true;
  if (n_a == 1) return s_b >= kHeadDim;
  if (n_b == 1) return s_a >= kHeadDim;
  if (s_a > s_b || (s_a == s_b && n_a > n_b)) {
    const std::int64_t n = n_a, s = s_a;
    n_a = n_b, s_a = s_b, n_b = n, s_b = s;
  }
  return s_a >= kHeadDim && s_b / n_a >= s_a;
}

// 0: the counts, strides and pointers are usable; 1: a null pointer with a non-zero count;
// 2: a negative count or stride, or rows that overlap. Nothing is read through the pointers.
inline int check_shapes(const void* q, const void* k, const std::int64_t* positions, std::int64_t tokens,
                        std::int64_t q_heads, std::int64_t k_heads, std::int64_t q_token_stride,
                        std::int64_t q_head_stride, std::int64_t k_token_stride, std::int64_t k_head_stride) {
  if (tokens < 0 || q_heads < 0 || k_heads < 0 || q_token_stride < 0 || q_head_stride < 0 ||
      k_token_stride < 0 || k_head_stride < 0)
    return 2;
  if (tokens == 0) return 0;
  if (positions == nullptr || (q_heads > 0 && q == nullptr) || (k_heads > 0 && k == nullptr)) return 1;
  if ((q_heads > 0 && !rows_disjoint(tokens, q_token_stride, q_heads, q_head_stride)) ||
      (k_heads > 0 && !rows_disjoint(tokens, k_token_stride, k_heads, k_head_stride)))
    return 2;
  return 0;
}
)";

const char* const cpp_storage_io = R"(struct f32_io {
  using type = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};

// bfloat16 as raw bits: the top half of a float32; stores round to nearest even.
struct bf16_io {
  using type = std::uint16_t;
  static float load(std::uint16_t b) {
    const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  static std::uint16_t store(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
  }
};

#if defined(__FLT16_MANT_DIG__)
#define GRAPE_@UNAME@_HAVE_F16 1
struct f16_io {
  using type = _Float16;
  static float load(_Float16 x) { return static_cast<float>(x); }
  static _Float16 store(float x) { return static_cast<_Float16>(x); }
};
#endif
)";

const char* const cpp_token_loop = R"(  using T = typename IO::type;
  T* const qt = static_cast<T*>(q);
  T* const kt = static_cast<T*>(k);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (std::int64_t t = 0; t < tokens; ++t) {)";

const char* const cuda_bad_positions_doc = R"(//   int @ENTRY@_bad_positions(cudaStream_t stream);
//
//   Positions live on the device, so they are checked there: a token whose position is negative
//   is left untouched and a sticky flag (one per device) is raised. This call waits for `stream`,
//   returns 1 if the flag was raised by any launch since the previous call (0 if not, 5 on a CUDA
//   error) and clears it.
)";

const char* const cuda_bad_positions = R"(extern "C" int @ENTRY@_bad_positions(cudaStream_t stream) {
  int flag = 0;
  const int zero = 0;
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpyFromSymbolAsync(&flag, grape_@NAME@_detail::bad_position_flag, sizeof flag, 0,
                                cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaMemcpyToSymbolAsync(grape_@NAME@_detail::bad_position_flag, &zero, sizeof zero, 0,
                              cudaMemcpyHostToDevice, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return 5;
  return flag != 0 ? 1 : 0;
}
)";

// The entry points. Continuation lines are aligned for the generated text: rotate_tokens and
// encode_tokens have the same length, and @VIEW_ARG@ only lengthens the first line of a call.
const char* const cpp_entry = R"(extern "C" int @ENTRY@(void* q, void* k, const std::int64_t* positions, std::int64_t tokens,
    std::int64_t q_heads, std::int64_t k_heads, std::int64_t q_token_stride, std::int64_t q_head_stride,
    std::int64_t k_token_stride, std::int64_t k_head_stride, int dtype) {
  namespace d = grape_@NAME@_detail;
  if (dtype != 0 && dtype != 1 && dtype != 2) return 3;
#if !defined(GRAPE_@UNAME@_HAVE_F16)
  if (dtype == 2) return 3;
#endif
  if (const int e = d::check_shapes(q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                    q_head_stride, k_token_stride, k_head_stride))
    return e;
  if (tokens == 0) return 0;
@CHECK_POSITIONS@  if (q_heads == 0 && k_heads == 0) return 0;
@ENTRY_SETUP@  if (dtype == 0)
    d::@RUN_TOKENS@<d::f32_io>(@VIEW_ARG@q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                q_head_stride, k_token_stride, k_head_stride);
  else if (dtype == 1)
    d::@RUN_TOKENS@<d::bf16_io>(@VIEW_ARG@q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                 q_head_stride, k_token_stride, k_head_stride);
#if defined(GRAPE_@UNAME@_HAVE_F16)
  else
    d::@RUN_TOKENS@<d::f16_io>(@VIEW_ARG@q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                q_head_stride, k_token_stride, k_head_stride);
#endif
  return 0;
}
)";

const char* const cuda_entry = R"(extern "C" int @ENTRY@(void* q, void* k, const std::int64_t* positions, std::int64_t tokens,
    std::int64_t q_heads, std::int64_t k_heads, std::int64_t q_token_stride, std::int64_t q_head_stride,
    std::int64_t k_token_stride, std::int64_t k_head_stride, int dtype, cudaStream_t stream) {
  namespace d = grape_@NAME@_detail;
  if (dtype != 0 && dtype != 1 && dtype != 2) return 3;
  if (const int e = d::check_shapes(q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                    q_head_stride, k_token_stride, k_head_stride))
    return e;
  if (tokens == 0) return 0;
  constexpr std::int64_t int_max = 2147483647;
  if (tokens > int_max || q_heads + k_heads > @HEADS_LIMIT@) return 2;
  if (q_heads == 0 && k_heads == 0) return 0;
@ENTRY_SETUP@  const int qh = static_cast<int>(q_heads), kh = static_cast<int>(k_heads);
  if (dtype == 0)
    d::launch<float>(@VIEW_ARG@q, k, positions, tokens, qh, kh, q_token_stride, q_head_stride,
                     k_token_stride, k_head_stride, stream);
  else if (dtype == 1)
    d::launch<__nv_bfloat16>(@VIEW_ARG@q, k, positions, tokens, qh, kh, q_token_stride, q_head_stride,
                             k_token_stride, k_head_stride, stream);
  else
    d::launch<__half>(@VIEW_ARG@q, k, positions, tokens, qh, kh, q_token_stride, q_head_stride,
                      k_token_stride, k_head_stride, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
)";

std::map<std::string, std::string> shared_snippets() {
  return {{"ARGS_DOC", arguments_doc},
          {"SHAPE_CHECKS", shape_checks},
          {"CPP_IO", cpp_storage_io},
          {"CPP_TOKEN_LOOP", cpp_token_loop},
          {"CUDA_BAD_POSITIONS_DOC", cuda_bad_positions_doc},
          {"CUDA_BAD_POSITIONS", cuda_bad_positions},
          {"CPP_ENTRY", cpp_entry},
          {"CUDA_ENTRY", cuda_entry}};
}

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string tag = "@" + key + "@";
    for (std::size_t at = text.find(tag); at != std::string::npos; at = text.find(tag, at + value.size()))
      text.replace(at, tag.size(), value);
  }
  return text;
}

std::string include_lines(const std::vector<std::string>& std_includes) {
  std::string out;
  for (const auto& inc : std_includes)
    if (inc != "<cstdint>") out += "#include " + inc + "\n";
  return out;
}

std::string upper(const std::string& name) {
  std::string out;
  for (char c : name) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace grape::gen::detail
