// Peak integer multiply-add rate of the instruction sequences int8 dot
// products use, measured on the calling thread with many independent
// accumulators (register- or tile-resident, so neither memory nor latency
// limits it): AVX2 (troupe's kernels), AVX-512 VNNI and AMX (which llama.cpp
// uses where the CPU has them). Each loop returns a checksum so the work stays;
// mac_peak_*_macs gives the multiply-adds `iterations` of it do.
#pragma once

#include <cstdint>

namespace troupe::bench {

/// MACs done by `iterations` of mac_peak_maddubs, mac_peak_maddubs_i16 or mac_peak_maddwd.
int64_t mac_peak_macs(int64_t iterations);
/// vpmaddubsw (32 u8 x s8 products) then vpmaddwd by ones and vpaddd: the
/// usual AVX2 int8 dot (llama.cpp's). Returns a checksum so the work stays.
int64_t mac_peak_maddubs(int64_t iterations);
/// vpmaddubsw then vpaddw: the pair sums added in int16, as troupe's plain-AVX2
/// batched and small-batch kernels do over runs of a block (one vpmaddwd per run,
/// not counted here). No AVX2 int8 dot product does fewer operations per
/// multiply-add, so this is the ceiling of those kernels (the 16-bit sums wrap
/// here; the loop measures throughput only).
int64_t mac_peak_maddubs_i16(int64_t iterations);
/// vpmaddwd on 16-bit operands (16 products) then vpaddd: troupe's q8/q4_1
/// kernels after widening the weights to 16 bits.
int64_t mac_peak_maddwd(int64_t iterations);

/// Whether the CPU and OS run AVX-512 VNNI (with VL, for the 256-bit form), and AMX-INT8 (the latter asks the
/// kernel for the tile state once; false when it refuses).
bool have_avx512_vnni();
bool have_amx_int8();
/// vpdpbusd on 256-bit registers (32 u8 x s8 products each): llama.cpp's AVX2
/// dot products when its native build finds VNNI.
int64_t mac_peak_vnni256(int64_t iterations);
int64_t mac_peak_vnni256_macs(int64_t iterations);
/// vpdpbusd on 512-bit registers (64 u8 x s8 products each).
int64_t mac_peak_vnni512(int64_t iterations);
int64_t mac_peak_vnni512_macs(int64_t iterations);
/// vpdpwssd on 512-bit registers (32 s16 x s16 products each): troupe's batched
/// kernels of the 32-element block types when the CPU has AVX-512 VNNI.
int64_t mac_peak_wssd512(int64_t iterations);
int64_t mac_peak_wssd512_macs(int64_t iterations);
/// tdpbusd on 16x64-byte tiles (16 x 16 x 64 products each); have_amx_int8() first.
int64_t mac_peak_amx(int64_t iterations);
int64_t mac_peak_amx_macs(int64_t iterations);

}  // namespace troupe::bench
