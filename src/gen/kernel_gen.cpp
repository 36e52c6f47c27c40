// grape gen: the generated source files (kernel_gen.hpp). The templates below are filled by
// @NAME@-style substitution; the element math between them is the embedded library text.
#include "gen/kernel_gen.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <map>

#include "gen/embedded_headers.hpp"
#include "grape/detail/error.hpp"
#include "grape/math/phase.hpp"
#include "grape/schedule/spec_check.hpp"

namespace grape::gen {

namespace {

// ---------------------------------------------------------------------------------------------
// Shared by both targets: the header comment's description of the entry point's arguments.
constexpr const char* arguments_doc = R"(//   q, k       Q and K, rotated in place. Element (token t, head h, channel c) of Q is
//              q[t * q_token_stride + h * q_head_stride + c] (strides in elements, >= 0;
//              channels contiguous), the same for K. [tokens, heads, head_dim] has
//              token_stride = heads * head_dim, head_stride = head_dim; [heads, tokens, head_dim]
//              has token_stride = head_dim, head_stride = tokens * head_dim. The rows of one
//              tensor must not overlap: the smaller stride (of a count > 1) must be >= head_dim
//              and the larger >= that count times the smaller. Q and K must not overlap.
//              k may be null when k_heads == 0, q when q_heads == 0.
//   positions  tokens int64 positions, each >= 0 (any value up to 2^63 - 1: the phase is exact).
//   tokens, q_heads, k_heads   counts, >= 0 (grouped-query attention: k_heads < q_heads).
//   dtype      storage type of Q and K: 0 = float32, 1 = bfloat16, 2 = float16. Arithmetic is
//              float32; bf16 and f16 results are rounded to nearest even.
)";

constexpr const char* math_doc = R"(// What it computes, for each token t, head h and plane i < rotary_dim / 2, with m = positions[t]:
//   (c0, c1) = @LAYOUT_PAIR@
//   cos_i = attention_factor * cos(m * theta_i),  sin_i = attention_factor * sin(m * theta_i)
//   x[c0], x[c1] <- x[c0] * cos_i - x[c1] * sin_i,  x[c1] * cos_i + x[c0] * sin_i
// Channels rotary_dim .. head_dim - 1 are left as they are. The angle is exact: theta_i is held as
// a 64-bit fraction of a turn and m * theta_i is one integer multiply mod 2^64 (grape/math/
// phase.hpp); sin and cos come from grape/math/sincos.hpp (about 1 float32 ulp), the rotation from
// grape/math/rotate.hpp. attention_factor multiplies cos and sin of both Q and K (logits scale by
// its square). The math below is the grape library's own header text, embedded by `grape gen`.
)";

// ---------------------------------------------------------------------------------------------
// The model's constants, both targets (each declares kTurnFractions right after it).
constexpr const char* model_constants = R"(constexpr int kHeadDim = @HEAD_DIM@;
constexpr int kRotaryDim = @ROTARY_DIM@;
constexpr int kHalf = kRotaryDim / 2;
constexpr grape::math::layout_kind kLayout = grape::math::layout_kind::@LAYOUT@;
constexpr double kAttentionFactor = @AF@;
constexpr float kFactor = static_cast<float>(kAttentionFactor);

// Plane i turns by theta_i radians per position; kTurnFractions[i] = round(theta_i / 2pi * 2^64).)";

// ---------------------------------------------------------------------------------------------
// The argument checks both targets' entry points share (kHeadDim comes from the template).
constexpr const char* shape_checks = R"(// Rows of one tensor (counts n_a, n_b with strides s_a, s_b) do not overlap.
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

