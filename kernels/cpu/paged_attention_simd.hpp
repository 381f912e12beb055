// Paged attention work items on SIMD vectors, included by one translation unit per ISA
// (paged_attention_avx2.cpp: 8-lane AVX2/FMA/F16C; paged_attention_avx512.cpp: 16-lane
// AVX-512). One item is one (sequence, kv head, query tile): per chunk of kKeyChunk keys
// the chunk's K and V rows are read from the cache once (f16 converted once) and every
// query head of the kv head and every query of the tile is scored against them, 4 keys
// at a time.
//
// Per query row and head the operations are fixed: score_i = (q . k_i, 8 lanes (lane l
// takes d = l mod 8, in order), then a fixed tree) * scale, soft-capped when asked;
// keys outside the row's window are -inf; per chunk the running max, the weights
// exp(score - max) (vector exp) summed lane-wise then in a fixed tree, and
// acc = acc * f + sum_i w_i v_i in key order (per element, whatever the vector width);
// finally acc / sum. So a row's result is the same in any tile or batch, and on AVX2 and
// AVX-512.
//
// V is the vector policy: W lanes of float (V::F), load/store, fma and the f16 row
// conversion for the values; the keys' scratch layout (store_key_row, zero_key_row) and
// score4, four keys' dot products with one query, whose operations are the same on
// every ISA (8 lanes, then a fixed tree), so the ISAs agree bit for bit.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "kernels/cpu/paged_attention_impl.hpp"
#include "kernels/cpu/vec_exp_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

// A chunk's keys and values in f32, row by row ([i][d]), for head_dim <= 256.
struct ChunkScratch {
  alignas(64) float k[kKeyChunk * kMaxHeadDim];
  alignas(64) float v[kKeyChunk * kMaxHeadDim];
};

template <class V>
inline void load_row(KvDtype dtype, const void* cache, int64_t offset, int hd, float* dst) {
  if (dtype == KvDtype::f16) {
    const auto* src = static_cast<const uint16_t*>(cache) + offset;
    for (int d = 0; d < hd; d += V::W) V::store(dst + d, V::from_f16(src + d));
  } else {
    std::memcpy(dst, static_cast<const float*>(cache) + offset, static_cast<size_t>(hd) * sizeof(float));
  }
}

// Rows ahead of the one being converted that are prefetched: a sequence's blocks are
// scattered, so the hardware sees a stream only within a block.
constexpr int kPrefetchRows = 32;

inline void prefetch_row(const void* cache, int64_t byte_offset, int64_t bytes) {
  const char* p = static_cast<const char*>(cache) + byte_offset;
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

// Keys and values [c0, c0 + n) of kv head `kv_head` into scratch; key rows up to a multiple of 4 are
// zero. Rows up to `end` (the item's last key) are prefetched ahead, across chunks.
template <class V>
void load_chunk(const PagedAttentionArgs& A, const int32_t* table, int kv_head, int c0, int n, int end, bool first,
                ChunkScratch* s) {
  const int hd = A.head_dim;
  const int64_t elem = kv_elem_bytes(A.kv_dtype);
  auto offset = [&](int t) { return kv_row_offset(A, table, t, kv_head); };
  if (first) {  // the item's first rows: nothing prefetched them
    for (int t = c0; t < std::min(end, c0 + kPrefetchRows); ++t) {
      const int64_t at = offset(t) * elem;
      prefetch_row(A.k_cache, at, hd * elem);
      prefetch_row(A.v_cache, at, hd * elem);
    }
  }
  for (int i = 0; i < n; ++i) {
    const int t = c0 + i;
    if (t + kPrefetchRows < end) {
      const int64_t ahead = offset(t + kPrefetchRows) * elem;
      prefetch_row(A.k_cache, ahead, hd * elem);
      prefetch_row(A.v_cache, ahead, hd * elem);
    }
    const int64_t base = offset(t);
    V::store_key_row(A.kv_dtype, A.k_cache, base, hd, i, s->k);
    load_row<V>(A.kv_dtype, A.v_cache, base, hd, s->v + i * hd);
  }
  for (int i = n; i < ((n + 3) & ~3); ++i) V::zero_key_row(hd, i, s->k);
}

// scores[i] = (q . k_i) * scale for i < n, n <= kKeyChunk, rounded up to 4 keys (rows past n
// are zero). A key's dot product: 8 lanes over d (lane l takes d = l mod 8, in order), then
// the lanes summed in a fixed tree (V::score4: the same operations on every ISA).
// Where the policy has score8 (8 independent chains), quads go in pairs; each key's
// operations are score4's either way.
template <class V>
inline void score_chunk(const float* q, const ChunkScratch& s, int hd, int n, float scale, float* scores) {
  const __m128 sc = _mm_set1_ps(scale);
  int i = 0;
  if constexpr (requires(__m128* r) { V::score8(q, s.k, hd, 0, r, r); }) {
    for (; i + 8 <= n; i += 8) {
      __m128 lo, hi;
      V::score8(q, s.k, hd, i, &lo, &hi);
      _mm_storeu_ps(scores + i, _mm_mul_ps(lo, sc));
      _mm_storeu_ps(scores + i + 4, _mm_mul_ps(hi, sc));
    }
  }
  for (; i < n; i += 4) _mm_storeu_ps(scores + i, _mm_mul_ps(V::score4(q, s.k, hd, i), sc));
}

// [k0 k1 k2 k3] partial sums per 128-bit half of four 8-lane dot products, then the halves added.
inline __m128 hsum4_8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// acc[0, hd) += sum_{i in [i0, cn)} w_i v_i, keys in order; 64 elements of acc at a
// time (8 AVX2 vectors: two FMA pipes of latency 4 want 8 chains; 4 AVX-512 vectors).
template <class V>
inline void accumulate_values(float* acc, const float* w, const ChunkScratch& s, int hd, int i0, int cn) {
  constexpr int kVecs = V::W >= 16 ? 4 : 8;
  constexpr int kSpan = kVecs * V::W;
  for (int d = 0; d < hd; d += kSpan) {
    if (hd - d >= kSpan) {
      typename V::F a[kVecs];
      for (int j = 0; j < kVecs; ++j) a[j] = V::loadu(acc + d + j * V::W);
      for (int i = i0; i < cn; ++i) {
        const typename V::F wi = V::broadcast(w + i);
        const float* v = s.v + i * hd + d;
        for (int j = 0; j < kVecs; ++j) a[j] = V::fma(wi, V::load(v + j * V::W), a[j]);
      }
      for (int j = 0; j < kVecs; ++j) V::storeu(acc + d + j * V::W, a[j]);
    } else {
      for (int e = d; e < hd; e += V::W) {
        typename V::F a = V::loadu(acc + e);
        for (int i = i0; i < cn; ++i) a = V::fma(V::broadcast(w + i), V::load(s.v + i * hd + e), a);
        V::storeu(acc + e, a);
      }
    }
  }
}

inline void scale_row(float* acc, int hd, float f) {
  const __m256 fv = _mm256_set1_ps(f);
  for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), fv));
}

