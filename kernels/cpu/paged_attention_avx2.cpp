// Paged attention work items with AVX2/FMA/F16C (this file alone is built with
// -mavx2 -mfma -mf16c). One item is one (sequence, kv head, query tile): per
// chunk of kKeyChunk keys the chunk's K and V rows are read from the cache once
// (f16 converted once), K transposed, and every query head of the kv head and
// every query of the tile is scored against them, 8 keys per vector.
//
// Per query row and head the operations are fixed: score_i = (sum over d in
// order of q[d] * k_i[d], one fma chain) * scale; per chunk the running max,
// exp and sum in key order, acc = acc * f + sum_i w_i * v_i in key order;
// finally acc / sum. So a row's result is the same in any tile or batch.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "kernels/cpu/paged_attention_impl.hpp"

namespace troupe::kernels::cpu {
namespace {

// A chunk's keys transposed (kt[d][i]) and values (v[i][d]) in f32, for head_dim <= 256.
struct ChunkScratch {
  alignas(32) float kt[kMaxHeadDim * kKeyChunk];
  alignas(32) float v[kKeyChunk * kMaxHeadDim];
};

inline void load_row(KvDtype dtype, const void* cache, int64_t offset, int hd, float* dst) {
  if (dtype == KvDtype::f16) {
    const auto* src = static_cast<const uint16_t*>(cache) + offset;
    for (int d = 0; d < hd; d += 8)
      _mm256_store_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
  } else {
    std::memcpy(dst, static_cast<const float*>(cache) + offset, static_cast<size_t>(hd) * sizeof(float));
  }
}

// Keys [c0, c0 + n) of kv head `kv_head` into scratch; kt lanes up to a multiple of 8 are zero.
void load_chunk(const PagedAttentionArgs& A, const int32_t* table, int kv_head, int c0, int n, ChunkScratch* s) {
  const int hd = A.head_dim;
  const int64_t kv_stride = int64_t{A.num_kv_heads} * hd;
  const int n8 = (n + 7) & ~7;
  alignas(32) float row[kMaxHeadDim];
  for (int i = 0; i < n; ++i) {
    const int t = c0 + i;
    const int64_t base =
        (int64_t{table[t / A.block_size]} * A.block_size + t % A.block_size) * kv_stride + int64_t{kv_head} * hd;
    load_row(A.kv_dtype, A.k_cache, base, hd, row);
    for (int d = 0; d < hd; ++d) s->kt[d * kKeyChunk + i] = row[d];
    load_row(A.kv_dtype, A.v_cache, base, hd, s->v + i * hd);
  }
  for (int i = n; i < n8; ++i)
    for (int d = 0; d < hd; ++d) s->kt[d * kKeyChunk + i] = 0.0f;
}

// scores[i] = (q . k_i) * scale for i < n (n <= kKeyChunk), 8 keys per accumulator.
inline void score_chunk(const float* q, const ChunkScratch& s, int hd, int n, float scale, float* scores) {
  const int groups = (n + 7) / 8;
  __m256 acc[kKeyChunk / 8];
  for (int g = 0; g < kKeyChunk / 8; ++g) acc[g] = _mm256_setzero_ps();
  if (groups == kKeyChunk / 8) {
    for (int d = 0; d < hd; ++d) {
      const __m256 qd = _mm256_broadcast_ss(q + d);
      const float* kt = s.kt + d * kKeyChunk;
      for (int g = 0; g < kKeyChunk / 8; ++g) acc[g] = _mm256_fmadd_ps(qd, _mm256_load_ps(kt + 8 * g), acc[g]);
    }
  } else {
    for (int d = 0; d < hd; ++d) {
      const __m256 qd = _mm256_broadcast_ss(q + d);
      const float* kt = s.kt + d * kKeyChunk;
      for (int g = 0; g < groups; ++g) acc[g] = _mm256_fmadd_ps(qd, _mm256_load_ps(kt + 8 * g), acc[g]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
  for (int g = 0; g < groups; ++g) _mm256_storeu_ps(scores + 8 * g, _mm256_mul_ps(acc[g], sc));
}

// Per (query, head) state across chunks; acc lives in the output row.
struct RowState {
  float m;
  float sum;
};

}  // namespace

void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) dst[i] = static_cast<uint16_t>(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

void attend_item_avx2(const PagedAttentionArgs& A, int s, int kv_head, int j0, int j1) {
  thread_local std::unique_ptr<ChunkScratch> scratch_owner;  // 128 KiB: on the heap, once per thread
  if (!scratch_owner) scratch_owner.reset(new ChunkScratch);
  ChunkScratch& scratch = *scratch_owner;
  const int hd = A.head_dim;
  const int group = A.num_heads / A.num_kv_heads;
  const int64_t q_stride = int64_t{A.num_heads} * hd;
  const int q_len = A.query_start[s + 1] - A.query_start[s];
  const int first_pos = A.seq_lens[s] - q_len;
  const int32_t* table = A.block_tables[s];
  constexpr int kMaxStates = kQueryTile * 64;  // queries x heads per kv head (group <= 64)
  RowState state[kMaxStates];
  const int n_rows = (j1 - j0) * group;
  if (group > 64) {  // not a shape any model has; stay correct anyway
    attend_item_scalar(A, s, kv_head, j0, j1);
    return;
  }
  for (int r = 0; r < n_rows; ++r) state[r] = {-std::numeric_limits<float>::infinity(), 0.0f};
  for (int j = j0; j < j1; ++j)
    for (int g = 0; g < group; ++g)
      std::fill_n(A.out + (A.query_start[s] + j) * q_stride + int64_t{kv_head * group + g} * hd, hd, 0.0f);

  const int max_keys = first_pos + j1;  // the last query's keys
  alignas(32) float scores[kKeyChunk];
  for (int c0 = 0; c0 < max_keys; c0 += kKeyChunk) {
    load_chunk(A, table, kv_head, c0, std::min(kKeyChunk, max_keys - c0), &scratch);
    for (int j = j0; j < j1; ++j) {
      const int n_keys = first_pos + j + 1;
      if (n_keys <= c0) continue;
      const int cn = std::min(kKeyChunk, n_keys - c0);
      const int64_t row = A.query_start[s] + j;
      for (int g = 0; g < group; ++g) {
        const int64_t h = int64_t{kv_head} * group + g;
        const float* q = A.q + row * q_stride + h * hd;
        float* acc = A.out + row * q_stride + h * hd;
        RowState& st = state[(j - j0) * group + g];
        score_chunk(q, scratch, hd, cn, A.scale, scores);
        float cmax = -std::numeric_limits<float>::infinity();
        for (int i = 0; i < cn; ++i) cmax = std::max(cmax, scores[i]);
        if (cmax > st.m) {
          const float f = std::exp(st.m - cmax);  // exp(-inf) = 0 on the first chunk
          st.sum *= f;
          const __m256 fv = _mm256_set1_ps(f);
          for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), fv));
          st.m = cmax;
        }
        for (int i = 0; i < cn; ++i) {
          const float w = std::exp(scores[i] - st.m);
          st.sum += w;
          scores[i] = w;
        }
        // acc += sum_i w_i v_i, keys in order; eight lanes of acc at a time.
        for (int d = 0; d < hd; d += 32) {
          const int lanes = std::min(32, hd - d);
          if (lanes == 32) {
            __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
            __m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
            for (int i = 0; i < cn; ++i) {
              const __m256 w = _mm256_broadcast_ss(scores + i);
              const float* v = scratch.v + i * hd + d;
              a0 = _mm256_fmadd_ps(w, _mm256_load_ps(v), a0);
              a1 = _mm256_fmadd_ps(w, _mm256_load_ps(v + 8), a1);
              a2 = _mm256_fmadd_ps(w, _mm256_load_ps(v + 16), a2);
              a3 = _mm256_fmadd_ps(w, _mm256_load_ps(v + 24), a3);
            }
            _mm256_storeu_ps(acc + d, a0);
            _mm256_storeu_ps(acc + d + 8, a1);
            _mm256_storeu_ps(acc + d + 16, a2);
            _mm256_storeu_ps(acc + d + 24, a3);
          } else {
            for (int e = d; e < d + lanes; e += 8) {
              __m256 a = _mm256_loadu_ps(acc + e);
              for (int i = 0; i < cn; ++i)
                a = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + i), _mm256_load_ps(scratch.v + i * hd + e), a);
              _mm256_storeu_ps(acc + e, a);
            }
          }
        }
      }
    }
  }
  for (int j = j0; j < j1; ++j)
    for (int g = 0; g < group; ++g) {
      const RowState& st = state[(j - j0) * group + g];
      float* acc = A.out + (A.query_start[s] + j) * q_stride + int64_t{kv_head * group + g} * hd;
      const __m256 inv = _mm256_set1_ps(st.sum > 0 ? 1.0f / st.sum : 0.0f);
      for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), inv));
    }
}

}  // namespace troupe::kernels::cpu