constexpr const char* cpp_template = R"(// Generated by `grape gen --target cpp`: rotary position encoding (RoPE) for one model.
// Do not edit; regenerate instead.
@PROVENANCE@//
// Baked in: head_dim @HEAD_DIM@, rotary_dim @ROTARY_DIM@, layout @LAYOUT@, attention_factor @AF_TEXT@,
// and the @HALF@ per-plane frequencies as exact turn fractions (kTurnFractions below).
//
// Entry point (C linkage; C++17 and the standard library only):
//
//   int @ENTRY@(void* q, void* k, const int64_t* positions, int64_t tokens,
//       int64_t q_heads, int64_t k_heads, int64_t q_token_stride, int64_t q_head_stride,
//       int64_t k_token_stride, int64_t k_head_stride, int dtype);
//
@ARGS_DOC@//              float16 needs a compiler with _Float16 (GCC >= 12 or Clang on x86-64 and
//              AArch64); elsewhere dtype 2 returns 3.
//   returns    0 done; 1 a null pointer with a non-zero count; 2 a negative count or stride, or
//              rows that would overlap; 3 an unknown (or here unsupported) dtype; 4 a negative
//              position. When it returns non-zero, nothing has been written.
//
@MATH_DOC@//
// Threads: compiled with -fopenmp, tokens are split over OpenMP threads; each token's cos/sin
// table is computed once and shared by all its heads of Q and K.
#include <cstddef>
#include <cstdint>
#include <cstring>
@STD_INCLUDES@
namespace grape_@NAME@_detail {

@MATH@
@MODEL_CONSTANTS@
constexpr std::uint64_t kTurnFractions[kHalf] = {
@FRACTIONS@};

struct f32_io {
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

// The token's table: cos_i and sin_i, times the attention factor.
inline void token_table(std::int64_t position, float* cs, float* sn) {
  for (int i = 0; i < kHalf; ++i) {
    const grape::math::sin_cos sc =
        grape::math::sincos_of_phase(grape::math::phase_at(position, kTurnFractions[i]));
    cs[i] = kFactor * sc.cos;
    sn[i] = kFactor * sc.sin;
  }
}

template <class IO>
inline void rotate_heads(typename IO::type* x0, std::int64_t heads, std::int64_t head_stride,
                         const float* cs, const float* sn) {
  for (std::int64_t h = 0; h < heads; ++h) {
    typename IO::type* x = x0 + h * head_stride;
    for (int i = 0; i < kHalf; ++i) {
      const int c0 = grape::math::first_channel(kLayout, i, kRotaryDim);
      const int c1 = grape::math::second_channel(kLayout, i, kRotaryDim);
      const grape::math::pair2<float> r =
          grape::math::rotate_pair(IO::load(x[c0]), IO::load(x[c1]), sn[i], cs[i]);
      x[c0] = IO::store(r.first);
      x[c1] = IO::store(r.second);
    }
  }
}

template <class IO>
void rotate_tokens(void* q, void* k, const std::int64_t* positions, std::int64_t tokens,
                   std::int64_t q_heads, std::int64_t k_heads, std::int64_t q_token_stride,
                   std::int64_t q_head_stride, std::int64_t k_token_stride,
                   std::int64_t k_head_stride) {
  using T = typename IO::type;
  T* const qt = static_cast<T*>(q);
  T* const kt = static_cast<T*>(k);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (std::int64_t t = 0; t < tokens; ++t) {
    float cs[kHalf], sn[kHalf];
    token_table(positions[t], cs, sn);
    if (q_heads > 0) rotate_heads<IO>(qt + t * q_token_stride, q_heads, q_head_stride, cs, sn);
    if (k_heads > 0) rotate_heads<IO>(kt + t * k_token_stride, k_heads, k_head_stride, cs, sn);
  }
}

@SHAPE_CHECKS@
}  // namespace grape_@NAME@_detail

extern "C" int @ENTRY@(void* q, void* k, const std::int64_t* positions, std::int64_t tokens,
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
  for (std::int64_t t = 0; t < tokens; ++t)
    if (positions[t] < 0) return 4;
  if (q_heads == 0 && k_heads == 0) return 0;
  if (dtype == 0)
    d::rotate_tokens<d::f32_io>(q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                q_head_stride, k_token_stride, k_head_stride);
  else if (dtype == 1)
    d::rotate_tokens<d::bf16_io>(q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                 q_head_stride, k_token_stride, k_head_stride);
#if defined(GRAPE_@UNAME@_HAVE_F16)
  else
    d::rotate_tokens<d::f16_io>(q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                q_head_stride, k_token_stride, k_head_stride);
#endif
  return 0;
}
)";

