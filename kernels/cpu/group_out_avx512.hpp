// Writing out the results of batched row tiles with 16 tokens in lanes (the AVX-512
// translation units; internal linkage, each keeps its own copy).
//
// y is [token][row], so a tile's vector for one row holds 16 values a.out floats apart.
// Stored one float at a time, every tile touches 16 lines per group at a stride that is a
// multiple of 4 KiB: the same L1 sets, evicted by the activations streamed in between,
// which cost ~30% of a 32-token Q4_0 matmul. The tiles' vectors are staged here instead,
// kChunk rows at a time, then transposed 16 x 16 and written 16 consecutive rows per
// token. Pure data movement: the results are the same bits.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/transpose16_avx512.hpp"

namespace troupe::kernels::cpu {
namespace {

// Rows [base(), ...) of G groups of 16 tokens from group g0 on.
template <int G>
class GroupRowsOut {
 public:
  static constexpr int kChunk = 48;  // rows per flush: a multiple of 16 and of the tiles' rows (4, 6)

  GroupRowsOut(const MatmulArgs& a, int64_t g0, int64_t o0) : a_(a), g0_(g0), base_(o0) {}

  int64_t base() const { return base_; }
  // Row o's vector for group g; o - base() < kChunk + 16.
  void put(int64_t o, int g, __m512 v) { _mm512_store_ps(stage_[o - base_][g], v); }
  __m512 get(int64_t o, int g) const { return _mm512_load_ps(stage_[o - base_][g]); }
  // Writes rows [base(), o_end) of every group to y; the next rows start at o_end.
  void flush(int64_t o_end) {
    const int rows = static_cast<int>(o_end - base_);
    for (int g = 0; g < G; ++g) {
      const int64_t t0 = (g0_ + g) * 16;
      const int n = static_cast<int>(std::min<int64_t>(16, a_.n_tokens - t0));
      for (int k = 0; k < rows; k += 16) {
        // Rows past o_end are stale or never written: masked out below.
        __m512i in[16], out[16];
        for (int j = 0; j < 16; ++j) in[j] = _mm512_castps_si512(_mm512_load_ps(stage_[k + j][g]));
        transpose16(in, out);
        const __mmask16 m = rows - k >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (rows - k)) - 1);
        for (int l = 0; l < n; ++l)
          _mm512_mask_storeu_ps(a_.y + (t0 + l) * a_.out + base_ + k, m, _mm512_castsi512_ps(out[l]));
      }
    }
    base_ = o_end;
  }

 private:
  const MatmulArgs& a_;
  int64_t g0_;
  int64_t base_;
  alignas(64) float stage_[kChunk + 16][G][16];
};

}  // namespace
}  // namespace troupe::kernels::cpu
