#include "kernels/cpu/paged_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int kQueryTile = 16;  // queries of one (sequence, head) per work item: balances causal prefill
constexpr int kKeyChunk = 64;   // keys scored before one online-softmax update
constexpr int kMaxHeadDim = 256;

// One query row against keys [0, n_keys) of a sequence, online softmax over chunks.
void attend_one(const PagedAttentionArgs& A, const int32_t* block_table, int kv_head, const float* q, int n_keys,
                float* out) {
  const int hd = A.head_dim;
  const int64_t kv_stride = int64_t{A.num_kv_heads} * hd;
  float acc[kMaxHeadDim];
  float scores[kKeyChunk];
  std::fill(acc, acc + hd, 0.0f);
  float m = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  for (int c0 = 0; c0 < n_keys; c0 += kKeyChunk) {
    const int cn = std::min(kKeyChunk, n_keys - c0);
    float cmax = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < cn; ++i) {
      const int t = c0 + i;
      const int64_t slot = int64_t{block_table[t / A.block_size]} * A.block_size + t % A.block_size;
      scores[i] = dot_f32(q, A.k_cache + slot * kv_stride + int64_t{kv_head} * hd, hd) * A.scale;
      cmax = std::max(cmax, scores[i]);
    }
    if (cmax > m) {
      const float f = std::exp(m - cmax);  // exp(-inf) = 0 on the first chunk
      sum *= f;
      for (int d = 0; d < hd; ++d) acc[d] *= f;
      m = cmax;
    }
    for (int i = 0; i < cn; ++i) {
      const int t = c0 + i;
      const int64_t slot = int64_t{block_table[t / A.block_size]} * A.block_size + t % A.block_size;
      const float w = std::exp(scores[i] - m);
      sum += w;
      axpy_f32(w, A.v_cache + slot * kv_stride + int64_t{kv_head} * hd, acc, hd);
    }
  }
  const float inv = sum > 0 ? 1.0f / sum : 0.0f;
  for (int d = 0; d < hd; ++d) out[d] = acc[d] * inv;
}

}  // namespace

void paged_kv_store(float* k_cache, float* v_cache, const float* k, const float* v, const int64_t* slot_mapping,
                    int64_t n_tokens, int64_t kv_dim) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding token: nothing to store
    std::memcpy(k_cache + slot * kv_dim, k + t * kv_dim, kv_dim * sizeof(float));
    std::memcpy(v_cache + slot * kv_dim, v + t * kv_dim, kv_dim * sizeof(float));
  }
}

void paged_attention(const PagedAttentionArgs& A, ThreadPool* pool) {
  // Work items: (sequence, head, tile of kQueryTile queries), numbered through work_offsets.
  int64_t* off = A.work_offsets;
  off[0] = 0;
  for (int s = 0; s < A.num_seqs; ++s) {
    const int q_len = A.query_start[s + 1] - A.query_start[s];
    off[s + 1] = off[s] + int64_t{A.num_heads} * ((q_len + kQueryTile - 1) / kQueryTile);
  }
  const int group = A.num_heads / A.num_kv_heads;
  const int64_t q_stride = int64_t{A.num_heads} * A.head_dim;
  auto run = [&A, off, group, q_stride](int64_t begin, int64_t end) {
    int s = static_cast<int>(std::upper_bound(off, off + A.num_seqs + 1, begin) - off) - 1;
    for (int64_t item = begin; item < end; ++item) {
      while (item >= off[s + 1]) ++s;
      const int q_len = A.query_start[s + 1] - A.query_start[s];
      const int tiles = (q_len + kQueryTile - 1) / kQueryTile;
      const int64_t local = item - off[s];
      const int head = static_cast<int>(local / tiles);
      const int tile = static_cast<int>(local % tiles);
      const int first_pos = A.seq_lens[s] - q_len;
      for (int j = tile * kQueryTile; j < std::min(q_len, (tile + 1) * kQueryTile); ++j) {
        const int64_t row = A.query_start[s] + j;
        attend_one(A, A.block_tables[s], head / group, A.q + row * q_stride + int64_t{head} * A.head_dim,
                   first_pos + j + 1, A.out + row * q_stride + int64_t{head} * A.head_dim);
      }
    }
  };
  const int64_t total = off[A.num_seqs];
  if (pool && total > 1)
    pool->parallel_for(total, run);
  else
    run(0, total);
}

}  // namespace troupe::kernels::cpu