// ---------------------------------------------------------------------------------------------
constexpr const char* cuda_template = R"(// Generated by `grape gen --target cuda`: rotary position encoding (RoPE) for one model.
// Do not edit; regenerate instead.
@PROVENANCE@//
// Baked in: head_dim @HEAD_DIM@, rotary_dim @ROTARY_DIM@, layout @LAYOUT@, attention_factor @AF_TEXT@,
// and the @HALF@ per-plane frequencies as exact turn fractions (kTurnFractions below).
// Build: nvcc -std=c++17 -arch=sm_80 (or sm_90, ...) -c this file; needs only the CUDA runtime.
//
// Entry points (C linkage):
//
//   int @ENTRY@(void* q, void* k, const int64_t* positions, int64_t tokens,
//       int64_t q_heads, int64_t k_heads, int64_t q_token_stride, int64_t q_head_stride,
//       int64_t k_token_stride, int64_t k_head_stride, int dtype, cudaStream_t stream);
//
//   Enqueues the rotation on `stream` and returns without waiting. q, k and positions are device
//   pointers; everything else is as below.
@ARGS_DOC@//   returns    0 launched; 1 a null pointer with a non-zero count; 2 a negative count or
//              stride, rows that would overlap, tokens > 2^31 - 1 or (q_heads + k_heads) *
//              rotary_dim / 2 > 2^31 - 1; 3 an unknown dtype; 5 the launch failed (the CUDA error
//              is cleared with cudaGetLastError). When it returns non-zero, nothing was enqueued.
//
//   int @ENTRY@_bad_positions(cudaStream_t stream);
//
//   Positions live on the device, so they are checked there: a token whose position is negative
//   is left untouched and a sticky flag (one per device) is raised. This call waits for `stream`,
//   returns 1 if the flag was raised by any launch since the previous call (0 if not, 5 on a CUDA
//   error) and clears it.
//
@MATH_DOC@//
// One thread block per token: its threads compute the token's cos/sin table once into shared
// memory, then rotate every plane of every head of Q and K with it.
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
@STD_INCLUDES@
namespace grape_@NAME@_detail {

@MATH@
constexpr int kMaxThreads = 256;
@MODEL_CONSTANTS@
__device__ const std::uint64_t kTurnFractions[kHalf] = {
@FRACTIONS@};

__device__ int bad_position_flag = 0;

template <class T>
struct io;
template <>
struct io<float> {
  __device__ static float load(float x) { return x; }
  __device__ static float store(float x) { return x; }
};
template <>
struct io<__nv_bfloat16> {
  __device__ static float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
};
template <>
struct io<__half> {
  __device__ static float load(__half x) { return __half2float(x); }
  __device__ static __half store(float x) { return __float2half_rn(x); }
};

template <class T>
__global__ void __launch_bounds__(kMaxThreads)
rope_kernel(T* q, T* k, const std::int64_t* positions, int q_heads, int k_heads,
            std::int64_t q_token_stride, std::int64_t q_head_stride, std::int64_t k_token_stride,
            std::int64_t k_head_stride) {
  __shared__ float cs[kHalf];
  __shared__ float sn[kHalf];
  const std::int64_t t = blockIdx.x;
  const std::int64_t m = positions[t];
  if (m < 0) {  // the same for the whole block, so no thread reaches the barrier
    if (threadIdx.x == 0) bad_position_flag = 1;
    return;
  }
  for (int i = threadIdx.x; i < kHalf; i += blockDim.x) {
    const grape::math::sin_cos sc =
        grape::math::sincos_of_phase(grape::math::phase_at(m, kTurnFractions[i]));
    cs[i] = kFactor * sc.cos;
    sn[i] = kFactor * sc.sin;
  }
  __syncthreads();
  const int total = (q_heads + k_heads) * kHalf;
  for (int u = threadIdx.x; u < total; u += blockDim.x) {
    const int head = u / kHalf;
    const int i = u - head * kHalf;
    T* x = head < q_heads ? q + t * q_token_stride + head * q_head_stride
                          : k + t * k_token_stride + (head - q_heads) * k_head_stride;
    const int c0 = grape::math::first_channel(kLayout, i, kRotaryDim);
    const int c1 = grape::math::second_channel(kLayout, i, kRotaryDim);
    const grape::math::pair2<float> r =
        grape::math::rotate_pair(io<T>::load(x[c0]), io<T>::load(x[c1]), sn[i], cs[i]);
    x[c0] = io<T>::store(r.first);
    x[c1] = io<T>::store(r.second);
  }
}

template <class T>
void launch(void* q, void* k, const std::int64_t* positions, std::int64_t tokens, int q_heads,
            int k_heads, std::int64_t q_token_stride, std::int64_t q_head_stride,
            std::int64_t k_token_stride, std::int64_t k_head_stride, cudaStream_t stream) {
  const int units = (q_heads + k_heads) * kHalf;
  int threads = units > kHalf ? units : kHalf;
  threads = threads >= kMaxThreads ? kMaxThreads : (threads + 31) / 32 * 32;
  rope_kernel<T><<<static_cast<unsigned>(tokens), threads, 0, stream>>>(
      static_cast<T*>(q), static_cast<T*>(k), positions, q_heads, k_heads, q_token_stride,
      q_head_stride, k_token_stride, k_head_stride);
}

@SHAPE_CHECKS@
}  // namespace grape_@NAME@_detail

