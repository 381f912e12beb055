// Peak integer multiply-add rate of the AVX2 instruction sequences the int8
// dot products use, measured on the calling thread with many independent
// accumulators (register-resident, so neither memory nor latency limits it).
#pragma once

#include <cstdint>

namespace troupe::bench {

/// MACs done by `iterations` of the loop of mac_peak_* (for the rate).
int64_t mac_peak_macs(int64_t iterations);
/// vpmaddubsw (32 u8 x s8 products) then vpmaddwd by ones and vpaddd: the
/// usual AVX2 int8 dot (llama.cpp's). Returns a checksum so the work stays.
int64_t mac_peak_maddubs(int64_t iterations);
/// vpmaddwd on 16-bit operands (16 products) then vpaddd: troupe's q8/q4_1
/// kernels after widening the weights to 16 bits.
int64_t mac_peak_maddwd(int64_t iterations);

}  // namespace troupe::bench
