// Paged attention: the AVX2 and scalar work items against an fp64 softmax
// reference over f32 and f16 caches (block tables out of order, several
// sequences with prefill chunks and decodes), and the f16 store rounding
// exactly like fp32_to_fp16 on every ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/paged_attention.hpp"
#include "kernels/cpu/paged_attention_impl.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {
namespace {

TEST(PagedKvStore, F16RoundsLikeTheScalarConversion) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 30.0f);
  std::vector<float> k(19 * 24), v(k.size());
  for (auto& x : k) x = dist(rng);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) * 0.5f + 1e-6f * static_cast<float>(i % 5);
  k[0] = 65504.0f;           // largest half
  k[1] = 1e-7f;              // a half subnormal
  k[2] = 1.0f + 1.0f / 2048;  // a tie: rounds to even
  k[3] = -0.0f;
  const std::vector<int64_t> slots = {5, -1, 0, 7, 3, 2, 1, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  // 3 kv heads of 8, blocks of 4 slots: element (slot, h, i) at ((slot / 4 * 3 + h) * 4 + slot % 4) * 8 + i.
  std::vector<uint16_t> kc(20 * 24, 0xffff), vc(kc.size(), 0xffff);
  paged_kv_store(KvDtype::f16, kc.data(), vc.data(), k.data(), v.data(), slots.data(), 19, 3, 8, 4);
  auto at = [](int64_t slot, int h, int i) { return ((slot / 4 * 3 + h) * 4 + slot % 4) * 8 + i; };
  for (int t = 0; t < 19; ++t) {
    if (slots[t] < 0) continue;
    for (int h = 0; h < 3; ++h)
      for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(kc[at(slots[t], h, i)], fp32_to_fp16(k[t * 24 + h * 8 + i])) << "token " << t << " head " << h;
        ASSERT_EQ(vc[at(slots[t], h, i)], fp32_to_fp16(v[t * 24 + h * 8 + i])) << "token " << t << " head " << h;
      }
  }
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(kc[at(19, h, i)], 0xffff) << "an unused slot was written";
#if defined(__x86_64__)
  if (isa_available(Isa::avx2)) {
    std::vector<uint16_t> a(k.size());
    f32_to_f16_avx2(k.data(), a.data(), static_cast<int64_t>(k.size()));
    for (size_t i = 0; i < k.size(); ++i) ASSERT_EQ(a[i], fp32_to_fp16(k[i])) << i;
  }
#endif
}

struct Shape {
  int num_heads, num_kv_heads, head_dim, block_size;
  std::vector<int> q_lens, seq_lens;
};

// (cache type, head_dim, sliding window (0: none), logit soft-cap (0: none))
class PagedAttention : public ::testing::TestWithParam<std::tuple<KvDtype, int, int, float>> {};