extern "C" int @ENTRY@(void* q, void* k, const std::int64_t* positions, std::int64_t tokens,
    std::int64_t q_heads, std::int64_t k_heads, std::int64_t q_token_stride, std::int64_t q_head_stride,
    std::int64_t k_token_stride, std::int64_t k_head_stride, int dtype, cudaStream_t stream) {
  namespace d = grape_@NAME@_detail;
  if (dtype != 0 && dtype != 1 && dtype != 2) return 3;
  if (const int e = d::check_shapes(q, k, positions, tokens, q_heads, k_heads, q_token_stride,
                                    q_head_stride, k_token_stride, k_head_stride))
    return e;
  if (tokens == 0) return 0;
  constexpr std::int64_t int_max = 2147483647;
  if (tokens > int_max || q_heads + k_heads > int_max / d::kHalf) return 2;
  if (q_heads == 0 && k_heads == 0) return 0;
  const int qh = static_cast<int>(q_heads), kh = static_cast<int>(k_heads);
  if (dtype == 0)
    d::launch<float>(q, k, positions, tokens, qh, kh, q_token_stride, q_head_stride,
                     k_token_stride, k_head_stride, stream);
  else if (dtype == 1)
    d::launch<__nv_bfloat16>(q, k, positions, tokens, qh, kh, q_token_stride, q_head_stride,
                             k_token_stride, k_head_stride, stream);
  else
    d::launch<__half>(q, k, positions, tokens, qh, kh, q_token_stride, q_head_stride,
                      k_token_stride, k_head_stride, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

extern "C" int @ENTRY@_bad_positions(cudaStream_t stream) {
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

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string tag = "@" + key + "@";
    for (std::size_t at = text.find(tag); at != std::string::npos; at = text.find(tag, at + value.size()))
      text.replace(at, tag.size(), value);
  }
  return text;
}

void validate(const kernel_description& k) {
  const auto& s = k.spec;
  auto fail = [&](const std::string& what) {
    throw input_error(fmt::format("gen: {}: {}", k.name, what));
  };
  if (s.num_axes != 1 || !s.plane_axis.empty())
    fail("multi-axis rotary encodings (M-RoPE, axial) are not supported; token positions only");
  try {
    check_rotary_spec(s);
  } catch (const input_error& e) {
    fail(std::string(e.what()).substr(std::string_view("grape: ").size()));
  }
}

}  // namespace

