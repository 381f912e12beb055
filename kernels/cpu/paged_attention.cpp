#include "kernels/cpu/paged_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/paged_attention_impl.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "troupe/check.hpp"

namespace troupe::kernels::cpu {
namespace {

#if defined(TROUPE_KERNELS_HAVE_AVX2)
bool use_avx2() { return is_avx2(active_isa()); }
#else
bool use_avx2() { return false; }
#endif
#if defined(TROUPE_KERNELS_HAVE_AVX512_VNNI)
bool use_avx512() { return active_isa() == Isa::avx512_vnni; }
#else
bool use_avx512() { return false; }
#endif

// Element d of a cached row, as f32.
inline float cached(const PagedAttentionArgs& A, const void* cache, int64_t offset) {
  if (A.kv_dtype == KvDtype::f16) return fp16_to_fp32(static_cast<const uint16_t*>(cache)[offset]);
  return static_cast<const float*>(cache)[offset];
}

// One query row against keys [lo, n_keys) of a sequence, online softmax over chunks aligned
// to kKeyChunk from 0.
void attend_one(const PagedAttentionArgs& A, const int32_t* block_table, int kv_head, int head, const float* q, int lo,
                int n_keys, float* out) {
  const int hd = A.head_dim;
  float acc[kMaxHeadDim];
  float scores[kKeyChunk];
  std::fill(acc, acc + hd, 0.0f);
  float m = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  for (int c0 = lo / kKeyChunk * kKeyChunk; c0 < n_keys; c0 += kKeyChunk) {
    const int cn = std::min(kKeyChunk, n_keys - c0);
    const int i0 = std::max(0, lo - c0);  // keys before the window take no part
    float cmax = -std::numeric_limits<float>::infinity();
    for (int i = i0; i < cn; ++i) {
      const int t = c0 + i;
      const int64_t base = kv_row_offset(A, block_table, t, kv_head);
      float s = 0.0f;
      for (int d = 0; d < hd; ++d) s += q[d] * cached(A, A.k_cache, base + d);
      scores[i] = s * A.scale;
      if (A.softcap > 0) scores[i] = A.softcap * std::tanh(scores[i] / A.softcap);
      cmax = std::max(cmax, scores[i]);
    }
    if (cmax > m) {
      const float f = std::exp(m - cmax);  // exp(-inf) = 0 on the first chunk
      sum *= f;
      for (int d = 0; d < hd; ++d) acc[d] *= f;
      m = cmax;
    }
    for (int i = i0; i < cn; ++i) {
      const int t = c0 + i;
      const int64_t base = kv_row_offset(A, block_table, t, kv_head);
      const float w = std::exp(scores[i] - m);
      sum += w;
      for (int d = 0; d < hd; ++d) acc[d] += w * cached(A, A.v_cache, base + d);
    }
  }
  sum += sink_weight(A, head, m);
  const float inv = sum > 0 ? 1.0f / sum : 0.0f;
  for (int d = 0; d < hd; ++d) out[d] = acc[d] * inv;
}

}  // namespace

void attend_item_scalar(const PagedAttentionArgs& A, int s, int kv_head, int j0, int j1) {
  const int group = A.num_heads / A.num_kv_heads;
  const int64_t q_stride = int64_t{A.num_heads} * A.head_dim;
  const int q_len = A.query_start[s + 1] - A.query_start[s];
  const int first_pos = A.seq_lens[s] - q_len;
  for (int j = j0; j < j1; ++j) {
    const int64_t row = A.query_start[s] + j;
    const int pos = first_pos + j;
    for (int h = kv_head * group; h < (kv_head + 1) * group; ++h)
      attend_one(A, A.block_tables[s], kv_head, h, A.q + row * q_stride + int64_t{h} * A.head_dim, first_key(A, pos),
                 pos + 1, A.out + row * q_stride + int64_t{h} * A.head_dim);
  }
}

#if defined(TROUPE_KERNELS_HAVE_AVX2) && !defined(TROUPE_KERNELS_HAVE_AVX512_VNNI)
// The compiler knew no AVX-512: Isa::avx512_vnni is never available, nothing calls this.
void attend_item_avx512(const PagedAttentionArgs&, int, int, int, int) {
  TROUPE_CHECK(false, "paged attention: this build has no AVX-512 work items");
}
#endif

void paged_kv_store(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v,
                    const int64_t* slot_mapping, int64_t n_tokens, int num_kv_heads, int head_dim, int block_size) {
  const int64_t kv_dim = int64_t{num_kv_heads} * head_dim;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding token: nothing to store
    for (int h = 0; h < num_kv_heads; ++h) {
      const int64_t dst = ((slot / block_size * num_kv_heads + h) * block_size + slot % block_size) * head_dim;
      const float* ks = k + t * kv_dim + int64_t{h} * head_dim;
      const float* vs = v + t * kv_dim + int64_t{h} * head_dim;
      if (dtype == KvDtype::f32) {
        std::memcpy(static_cast<float*>(k_cache) + dst, ks, static_cast<size_t>(head_dim) * sizeof(float));
        std::memcpy(static_cast<float*>(v_cache) + dst, vs, static_cast<size_t>(head_dim) * sizeof(float));
        continue;
      }
      uint16_t* kd = static_cast<uint16_t*>(k_cache) + dst;
      uint16_t* vd = static_cast<uint16_t*>(v_cache) + dst;
#if defined(TROUPE_KERNELS_HAVE_AVX2)
      if (use_avx2()) {
        f32_to_f16_avx2(ks, kd, head_dim);
        f32_to_f16_avx2(vs, vd, head_dim);
        continue;
      }
#endif
      for (int i = 0; i < head_dim; ++i) {
        kd[i] = fp32_to_fp16(ks[i]);
        vd[i] = fp32_to_fp16(vs[i]);
      }
    }
  }
}

