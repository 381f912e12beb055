// Run-time choice of the instruction set the kernels use.
#pragma once

namespace troupe::kernels::cpu {

enum class Isa { scalar, avx2 };

/// "avx2" or "scalar": chosen once (cpuid: avx2 + fma + f16c); the environment
/// variable TROUPE_KERNELS_ISA=scalar forces the scalar kernels.
const char* isa_name();
Isa active_isa();
/// Whether this build and CPU can run `isa` (tests compare ISAs with it).
bool isa_available(Isa isa);
const char* to_string(Isa isa);

}  // namespace troupe::kernels::cpu