TEST_P(PagedAttention, WorkItemsMatchAnFp64Softmax) {
  const auto [dtype, head_dim, window, softcap] = GetParam();
  const Shape su{6, 2, head_dim, 16, {1, 19, 3, 70}, {1, 40, 100, 70}};
  const int S = static_cast<int>(su.q_lens.size());
  const int64_t kv_dim = int64_t{su.num_kv_heads} * head_dim;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // Each sequence's blocks in reverse order, interleaved with the other sequences'.
  std::vector<std::vector<int32_t>> tables(S);
  int next_block = 0;
  for (int s = 0; s < S; ++s) {
    const int blocks = (su.seq_lens[s] + su.block_size - 1) / su.block_size;
    for (int b = 0; b < blocks; ++b) tables[s].insert(tables[s].begin(), next_block++);
  }
  const int64_t slots = int64_t{next_block} * su.block_size;
  std::vector<float> keys(static_cast<size_t>(slots * kv_dim)), values(keys.size());
  for (auto& x : keys) x = dist(rng);
  for (auto& x : values) x = dist(rng);
  std::vector<uint8_t> kc(static_cast<size_t>(slots * kv_dim * kv_elem_bytes(dtype)));
  std::vector<uint8_t> vc(kc.size());
  std::vector<int64_t> all_slots(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) all_slots[static_cast<size_t>(i)] = i;
  paged_kv_store(dtype, kc.data(), vc.data(), keys.data(), values.data(), all_slots.data(), slots, su.num_kv_heads,
                 head_dim, su.block_size);
  // What the reference reads: the cached values.
  auto cached = [&](const std::vector<float>& src, int64_t i) {
    return dtype == KvDtype::f16 ? fp16_to_fp32(fp32_to_fp16(src[static_cast<size_t>(i)])) : src[static_cast<size_t>(i)];
  };

  std::vector<int32_t> query_start{0};
  for (int s = 0; s < S; ++s) query_start.push_back(query_start.back() + su.q_lens[s]);
  const int64_t T = query_start.back();
  const int64_t q_stride = int64_t{su.num_heads} * head_dim;
  std::vector<float> q(static_cast<size_t>(T * q_stride));
  for (auto& x : q) x = dist(rng);
  std::vector<const int32_t*> table_ptrs;
  for (auto& t : tables) table_ptrs.push_back(t.data());
  std::vector<int64_t> offsets(static_cast<size_t>(S + 1));
  PagedAttentionArgs a;
  a.q = q.data();
  a.kv_dtype = dtype;
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  a.query_start = query_start.data();
  a.seq_lens = su.seq_lens.data();
  a.block_tables = table_ptrs.data();
  a.num_seqs = S;
  a.num_heads = su.num_heads;
  a.num_kv_heads = su.num_kv_heads;
  a.head_dim = head_dim;
  a.block_size = su.block_size;
  a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  a.window = window;
  a.softcap = softcap;
  a.work_offsets = offsets.data();

  std::vector<float> out_scalar(q.size(), NAN), out_avx2(q.size(), NAN), out_avx512(q.size(), NAN),
      out_pool(q.size(), NAN);
  const bool avx512 = isa_available(Isa::avx512_vnni) && head_dim % 16 == 0;
  for (int s = 0; s < S; ++s)
    for (int kvh = 0; kvh < su.num_kv_heads; ++kvh)
      for (int j0 = 0; j0 < su.q_lens[s]; j0 += kQueryTile) {
        const int j1 = std::min(su.q_lens[s], j0 + kQueryTile);
        a.out = out_scalar.data();
        attend_item_scalar(a, s, kvh, j0, j1);
#if defined(__x86_64__)
        if (isa_available(Isa::avx2) && head_dim % 8 == 0) {
          a.out = out_avx2.data();
          attend_item_avx2(a, s, kvh, j0, j1);
        }
        if (avx512) {
          a.out = out_avx512.data();
          attend_item_avx512(a, s, kvh, j0, j1);
        }
#endif
      }
  ThreadPool pool(3);
  a.out = out_pool.data();
  paged_attention(a, &pool);

  const int group = su.num_heads / su.num_kv_heads;
  for (int s = 0; s < S; ++s) {
    const int first = su.seq_lens[s] - su.q_lens[s];
    for (int j = 0; j < su.q_lens[s]; ++j) {
      const int64_t row = query_start[s] + j;
      const int n_keys = first + j + 1;
      const int lo = window > 0 ? std::max(0, n_keys - window) : 0;  // the window's first key
      for (int h = 0; h < su.num_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> sc(static_cast<size_t>(n_keys));
        double mx = -1e300;
        for (int t = lo; t < n_keys; ++t) {
          const int64_t slot = int64_t{tables[s][t / su.block_size]} * su.block_size + t % su.block_size;
          double d = 0;
          for (int e = 0; e < head_dim; ++e)
            d += static_cast<double>(q[static_cast<size_t>(row * q_stride + h * head_dim + e)]) *
                 cached(keys, slot * kv_dim + kvh * head_dim + e);
          sc[static_cast<size_t>(t)] = d * a.scale;
          if (softcap > 0) sc[static_cast<size_t>(t)] = softcap * std::tanh(sc[static_cast<size_t>(t)] / softcap);
          mx = std::max(mx, sc[static_cast<size_t>(t)]);
        }
        double sum = 0;
        for (int t = lo; t < n_keys; ++t) sum += (sc[static_cast<size_t>(t)] = std::exp(sc[static_cast<size_t>(t)] - mx));
        for (int e = 0; e < head_dim; ++e) {
          double ref = 0;
          for (int t = lo; t < n_keys; ++t) {
            const int64_t slot = int64_t{tables[s][t / su.block_size]} * su.block_size + t % su.block_size;
            ref += sc[static_cast<size_t>(t)] * cached(values, slot * kv_dim + kvh * head_dim + e);
          }
          ref /= sum;
          const size_t k = static_cast<size_t>(row * q_stride + h * head_dim + e);
          ASSERT_NEAR(out_scalar[k], ref, 2e-5) << "scalar s=" << s << " j=" << j << " h=" << h << " e=" << e;
          if (isa_available(Isa::avx2) && head_dim % 8 == 0) {
            ASSERT_NEAR(out_avx2[k], ref, 2e-5) << "avx2 s=" << s << " j=" << j << " h=" << h << " e=" << e;
          }
          if (avx512) {  // the AVX2 items' operations per element: the same bits
            ASSERT_EQ(out_avx512[k], out_avx2[k]) << "avx512 s=" << s << " j=" << j << " h=" << h << " e=" << e;
          }
          ASSERT_NEAR(out_pool[k], ref, 2e-5) << "pool s=" << s << " j=" << j << " h=" << h << " e=" << e;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DtypesAndHeadDims, PagedAttention,
                         ::testing::Combine(::testing::Values(KvDtype::f32, KvDtype::f16), ::testing::Values(8, 64, 12, 48),
                                            ::testing::Values(0, 1, 23, 64), ::testing::Values(0.0f, 3.0f)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == KvDtype::f16 ? "f16" : "f32") + "_hd" +
                                  std::to_string(std::get<1>(info.param)) + "_window" +
                                  std::to_string(std::get<2>(info.param)) +
                                  (std::get<3>(info.param) > 0 ? "_softcap" : "");
                         });

}  // namespace
}  // namespace troupe::kernels::cpu
