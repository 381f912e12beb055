// The sim accelerator's kernels: plain, single-threaded C++ over real
// (already translated) pointers and shapes. Clarity over speed: each is the
// textbook definition of its op. They know nothing of the device or the SDK's
// classes beyond the element types.
#pragma once

#include <cstdint>

#include "troupe/dtype.hpp"

namespace sim::kernels {

/// Weight types the kernels read: f32, f16 and bf16.
bool reads_weight_type(troupe::DType type);
/// Bytes of one row of `n` elements of `type` (a supported type).
int64_t row_bytes(troupe::DType type, int64_t n);
/// Row `row` of a weight (ne[0] = n elements per row, `stride` bytes apart) as f32.
void weight_row(troupe::DType type, const uint8_t* w, int64_t stride, int64_t row, int64_t n, float* out);

/// y[t][o] = sum_i x[t][i] * W[o][i]; W has `out` rows of `in` elements, `stride` bytes apart.
void matmul(troupe::DType type, const uint8_t* w, int64_t stride, int64_t in, int64_t out, const float* x,
            int64_t n_tokens, float* y);
void rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out);
void rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta, bool neox);
/// rope with pair i's frequency divided by freq_factors[i] (null: 1) and both outputs times
/// mscale (named_ops::RopeFreqFactors: Llama 3's rope_freqs, linear scaling).
void rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                       bool neox, const float* freq_factors, float mscale);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void add_inplace(float* y, const float* x, int64_t n);
void layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                float* out);
void gelu(const float* x, int64_t n, float* out);
/// Gemma's: gelu_tanh(gate) * up; cap * tanh(x / cap) in place; x *= factor in place.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
/// The mixture-of-experts row ops (troupe/named_ops/moe_ops.hpp), sums in double.
void gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst);
void scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                      float* dst);
void swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);
void softcap(float* x, int64_t n, float cap);
/// GPT-2's: gelu_tanh(x) (out may alias x).
void gelu_tanh(const float* x, int64_t n, float* out);
void scale(float* x, int64_t n, float factor);
void add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim);
void dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                     int num_seqs, int n_heads, int head_dim, float scale, bool causal);

/// One token from a row of logits (troupe::TokenSelection's rule): argmax at temperature <= 0,
/// else the u-quantile of the tempered distribution cut by min_p, top_k and top_p, walked in
/// descending probability order.
int32_t select_token(const float* logits, int64_t vocab, float temperature, float top_p, float min_p, int32_t top_k,
                     double u);

/// One layer's paged KV cache: [num_slots][kv_dim] keys and values, f32 or f16.
struct KvLayer {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
  bool f16 = true;
  int64_t kv_dim = 0;
};
/// Writes k/v rows [n_tokens][kv_dim] to their slots; a negative slot (padding) is skipped.
void kv_store(const KvLayer& cache, const float* k, const float* v, const int64_t* slots, int64_t n_tokens);
/// Causal attention of query rows [q_begin, q_end) of one sequence over its cached positions
/// [0, seq_len): query row j sits at position seq_len - (q_end - q_begin) + j. `slot_of(p)`
/// gives the cache slot of position p (block table lookup). window > 0: a row at p sees only
/// (p - window, p]; softcap > 0: scores are softcap * tanh(score / softcap); sinks (host
/// memory, one per head, or nullptr): one more term exp(sink) in each head's denominator.
template <class SlotOf>
void paged_attention_seq(const KvLayer& cache, const float* q, float* out, int64_t q_begin, int64_t q_end,
                         int64_t seq_len, int num_heads, int num_kv_heads, int head_dim, float scale,
                         int64_t window, float softcap, const float* sinks, SlotOf&& slot_of, float* scores,
                         float* key_row);

}  // namespace sim::kernels

#include "sim_kernels_attention.inl"
