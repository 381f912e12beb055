// Internal contract between the paged attention front end (paged_attention.cpp)
// and its per-ISA work items (the scalar ones there, paged_attention_avx2.cpp and
// paged_attention_avx512.cpp on paged_attention_simd.hpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/paged_attention.hpp"

namespace troupe::kernels::cpu {

constexpr int kQueryTile = 16;   // queries of one (sequence, kv head) per work item: balances causal prefill
constexpr int kKeyChunk = 64;    // keys scored before one online-softmax update
constexpr int kMaxHeadDim = 256;

/// Element offset of key/value row t (a sequence position) of kv head `kv_head` in the cache.
inline int64_t kv_row_offset(const PagedAttentionArgs& A, const int32_t* table, int t, int kv_head) {
  return ((int64_t{table[t / A.block_size]} * A.num_kv_heads + kv_head) * A.block_size + t % A.block_size) *
         A.head_dim;
}

/// The first key position a query at `pos` sees.
inline int first_key(const PagedAttentionArgs& A, int pos) {
  return A.window > 0 && pos - A.window + 1 > 0 ? pos - A.window + 1 : 0;
}

/// The sink's share of head `head`'s softmax denominator relative to the running max m:
/// exp(sink - m), or 0 without sinks. Added once, after every key, so a row's result still
/// depends on that row alone.
inline float sink_weight(const PagedAttentionArgs& A, int head, float m) {
  return A.sinks != nullptr ? std::exp(A.sinks[head] - m) : 0.0f;
}

/// One work item: queries [j0, j1) of sequence s, every query head of kv head `kv_head`.
void attend_item_scalar(const PagedAttentionArgs& args, int s, int kv_head, int j0, int j1);
/// The same with AVX2/FMA/F16C; head_dim must be a multiple of 8.
void attend_item_avx2(const PagedAttentionArgs& args, int s, int kv_head, int j0, int j1);
/// The same with AVX-512 (16 lanes); head_dim must be a multiple of 16.
void attend_item_avx512(const PagedAttentionArgs& args, int s, int kv_head, int j0, int j1);

/// n floats to f16, rounding to nearest even (F16C), bit-identical to fp32_to_fp16.
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n);

}  // namespace troupe::kernels::cpu
