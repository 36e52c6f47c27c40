// Streaming (non-temporal) stores of out-of-place rotate_qk: when the plan chooses them, and that
// the streamed output equals the reference for every dtype, layout, specialised dim, partial
// rotary, backward and thread count.
#include <gtest/gtest.h>

#include <cstdint>

#include "cpu/rotate_qk_plan.hpp"
#include "rope_reference.hpp"

namespace grape::test {
namespace {

using cpu::dtype;
using cpu::store_policy;
using math::layout_kind;

/// A contiguous [tokens, heads, 128] f32 call on addresses that are never dereferenced (planning
/// reads only positions and cu_seqlens, which are absent here).
struct planned_call {
  rotary_spec spec;
  cpu::rotate_qk_args args;
  planned_call(std::int64_t tokens, std::uintptr_t out_address, store_policy stores) {
    spec.head_dim = spec.rotary_dim = 128;
    for (int i = 0; i < 64; ++i) spec.inv_freq.push_back(1.0 / (i + 1));
    const std::int64_t row = 8 * 128;
    args.q = {reinterpret_cast<const void*>(std::uintptr_t{1} << 40),
              reinterpret_cast<void*>(out_address), 8, tokens * row, 0, row, 128};
    args.seq_len = tokens;
    args.stores = stores;
  }
  bool streams() const { return cpu::detail::plan_cpu_rotation(spec, args).plan.stream_stores; }
};

constexpr std::uintptr_t aligned_out = std::uintptr_t{1} << 44;

TEST(rotate_qk_streaming, the_plan_streams_only_large_aligned_out_of_place_output) {
  // automatic: a 4 GiB output streams, a 4 KiB one does not.
  EXPECT_TRUE(planned_call(1 << 20, aligned_out, store_policy::automatic).streams());
  EXPECT_FALSE(planned_call(1, aligned_out, store_policy::automatic).streams());
  // Forced either way.
  EXPECT_TRUE(planned_call(1, aligned_out, store_policy::streaming).streams());
  EXPECT_FALSE(planned_call(1 << 20, aligned_out, store_policy::cached).streams());
  // Never in place, never on a misaligned output.
  planned_call in_place(1 << 20, aligned_out, store_policy::streaming);
  in_place.args.q.out = const_cast<void*>(in_place.args.q.in);
  EXPECT_FALSE(in_place.streams());
  EXPECT_FALSE(planned_call(4, aligned_out + 32, store_policy::streaming).streams());
  // Strides that do not keep every head on a 64-byte line.
  planned_call odd_stride(4, aligned_out, store_policy::streaming);
  odd_stride.args.q.token_stride = 8 * 128 + 4;
  odd_stride.args.q.size = 4 * (8 * 128 + 4);
  EXPECT_FALSE(odd_stride.streams());
  // Both pair layouts stream.
  planned_call interleaved(4, aligned_out, store_policy::streaming);
  interleaved.spec.layout = layout_kind::interleaved;
  EXPECT_TRUE(interleaved.streams());
  // A rotary dim without a specialised kernel.
  planned_call dim96(4, aligned_out, store_policy::streaming);
  dim96.spec.head_dim = dim96.spec.rotary_dim = 96;
  dim96.spec.inv_freq.resize(48);
  dim96.args.q = {dim96.args.q.in, dim96.args.q.out, 8, 4 * 8 * 96, 0, 8 * 96, 96};
  EXPECT_FALSE(dim96.streams());
}

TEST(rotate_qk_streaming, an_unknown_store_policy_is_rejected) {
  planned_call c(4, aligned_out, static_cast<store_policy>(7));
  EXPECT_THROW(c.streams(), input_error);
}

TEST(rotate_qk_streaming, streamed_output_matches_the_reference) {
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16})
    for (layout_kind lk : {layout_kind::half_split, layout_kind::interleaved})
      for (auto [hd, rd] : {std::pair{64, 64}, std::pair{128, 128}, std::pair{256, 256},
                            std::pair{128, 64}})
        for (bool backward : {false, true})
          for (int threads : {1, 2}) {
            rope_case c;
            c.type = type;
            c.layout = lk;
            c.head_dim = hd;
            c.rotary_dim = rd;
            c.inplace = false;
            c.backward = backward;
            c.threads = threads;
            c.batch = 2;
            c.seq_len = 9;
            c.hq = 3;
            c.hk = 2;
            c.cached = threads == 2;
            c.stores = store_policy::streaming;
            SCOPED_TRACE(::testing::Message() << "type " << int(type) << " layout " << int(lk)
                                              << " hd " << hd << " rd " << rd << " backward "
                                              << backward << " threads " << threads);
            // The harness's buffers are 64-byte aligned and contiguous: these cases stream.
            const rope_result r = run_rope_case(c);
            EXPECT_TRUE(r.streamed);
            EXPECT_LE(r.max_error, r.tolerance);
            EXPECT_EQ(r.other_mismatches, 0);
          }
}

}  // namespace
}  // namespace grape::test
