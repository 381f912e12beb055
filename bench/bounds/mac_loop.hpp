// The loop every register-resident mac_peak_* runs (mac_peak.hpp): kAcc
// independent accumulators, each fed by one multiply-add step per round, with
// the shared operands made opaque every round so no product is loop-invariant,
// then a checksum of every 32-bit lane so the work stays.
//
// Included by files compiled with different instruction sets (mac_peak_avx2.cpp
// with -mavx2, mac_peak_x86.cpp with AVX-512 flags). Everything here sits in an
// unnamed namespace on purpose: each file gets its own copy, compiled for its
// own flags. With external linkage the linker would keep one copy for both, and
// the AVX2 path could run code compiled for AVX-512.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace troupe::bench {
namespace {

// Keep the compiler from treating `v` as loop-invariant (no instruction emitted).
inline void opaque(__m256i& v) { asm volatile("" : "+v"(v)); }
inline __m256i add_lanes(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
#if defined(__AVX512F__)
inline void opaque(__m512i& v) { asm volatile("" : "+v"(v)); }
inline __m512i add_lanes(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }
#endif

/// `iterations` rounds of: every vector of `b` made opaque, then acc[i] = step(acc[i], a[i], b)
/// for i < kAcc (acc[i] starts at zero, a[i] = make_a(i)). Returns the sum of every 32-bit lane
/// of every accumulator. Always inlined, so `b` stays a local of the caller, as it was when
/// each mac_peak_* wrote this loop out.
template <int kAcc, class V, int kB, class MakeA, class Step>
[[gnu::always_inline]] inline int64_t mac_loop(int64_t iterations, MakeA make_a, V (&b)[kB], Step step) {
  V acc[kAcc], a[kAcc];
  for (int i = 0; i < kAcc; ++i) {
    acc[i] = V{};
    a[i] = make_a(i);
  }
  // Unrolled by hand-holding the compiler: rolled (GCC at -O2 keeps the arrays in
  // memory then), each step became a load, the multiply-add and a store, and the
  // loop measured store forwarding, not the multiply-add units.
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (V& v : b) opaque(v);
#pragma GCC unroll 64
    for (int i = 0; i < kAcc; ++i) acc[i] = step(acc[i], a[i], b);
  }
  V s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = add_lanes(s, acc[i]);
  int32_t lanes[sizeof(V) / sizeof(int32_t)];
  std::memcpy(lanes, &s, sizeof s);
  int64_t t = 0;
  for (int32_t l : lanes) t += l;
  return t;
}

}  // namespace
}  // namespace troupe::bench
