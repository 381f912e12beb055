// kernels/cuda paged attention, KV store and KV block copy against kernels/cpu
// (paged_attention.hpp): the same layout, random block tables, mixed batches of
// prefills, chunked prefills and decodes, GQA and MHA, head dims 64/80/128/256,
// f32/f16/bf16 caches (the CPU reference reads the same rounded values).
// Unwritten cache slots hold NaN on the device, so reading one fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/paged_attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace troupe::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::DeviceBuffer;

int64_t elem_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

float round_to(DType t, float v) {
  if (t == DType::f16) return cpu::fp16_to_fp32(cpu::fp32_to_fp16(v));
  if (t == DType::bf16) return cpu::bf16_to_fp32(cpu::fp32_to_bf16(v));
  return v;
}

std::vector<float> rand_vec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Seq {
  int q_len;
  int seq_len;
};

struct Scenario {
  std::string name;
  int num_heads, num_kv_heads, head_dim, block_size;
  std::vector<Seq> seqs;
};

class CudaAttention : public CudaTest {
 protected:
  /// window > 0: sliding-window attention; softcap > 0: logit soft-capping (both checked
  /// against the CPU kernel with the same parameters).
  void run(const Scenario& sc, DType cache_type, uint32_t seed, int window = 0, float softcap = 0.0f) {
    SCOPED_TRACE(sc.name + " cache " + std::string(to_string(cache_type)));
    std::mt19937 rng(seed);
    const int S = static_cast<int>(sc.seqs.size());
    const int bs = sc.block_size, hd = sc.head_dim, H = sc.num_heads, KVH = sc.num_kv_heads;
    const int64_t kv_dim = int64_t{KVH} * hd;

    // Block tables: a random permutation of the cache's blocks, a -1 column of padding.
    int max_blocks = 0, used = 0;
    for (const Seq& s : sc.seqs) {
      max_blocks = std::max(max_blocks, (s.seq_len + bs - 1) / bs);
      used += (s.seq_len + bs - 1) / bs;
    }
    max_blocks += 1;
    const int num_blocks = used + 3;
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int32_t> tables(static_cast<size_t>(S * max_blocks), -1);
    int next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (sc.seqs[s].seq_len + bs - 1) / bs; ++b) tables[s * max_blocks + b] = perm[next++];

    // Fill every cached position of every sequence (through the GPU store; the CPU copy gets the rounded values).
    std::vector<int64_t> slots;
    for (int s = 0; s < S; ++s)
      for (int p = 0; p < sc.seqs[s].seq_len; ++p)
        slots.push_back(int64_t{tables[s * max_blocks + p / bs]} * bs + p % bs);
    const int64_t n_fill = static_cast<int64_t>(slots.size());
    const auto k_all = rand_vec(static_cast<size_t>(n_fill * kv_dim), rng);
    const auto v_all = rand_vec(static_cast<size_t>(n_fill * kv_dim), rng);
    const int64_t num_slots = int64_t{num_blocks} * bs;
    std::vector<float> k_cpu(static_cast<size_t>(num_slots * kv_dim), 0.0f), v_cpu(k_cpu.size(), 0.0f);
    std::vector<float> k_round(k_all.size()), v_round(v_all.size());
    for (size_t i = 0; i < k_all.size(); ++i) {
      k_round[i] = round_to(cache_type, k_all[i]);
      v_round[i] = round_to(cache_type, v_all[i]);
    }
    cpu::paged_kv_store(cpu::KvDtype::f32, k_cpu.data(), v_cpu.data(), k_round.data(), v_round.data(), slots.data(), n_fill,
                        KVH, hd, bs);

    const size_t cache_bytes = static_cast<size_t>(num_slots * kv_dim * elem_bytes(cache_type));
    DeviceBuffer<uint8_t> d_k(cache_bytes), d_v(cache_bytes);
    DeviceBuffer<float> d_kin(k_all), d_vin(v_all);
    DeviceBuffer<int64_t> d_slots(slots);
    ASSERT_TRUE(d_k.ok() && d_v.ok() && d_kin.ok() && d_vin.ok() && d_slots.ok());
    ASSERT_EQ(cudaMemset(d_k.get(), 0xff, cache_bytes), cudaSuccess);  // NaN in every type
    ASSERT_EQ(cudaMemset(d_v.get(), 0xff, cache_bytes), cudaSuccess);
    ASSERT_OK(paged_kv_store(d_k.get(), d_v.get(), cache_type, d_kin.get(), d_vin.get(), d_slots.get(), n_fill, kv_dim,
                             num_slots, stream_));

