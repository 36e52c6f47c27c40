// The GPU check's part for cuda::attention_decode(device_attention(instance), args)
// (kernels/cuda/attention_decode_cuda.hpp) against cpu::attention_decode on the same random paged
// cache (tests/attention/decode_case.hpp): RoPE (f32, bf16), ALiBi, contextual GRAPE-M and GRAPE-AP
// with sequences that split into chunks; then RoPE in bf16 over 32 query heads on 8 KV heads × 128
// and 32k cached tokens, its K/V bytes per second against a device copy of the same bytes.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../attention/decode_case.hpp"
#include "cuda/attention_decode_cuda.hpp"
#include "gpu_check.hpp"
#include "grape/builtins.hpp"

namespace grape_gpu {
namespace {

/// A decode case's arrays on the device, run through cuda::attention_decode: the output, the lse
/// and the error flag back on the host; `iterations` > 0 also times the call.
template <class T>
struct device_decode {
  std::vector<T> out;
  std::vector<float> lse;
  int flag = 0;
  float ms = 0;
  template <class I>
  device_decode(const grape::decode_test::decode_case<I, T>& c, int iterations) {
    const grape::cpu::decode_args& a = c.args;
    T *dq = upload(c.q), *dk = upload(c.k_pages), *dv = upload(c.v_pages), *dout = upload(c.out);
    std::int32_t* dtable = upload(c.table);
    std::int64_t *dlens = upload(c.lens), *dpos = upload(c.q_pos);
    float* dlse = upload(c.lse);
    int* dflag = upload(std::vector<int>{0});
    grape::cpu::decode_args da = a;
    da.q = dq;
    da.k.data = dk;
    da.v.data = dv;
    da.block_table = dtable;
    da.seq_lens = dlens;
    da.q_positions = a.q_positions ? dpos : nullptr;
    da.out = dout;
    da.lse = dlse;
    const grape::cuda::device_attention enc(c.inst);
    const std::int64_t max_len = *std::max_element(c.lens.begin(), c.lens.end());
    grape::cuda::attention_decode(enc, da, max_len, dflag, nullptr);
    CHECK(cudaDeviceSynchronize());
    out = download(dout, c.out.size());
    lse = download(dlse, c.lse.size());
    flag = download(dflag, 1)[0];
    if (iterations > 0)
      ms = time_ms(nullptr, iterations, [&] { grape::cuda::attention_decode(enc, da, max_len, dflag, nullptr); });
    for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dout),
                    static_cast<void*>(dtable), static_cast<void*>(dlens), static_cast<void*>(dpos),
                    static_cast<void*>(dlse), static_cast<void*>(dflag)})
      cudaFree(p);
  }
};

template <class E, class T>
row compare(const char* name, std::uint64_t seed, std::int64_t max_len, bool given_positions) {
  std::mt19937_64 rng(seed);
  auto c = grape::decode_test::random_case<E, T>(rng, max_len, given_positions);
  grape::cpu::attention_decode(c.inst, c.args);
  const device_decode<T> d(c, 0);
  row r{};
  std::snprintf(r.name, sizeof r.name, "%s", name);
  r.max_error = d.flag ? 1e30 : std::max(relative_error(d.out, c.out), relative_error(d.lse, c.lse));
  r.tolerance = std::is_same_v<T, float> ? 1e-4 : 3e-2;
  return r;
}

/// RoPE, bf16, 32 query heads on 8 KV heads × 128 over `tokens` cached tokens: the K/V bytes read
/// per second against a device copy of the same bytes.
row throughput(std::int64_t tokens, int iterations) {
  std::mt19937_64 rng(48);
  // One sequence in NHD pages of 16 slots.
  grape::decode_test::decode_case<grape::rope::instance, Eigen::bfloat16> c(
      rng, grape::rope::make({128, 128, 500000.0, 1.0}), grape::decode_test::decode_layout{32, 8, 16, false, {tokens}});
  grape::cpu::attention_decode(c.inst, c.args);
  const device_decode<Eigen::bfloat16> d(c, iterations);
  const double bytes = 2.0 * tokens * 8 * 128 * 2;  // the K and V rows read
  void *from = nullptr, *to = nullptr;  // the same bytes copied (read and written), as the CPU bench's ratio_to_copy
  CHECK(cudaMalloc(&from, static_cast<std::size_t>(bytes)));
  CHECK(cudaMalloc(&to, static_cast<std::size_t>(bytes)));
  const float copy_ms = time_ms(nullptr, iterations, [&] {
    CHECK(cudaMemcpyAsync(to, from, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, nullptr));
  });
  cudaFree(from);
  cudaFree(to);
  row r{};
  std::snprintf(r.name, sizeof r.name, "decode rope bf16 32/8x128 %lldk", static_cast<long long>(tokens / 1024));
  r.max_error = d.flag ? 1e30 : relative_error(d.out, c.out);
  r.tolerance = 3e-2;
  r.rope_gbs = bytes / d.ms / 1e6;
  r.copy_gbs = bytes / copy_ms / 1e6;
  return r;
}

}  // namespace

std::vector<row> decode_rows(int iterations) {
  return {compare<grape::rope, float>("decode rope f32", 1, 3000, true),
          compare<grape::rope, Eigen::bfloat16>("decode rope bf16", 2, 3000, false),
          compare<grape::alibi, float>("decode alibi f32", 3, 3000, false),
          compare<grape::grape_m_contextual, float>("decode grape_m_contextual f32", 4, 400, true),
          compare<grape::grape_ap_relative, float>("decode grape_ap_relative f32", 5, 400, false),
          throughput(32768, iterations)};
}

}  // namespace grape_gpu