target parse_target(std::string_view text) {
  if (text == "cpp") return target::cpp;
  if (text == "cuda") return target::cuda;
  throw input_error(fmt::format("--target: must be cpp or cuda (got '{}')", text));
}

std::string sanitize_name(std::string_view name) {
  std::string out;
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) && c < 128) {
      out += static_cast<char>(std::tolower(c));
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty())
    throw input_error(fmt::format("--name: '{}' has no letters or digits to name the kernel by", name));
  return out;
}

std::string model_name_from_path(std::string_view path) {
  std::string_view p = path;
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  auto base = [](std::string_view s) {
    const auto slash = s.rfind('/');
    return slash == std::string_view::npos ? s : s.substr(slash + 1);
  };
  std::string_view file = base(p);
  if (file == "config.json") {
    const auto slash = p.rfind('/');
    std::string_view dir = slash == std::string_view::npos ? std::string_view{} : p.substr(0, slash);
    while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
    if (!dir.empty() && dir != "." && dir != "..") return sanitize_name(base(dir));
  }
  const auto dot = file.rfind('.');
  if (dot != std::string_view::npos && dot > 0) file = file.substr(0, dot);
  return sanitize_name(file);
}

std::string entry_point_name(std::string_view name, target t) {
  return fmt::format("grape_{}_rope{}", name, t == target::cuda ? "_cuda" : "");
}

std::string generate_source(const kernel_description& k, target t) {
  validate(k);
  const auto& s = k.spec;
  const int half = s.rotary_dim / 2;
  const bool half_split = s.layout == layout_kind::half_split;

  std::vector<std::string> std_includes;
  const std::string math = embeddable_math_text(std_includes);
  std::string includes;
  for (const auto& inc : std_includes)
    if (inc != "<cstdint>") includes += fmt::format("#include {}\n", inc);

  std::string fractions;
  for (int i = 0; i < half; ++i) {
    const double f = s.inv_freq[static_cast<std::size_t>(i)];
    fractions += fmt::format("    0x{:016x}ull,  // {:>3}: theta {:.17g} rad/token\n",
                             math::turn_fraction_of(f), i, f);
  }
  std::string provenance;
  for (const auto& line : k.provenance) provenance += "// " + line + "\n";

  std::string upper;
  for (char c : k.name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));

  const std::string layout_pair =
      half_split ? fmt::format("(i, i + {}) (half_split, rotate_half)", half)
                 : std::string("(2i, 2i + 1) (interleaved)");
  const std::map<std::string, std::string> values = {
      {"ARGS_DOC", arguments_doc},
      {"SHAPE_CHECKS", shape_checks},
      {"MATH_DOC", substitute(math_doc, {{"LAYOUT_PAIR", layout_pair}})},
      {"PROVENANCE", provenance},
      {"ENTRY", entry_point_name(k.name, t)},
      {"NAME", k.name},
      {"UNAME", upper},
      {"HEAD_DIM", std::to_string(s.head_dim)},
      {"ROTARY_DIM", std::to_string(s.rotary_dim)},
      {"HALF", std::to_string(half)},
      {"LAYOUT", half_split ? "half_split" : "interleaved"},
      {"AF", fmt::format("{:.17g}", s.attention_factor)},
      {"AF_TEXT", fmt::format("{}", s.attention_factor)},
      {"FRACTIONS", fractions},
      {"STD_INCLUDES", includes},
  };
  // The shared snippet first (it holds tags itself); the embedded math last, so that no text
  // inside it is ever taken for a tag.
  const std::string out =
      substitute(substitute(t == target::cpp ? cpp_template : cuda_template,
                            {{"MODEL_CONSTANTS", model_constants}}),
                 values);
  return substitute(out, {{"MATH", math}});
}

}  // namespace grape::gen