    // Queries: the last q_len positions of each sequence, plus two rows outside every sequence.
    std::vector<int32_t> query_start(1, 0), seq_lens;
    for (const Seq& s : sc.seqs) {
      query_start.push_back(query_start.back() + s.q_len);
      seq_lens.push_back(s.seq_len);
    }
    const int64_t n_tokens = query_start.back();
    const int64_t n_rows = n_tokens + 2;
    const auto q = rand_vec(static_cast<size_t>(n_rows * H * hd), rng);
    DeviceBuffer<float> d_q(q), d_out(q.size());
    DeviceBuffer<int32_t> d_qs(query_start), d_sl(seq_lens), d_tables(tables);
    ASSERT_TRUE(d_q.ok() && d_out.ok() && d_qs.ok() && d_sl.ok() && d_tables.ok());
    ASSERT_EQ(cudaMemset(d_out.get(), 0xff, q.size() * sizeof(float)), cudaSuccess);

    PagedAttentionParams p;
    p.q = d_q.get();
    p.out = d_out.get();
    p.k_cache = d_k.get();
    p.v_cache = d_v.get();
    p.cache_type = cache_type;
    p.query_start = d_qs.get();
    p.seq_lens = d_sl.get();
    p.block_tables = d_tables.get();
    p.max_blocks_per_seq = max_blocks;
    p.num_blocks = num_blocks;
    p.num_seqs = S;
    p.num_tokens = n_rows;
    p.num_heads = H;
    p.num_kv_heads = KVH;
    p.head_dim = hd;
    p.block_size = bs;
    p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    p.window = window;
    p.softcap = softcap;
    ASSERT_OK(paged_attention(p, stream_));
    sync();

    std::vector<float> ref(static_cast<size_t>(n_tokens * H * hd), 0.0f);
    std::vector<const int32_t*> table_ptrs(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) table_ptrs[s] = tables.data() + s * max_blocks;
    std::vector<int64_t> work(static_cast<size_t>(S + 1));
    cpu::PagedAttentionArgs a;
    a.q = q.data();
    a.out = ref.data();
    a.k_cache = k_cpu.data();
    a.v_cache = v_cpu.data();
    a.query_start = query_start.data();
    a.seq_lens = seq_lens.data();
    a.block_tables = table_ptrs.data();
    a.num_seqs = S;
    a.num_heads = H;
    a.num_kv_heads = KVH;
    a.head_dim = hd;
    a.block_size = bs;
    a.scale = p.scale;
    a.window = window;
    a.softcap = softcap;
    a.work_offsets = work.data();
    cpu::paged_attention(a, nullptr);

    const auto out = d_out.to_host();
    ASSERT_EQ(out.size(), q.size());
    for (int64_t r = 0; r < n_tokens; ++r)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < hd; ++d) {
          const size_t k = static_cast<size_t>((r * H + h) * hd + d);
          ASSERT_NEAR(out[k], ref[k], 3e-5f) << "row " << r << " head " << h << " dim " << d;
        }
    for (size_t k = static_cast<size_t>(n_tokens * H * hd); k < out.size(); ++k)
      ASSERT_EQ(out[k], 0.0f) << "a row outside every sequence must be zeros";
  }
};

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      // prefill from 0, chunked prefill (positions 50..69), two decodes, a one-block prefill
      {"gqa4_hd64", 8, 2, 64, 16, {{37, 37}, {20, 70}, {1, 130}, {1, 1}, {16, 16}}},
      {"mha_hd128_bs32", 4, 4, 128, 32, {{5, 300}, {1, 64}, {64, 64}}},
      {"mqa_hd256", 2, 1, 256, 16, {{3, 50}, {1, 200}}},
      {"gqa3_hd80_bs8", 6, 2, 80, 8, {{9, 9}, {1, 33}, {0, 12}, {2, 2}}},  // an empty query range too
  };
  return all;
}

TEST_F(CudaAttention, F32CacheMatchesCpu) {
  uint32_t seed = 1;
  for (const Scenario& sc : scenarios()) run(sc, DType::f32, seed++);
}

TEST_F(CudaAttention, F16CacheMatchesCpuOnRoundedValues) {
  uint32_t seed = 11;
  for (const Scenario& sc : scenarios()) run(sc, DType::f16, seed++);
}

TEST_F(CudaAttention, Bf16CacheMatchesCpuOnRoundedValues) {
  uint32_t seed = 21;
  for (const Scenario& sc : scenarios()) run(sc, DType::bf16, seed++);
}

