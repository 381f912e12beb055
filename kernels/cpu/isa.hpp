// Run-time choice of the instruction set the kernels use.
#pragma once

namespace troupe::kernels::cpu {

/// avx2_vnni: AVX2/FMA/F16C plus AVX-VNNI (vpdpwssd on 256-bit vectors);
/// avx512_vnni: AVX2/FMA/F16C plus AVX-512 F/BW/VL/VNNI, whose batched
/// 32-element block matmuls run vpdpwssd on 512-bit vectors (16 tokens in
/// lanes). Only the 32-element block matmuls differ from avx2, with
/// bit-identical results.
enum class Isa { scalar, avx2, avx2_vnni, avx512_vnni };

/// "avx512_vnni", "avx2_vnni", "avx2" or "scalar": the best this build and CPU
/// support, chosen once (cpuid); the environment variable
/// TROUPE_KERNELS_ISA=scalar, =avx2 or =avx2_vnni asks for a lesser one.
const char* isa_name();
Isa active_isa();
/// Whether this build and CPU can run `isa` (tests compare ISAs with it).
bool isa_available(Isa isa);
const char* to_string(Isa isa);
/// avx2, avx2_vnni and avx512_vnni: the AVX2 code paths apply.
inline bool is_avx2(Isa isa) { return isa == Isa::avx2 || isa == Isa::avx2_vnni || isa == Isa::avx512_vnni; }

}  // namespace troupe::kernels::cpu