void paged_attention(const PagedAttentionArgs& A, ThreadPool* pool) {
  // Work items: (sequence, kv head, tile of kQueryTile queries), numbered through work_offsets.
  int64_t* off = A.work_offsets;
  off[0] = 0;
  for (int s = 0; s < A.num_seqs; ++s) {
    const int q_len = A.query_start[s + 1] - A.query_start[s];
    off[s + 1] = off[s] + int64_t{A.num_kv_heads} * ((q_len + kQueryTile - 1) / kQueryTile);
  }
  const bool avx2 = use_avx2() && A.head_dim % 8 == 0;
  const bool avx512 = use_avx512() && A.head_dim % 16 == 0;
  auto run = [&A, off, avx2, avx512](int64_t begin, int64_t end) {
    int s = static_cast<int>(std::upper_bound(off, off + A.num_seqs + 1, begin) - off) - 1;
    for (int64_t item = begin; item < end; ++item) {
      while (item >= off[s + 1]) ++s;
      const int q_len = A.query_start[s + 1] - A.query_start[s];
      const int tiles = (q_len + kQueryTile - 1) / kQueryTile;
      const int64_t local = item - off[s];
      const int kv_head = static_cast<int>(local / tiles);
      const int tile = static_cast<int>(local % tiles);
      const int j0 = tile * kQueryTile, j1 = std::min(q_len, j0 + kQueryTile);
#if defined(TROUPE_KERNELS_HAVE_AVX512_VNNI)
      if (avx512) {
        attend_item_avx512(A, s, kv_head, j0, j1);
        continue;
      }
#endif
#if defined(TROUPE_KERNELS_HAVE_AVX2)
      if (avx2) {
        attend_item_avx2(A, s, kv_head, j0, j1);
        continue;
      }
#endif
      attend_item_scalar(A, s, kv_head, j0, j1);
    }
  };
  const int64_t total = off[A.num_seqs];
  if (pool && total > 1)
    pool->parallel_for(total, run);
  else
    run(0, total);
}

}  // namespace troupe::kernels::cpu