// Gemma's attention: windows shorter than a key chunk, across chunks, and longer than any
// sequence; soft-capping with and without a window.
TEST_F(CudaAttention, SlidingWindowAndSoftCapMatchCpu) {
  uint32_t seed = 31;
  for (const Scenario& sc : scenarios())
    for (auto [window, softcap] : {std::pair{23, 0.0f}, std::pair{100, 0.0f}, std::pair{1000, 0.0f},
                                   std::pair{0, 5.0f}, std::pair{40, 30.0f}}) {
      SCOPED_TRACE("window " + std::to_string(window) + " softcap " + std::to_string(softcap));
      run(sc, DType::f16, seed++, window, softcap);
    }
}

class CudaKvCache : public CudaTest {};

TEST_F(CudaKvCache, StoreWritesTheMappedSlotsOnly) {
  const int64_t n = 10, kv_dim = 48, num_slots = 32;
  const std::vector<int64_t> slots = {3, -1, 0, 31, 32, 100, 7, 8, -5, 15};  // -1, -5, 32, 100 skipped
  std::mt19937 rng(4);
  const auto k = rand_vec(static_cast<size_t>(n * kv_dim), rng), v = rand_vec(k.size(), rng);
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(to_string(t)));
    const size_t bytes = static_cast<size_t>(num_slots * kv_dim * elem_bytes(t));
    DeviceBuffer<uint8_t> d_kc(bytes), d_vc(bytes);
    DeviceBuffer<float> d_k(k), d_v(v);
    DeviceBuffer<int64_t> d_slots(slots);
    ASSERT_TRUE(d_kc.ok() && d_vc.ok() && d_k.ok() && d_v.ok() && d_slots.ok());
    ASSERT_EQ(cudaMemset(d_kc.get(), 0, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_vc.get(), 0, bytes), cudaSuccess);
    ASSERT_OK(paged_kv_store(d_kc.get(), d_vc.get(), t, d_k.get(), d_v.get(), d_slots.get(), n, kv_dim, num_slots,
                             stream_));
    sync();
    // Expected caches, built on the host in the cache's own bytes.
    std::vector<uint8_t> ek(bytes, 0), ev(bytes, 0);
    const int64_t eb = elem_bytes(t);
    for (int64_t i = 0; i < n; ++i) {
      if (slots[i] < 0 || slots[i] >= num_slots) continue;
      for (int64_t e = 0; e < kv_dim; ++e) {
        const size_t off = static_cast<size_t>((slots[i] * kv_dim + e) * eb);
        for (auto [src, dst] : {std::pair{&k, &ek}, std::pair{&v, &ev}}) {
          const float f = (*src)[i * kv_dim + e];
          if (t == DType::f32) {
            std::memcpy(dst->data() + off, &f, 4);
          } else {
            const uint16_t h = t == DType::f16 ? cpu::fp32_to_fp16(f) : cpu::fp32_to_bf16(f);
            std::memcpy(dst->data() + off, &h, 2);
          }
        }
      }
    }
    EXPECT_EQ(d_kc.to_host(), ek);
    EXPECT_EQ(d_vc.to_host(), ev);
  }
}

TEST_F(CudaKvCache, CopyBlocksMovesWholeBlocksAndSkipsBadIds) {
  const std::vector<int64_t> pairs = {1, 5, 2, 7, 9, 0, 3, 99, -1, 4, 6, 6};  // (3 -> 99), (-1 -> 4) skipped
  const int64_t num_blocks = 10;
  for (int64_t block_bytes : {int64_t{16 * 2 * 64 * 2}, int64_t{18}}) {  // the 16-byte and the byte path
    SCOPED_TRACE("block_bytes " + std::to_string(block_bytes));
    std::vector<uint8_t> cache(static_cast<size_t>(num_blocks * block_bytes));
    std::mt19937 rng(static_cast<uint32_t>(block_bytes));
    for (auto& b : cache) b = static_cast<uint8_t>(rng());
    DeviceBuffer<uint8_t> d_cache(cache);
    DeviceBuffer<int64_t> d_pairs(pairs);
    ASSERT_TRUE(d_cache.ok() && d_pairs.ok());
    ASSERT_OK(copy_kv_blocks(d_cache.get(), block_bytes, num_blocks, d_pairs.get(),
                             static_cast<int64_t>(pairs.size() / 2), stream_));
    sync();
    auto expect = cache;
    for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
      const int64_t src = pairs[i], dst = pairs[i + 1];
      if (src < 0 || src >= num_blocks || dst < 0 || dst >= num_blocks) continue;
      std::memcpy(expect.data() + dst * block_bytes, cache.data() + src * block_bytes,
                  static_cast<size_t>(block_bytes));
    }
    EXPECT_EQ(d_cache.to_host(), expect);
  }
}

}  // namespace
}  // namespace troupe::kernels::cuda
