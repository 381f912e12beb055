// Internal contract between the matmul front end (matmul.cpp) and the
// per-ISA kernels (matmul_scalar.cpp, matmul_avx2.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/quant_blocks.hpp"
#include "troupe/dtype.hpp"

namespace troupe::kernels::cpu {

/// One matmul, y[t][o] = sum_i x[t][i] * W[o][i], with the activations already
/// converted to what the weight type's dot product consumes.
struct MatmulArgs {
  DType type;
  const uint8_t* w;        // out rows of w_row_bytes, w_row_stride bytes apart
  int64_t w_row_bytes;
  int64_t w_row_stride;    // >= w_row_bytes: a column slice of a wider matrix keeps its row stride
  int64_t in;
  int64_t out;
  int64_t n_tokens;
  const float* xf;         // float activations [n_tokens][in] (F32/F16/BF16 weights)
  const uint8_t* xq;       // quantized activations, one row of xq_row_bytes per token
  int64_t xq_row_bytes;
  // 32-element block types: the first tokens again, in groups with tokens in lanes
  // ([group][block]); the tokens after them are read from xq one by one. Isa::avx512_vnni
  // gets groups of 16 (xg16, act_groups16()), the other ISAs groups of 8 (xg, act_groups()).
  const ActQ16x8* xg;
  const ActQ16x16* xg16;
  int64_t n_groups;
  // The K-quants and IQ4_XS on the AVX2 ISAs: the first 16 * n_groups_k tokens again in
  // ActQ8Kx16 groups ([group][super-block]); the tokens after them are read from xq.
  const ActQ8Kx16* xk16;
  int64_t n_groups_k;
  // Q4_0, Q5_0 and IQ4_NL (ActQ8 rows in xq): the first 16 * n_groups8 tokens again in ActQ8x16
  // groups ([group][block]); the tokens after them are read from xq.
  const ActQ8x16* xg8;
  int64_t n_groups8;
  float* y;                // [n_tokens][out]
};

/// Groups of 8 tokens a batched matmul of the 32-element block types gives the
/// kernels in ActQ16x8 form (Q4_1, Q5_1, Q8_0 on the 8-token ISAs): whole groups, and a
/// last partial group of at least 4 tokens (zero lanes cost less than that many tokens'
/// row passes, which read the weights again). On plain AVX2, fewer than 8 tokens take
/// no group: the 8-row tiles of up to 4 tokens (rows8_tokens_q16) run faster (Zen 3, one
/// thread, 2048 x 1024, GMAC/s, group -> rows: Q4_1 at 4 / 5 / 6 / 7 tokens 15.0 / 18.6 /
/// 22.3 / 26.0 -> 27.9 / 24.1 / 25.1 / 26.8, Q5_1 13.9 / 17.4 / 20.9 / 24.3 -> 24.9 /
/// 20.2 / 21.5 / 23.0, Q8_0 at 6 25.3 -> 29.8); after a whole group the group wins
/// (12 tokens: Q4_1 30.9 against 29.1 as 8 + 4 rows, Q8_0 37.8 against 33.6).
inline int64_t act_groups(Isa isa, int64_t n_tokens) {
  if (isa == Isa::avx2 && n_tokens < 8) return 0;
  return n_tokens / 8 + (n_tokens % 8 >= 4 ? 1 : 0);
}
/// The same in groups of 16 tokens (Isa::avx512_vnni), whose last partial group
/// has at least kSmallBatch16 tokens: up to 12 run faster with the rows in lanes
/// (rows16_tokens in matmul_avx512_vnni.cpp), since a group costs 16 tokens' work.
constexpr int64_t kSmallBatch16 = 13;
inline int64_t act_groups16(int64_t n_tokens) { return n_tokens / 16 + (n_tokens % 16 >= kSmallBatch16 ? 1 : 0); }
/// Tokens per group for an ISA's batched 32-element block kernels.
inline int group_tokens(Isa isa) { return isa == Isa::avx512_vnni ? 16 : 8; }

/// Computes rows [o_begin, o_end) of y for all tokens.
///
/// Every kernel of the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) on
/// every ISA computes y[t][o] with the same operations, so a result never depends
/// on the batch (or ISA) it was computed in: per block b, the exact integer dot
/// product S of the weight levels and the activations (8-bit ActQ8 for Q4_0, Q5_0
/// and IQ4_NL, 16-bit ActQ16 for Q4_1, Q5_1 and Q8_0), then
///   acc = fma(float(S), d_w[b] * d_x[b], acc);  acc = fma(m_w[b], s_x[b], acc) (type-1 only)
/// in block order from acc = 0, and y = acc.
///
/// The K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS are bit-identical across
/// ISAs too: per super-block b, the exact integer sums S = sum over groups of
/// scale[g] * (levels . activations of g) (Q6_K: levels - 32) and (types with mins)
/// M = sum over groups of min[g] * bsums of g, then
///   acc = fma(float(S), d_w[b] * d_x[b], acc);  acc = fma(-float(M), dmin_w[b] * d_x[b], acc)
/// in super-block order from acc = 0; Q4_K combines its two terms, which largely cancel,
/// before they meet the accumulator:
///   acc = acc + fma(float(S), d_w[b] * d_x[b], -(float(M) * (dmin_w[b] * d_x[b])))
using MatmulRangeFn = void (*)(const MatmulArgs& args, int64_t o_begin, int64_t o_end);

/// Which activation format a weight type's dot product wants.
/// q8: ActQ16 (16-bit, 32-element blocks); q8_32: ActQ8 (8-bit, 32-element blocks);
/// q8k: ActQ8K (8-bit, 256-element super-blocks).
enum class ActFormat { f32, q8, q8k, q8_32 };
ActFormat act_format(DType type);

/// Kernels per ISA; nullptr for a type the ISA does not handle.
MatmulRangeFn matmul_kernel_scalar(DType type);
MatmulRangeFn matmul_kernel_avx2(DType type);       // only when built for x86-64
MatmulRangeFn matmul_kernel_avx2_vnni(DType type);  // only when the compiler knows AVX-VNNI
MatmulRangeFn matmul_kernel_avx512_vnni(DType type);  // only when the compiler knows AVX-512 VNNI
MatmulRangeFn matmul_kernel_kquant_avx512(DType type);  // K-quants, IQ4_XS on 512-bit vectors (matmul_kquant_avx512.cpp)
MatmulRangeFn matmul_kernel_q4q5_avx512(DType type);    // Q4_0 Q5_0 on 512-bit vectors (matmul_q4q5_avx512.cpp)
/// Decode of Q4_K, Q5_K and Q6_K on 512-bit vectors (matmul_kquant_decode_avx512.cpp): rows
/// [o0, o1) of the tokens from t_begin on, when there are 1 to 4 of them (Q6_K: 2 to 4), 16
/// rows at a time.
/// Returns the first row it left (o1 less the rows past the last whole 16; o0 when it did
/// nothing) for the other kernels.
int64_t kquant_decode_avx512(const MatmulArgs& args, int64_t o0, int64_t o1, int64_t t_begin);

/// Activation quantizers (quantize.cpp), shared by all ISAs so both see the
/// same integers. n is a multiple of the block size.
void quantize_act_q16(const float* x, int64_t n, ActQ16* out);
/// The same integers as quantize_act_q16, vectorized (matmul_avx2.cpp).
void quantize_act_q16_avx2(const float* x, int64_t n, ActQ16* out);
/// Group of 16 tokens from their ActQ16 rows (rows[t * nb + b] is block b of token t,
/// t < n <= 16): tokens in lanes, lanes from n on zero (matmul_avx512_vnni.cpp).
void act_group16_avx512(const ActQ16* rows, int64_t nb, int n, ActQ16x16* group);
void quantize_act_q8k(const float* x, int64_t n, ActQ8K* out);
/// The same integers as quantize_act_q8k, vectorized (matmul_avx2.cpp).
void quantize_act_q8k_avx2(const float* x, int64_t n, ActQ8K* out);
/// Group of 16 tokens from their ActQ8K rows (rows[t * nb + b], t < n <= 16): tokens in
/// lanes, lanes from n on zero (matmul_kquant_avx512.cpp).
void act_group16_q8k_avx512(const ActQ8K* rows, int64_t nb, int n, ActQ8Kx16* group);
/// The same, portable (quantize.cpp), for the AVX2 ISAs.
void act_group16_q8k(const ActQ8K* rows, int64_t nb, int n, ActQ8Kx16* group);
void quantize_act_q8(const float* x, int64_t n, ActQ8* out);
/// The same integers as quantize_act_q8, vectorized (matmul_avx2.cpp).
void quantize_act_q8_avx2(const float* x, int64_t n, ActQ8* out);
/// Group of 16 tokens from their ActQ8 rows (rows[t * nb + b], t < n <= 16): tokens in
/// lanes, lanes from n on zero (quantize.cpp).
void act_group16_q8(const ActQ8* rows, int64_t nb, int n, ActQ8x16* group);
/// Groups of 16 tokens the ActQ8 kernels of the AVX2 ISAs take as ActQ8x16: whole
/// groups, and a last partial one of at least min_partial_group16_q8 tokens (fewer run
/// as row tiles). Plain AVX2 alone, from 10 (9 after whole groups): 8 and 9 tokens run
/// faster as 4-token passes over 8-row tiles (Zen 3, one thread, 2048 x 1024, 8 tokens:
/// Q4_0 44.5 -> 55.9, Q5_0 33.3 -> 42.8, IQ4_NL 24.1 -> 32.7 GMAC/s; at 10 the group
/// wins). After whole groups the rows read the weights a second time: 25 tokens as 16 +
/// 9 rows measured Q4_0 72.8 -> 70.3, Q5_0 56.9 -> 51.3, and 24 as 16 + 8 rows 69.9 ->
/// 73.5, 54.6 -> 55.2. AVX-VNNI keeps 8 (not measured), AVX-512 VNNI kSmallBatch16.
inline int64_t min_partial_group16_q8(Isa isa, int64_t n_tokens) {
  if (isa == Isa::avx512_vnni) return kSmallBatch16;
  if (isa == Isa::avx2) return n_tokens < 16 ? 10 : 9;
  return 8;
}
inline int64_t act_groups16_q8(Isa isa, int64_t n_tokens) {
  if (!is_avx2(isa)) return 0;
  return n_tokens / 16 + (n_tokens % 16 >= min_partial_group16_q8(isa, n_tokens) ? 1 : 0);
}
/// Groups of 16 tokens the K-quant (and Q2_K/Q3_K/IQ4_XS) kernels of the AVX2 ISAs take
/// as ActQ8Kx16: whole groups, and on plain AVX2 a last partial one of at least 9
/// tokens. The R x T tiles take 8 tokens per pass, so 9 ran as 8 + 1 at a single
/// token's rate; a group costs 16 tokens' work whatever it holds. Zen 3, one thread,
/// 2048 x 1024, GMAC/s, rows -> partial group: 9 tokens Q4_K 31.2 -> 54.2, Q5_K 29.6 ->
/// 46.4, Q6_K 31.6 -> 42.6, Q3_K 31.4 -> 38.1, IQ4_XS 22.2 -> 28.7; 15 tokens Q4_K 51.2
/// -> 88.7; at 8 the 8-token tile and the group are even. AVX-VNNI and AVX-512 VNNI
/// keep whole groups (their group tiles store all 16 lanes; not measured).
inline int64_t act_groups16_q8k(Isa isa, int64_t n_tokens) {
  if (!is_avx2(isa)) return 0;
  return n_tokens / 16 + (isa == Isa::avx2 && n_tokens % 16 >= 9 ? 1 : 0);
}

/// One matrix prepared against quantized activations, for callers that split the rows of
/// several matrices over the threads themselves (the mixture-of-experts op, moe_ffn.cpp):
/// run_prepared(p, o0, o1) computes rows [o0, o1) of p's y, exactly as matmul() would.
struct PreparedMatrix {
  MatmulArgs args{};
  MatmulRangeFn kernel = nullptr;
  bool stage = false;  // results through the staging buffer (matmul.cpp, run_rows)
};
/// Bytes prepare_matrix needs for the activations of `type` against n_tokens rows of `in`.
size_t prepared_activation_bytes(Isa isa, DType type, int64_t in, int64_t n_tokens);
/// Quantizes x [n_tokens][in] as job.type's dot product wants into `act` (64-byte aligned,
/// prepared_activation_bytes of it; unused for float weights), on the calling thread, and
/// prepares the matrix against it.
void prepare_matrix(Isa isa, const MatmulJob& job, int64_t in, const float* x, int64_t n_tokens, uint8_t* act,
                    PreparedMatrix* p);
/// Another matrix against `like`'s activations (its type must want the same format).
void prepare_matrix_like(Isa isa, const PreparedMatrix& like, const MatmulJob& job, int64_t in, const float* x,
                         int64_t n_tokens, PreparedMatrix* p);
void run_prepared(const PreparedMatrix& p, int64_t o0, int64_t o1);

/// Tokens processed per pass over a row tile: bounds the quantized activations
/// touched per pass so they stay in L2 while weights stream once.
constexpr int64_t kTokenChunk = 64;

}  // namespace troupe::kernels::cpu