// Per (query, head) state across chunks; acc lives in the output row.
struct RowState {
  float m;
  float sum;
};

template <class V>
void attend_item_simd(const PagedAttentionArgs& A, int s, int kv_head, int j0, int j1) {
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
  // The first query's first key (windows only move forward); chunks stay aligned to kKeyChunk.
  const int c_first = first_key(A, first_pos + j0) / kKeyChunk * kKeyChunk;
  alignas(32) float scores[kKeyChunk];
  for (int c0 = c_first; c0 < max_keys; c0 += kKeyChunk) {
    load_chunk<V>(A, table, kv_head, c0, std::min(kKeyChunk, max_keys - c0), max_keys, c0 == c_first, &scratch);
    for (int j = j0; j < j1; ++j) {
      const int n_keys = first_pos + j + 1;
      const int lo = first_key(A, first_pos + j);
      if (n_keys <= c0 || lo >= c0 + kKeyChunk) continue;
      const int cn = std::min(kKeyChunk, n_keys - c0);
      const int i0 = std::max(0, lo - c0);  // keys before the window take no part
      const int64_t row = A.query_start[s] + j;
      for (int g = 0; g < group; ++g) {
        const int64_t h = int64_t{kv_head} * group + g;
        const float* q = A.q + row * q_stride + h * hd;
        float* acc = A.out + row * q_stride + h * hd;
        RowState& st = state[(j - j0) * group + g];
        score_chunk<V>(q, scratch, hd, cn, A.scale, scores);
        if (A.softcap > 0)
          for (int i = i0; i < cn; ++i) scores[i] = A.softcap * std::tanh(scores[i] / A.softcap);
        // Keys before the window or past cn (this query's future, or the padding) take no
        // part: -inf scores, zero weights.
        for (int i = 0; i < i0; ++i) scores[i] = -std::numeric_limits<float>::infinity();
        for (int i = cn; i < kKeyChunk; ++i) scores[i] = -std::numeric_limits<float>::infinity();
        const int n8 = (cn + 7) & ~7;
        __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
        for (int i = 0; i < n8; i += 8) vmax = _mm256_max_ps(vmax, _mm256_load_ps(scores + i));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float cmax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        if (cmax > st.m) {
          // exp(-inf) = 0 on the first chunk.
          const float f = _mm256_cvtss_f32(exp256_ps(_mm256_set1_ps(st.m - cmax)));
          st.sum *= f;
          scale_row(acc, hd, f);
          st.m = cmax;
        }
        const __m256 mv = _mm256_set1_ps(st.m);
        __m256 wsum = _mm256_setzero_ps();
        for (int i = 0; i < n8; i += 8) {
          const __m256 w = exp256_ps(_mm256_sub_ps(_mm256_load_ps(scores + i), mv));
          _mm256_store_ps(scores + i, w);
          wsum = _mm256_add_ps(wsum, w);
        }
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(wsum), _mm256_extractf128_ps(wsum, 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        st.sum += _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
        accumulate_values<V>(acc, scores, scratch, hd, i0, cn);
      }
    }
  }
  for (int j = j0; j < j1; ++j)
    for (int g = 0; g < group; ++g) {
      const RowState& st = state[(j - j0) * group + g];
      const int h = kv_head * group + g;
      float* acc = A.out + (A.query_start[s] + j) * q_stride + int64_t{h} * hd;
      const float sum = st.sum + sink_weight(A, h, st.m);
      scale_row(acc, hd, sum > 0 ? 1.0f / sum : 0.0f);
    }
}

}  // namespace
}  // namespace troupe::kernels::cpu
