#include "kernels/cpu/isa.hpp"

#include <cstdlib>
#include <cstring>

namespace troupe::kernels::cpu {
namespace {

bool cpu_has_avx2() {
#if defined(TROUPE_KERNELS_HAVE_AVX2) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx2_vnni() {
#if defined(TROUPE_KERNELS_HAVE_AVX2_VNNI) && (defined(__x86_64__) || defined(__i386__))
  return cpu_has_avx2() && __builtin_cpu_supports("avxvnni");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(TROUPE_KERNELS_HAVE_AVX512_VNNI) && (defined(__x86_64__) || defined(__i386__))
  // cpuid's bits also mean the OS saves the zmm state (GCC checks XCR0 for them).
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

Isa choose() {
  const char* forced = std::getenv("TROUPE_KERNELS_ISA");
  const auto is = [&](const char* name) { return forced != nullptr && std::strcmp(forced, name) == 0; };
  if (is("scalar")) return Isa::scalar;
  if (cpu_has_avx512_vnni() && !is("avx2") && !is("avx2_vnni")) return Isa::avx512_vnni;
  if (cpu_has_avx2_vnni() && !is("avx2")) return Isa::avx2_vnni;
  return cpu_has_avx2() ? Isa::avx2 : Isa::scalar;
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::avx512_vnni: return "avx512_vnni";
    case Isa::avx2_vnni: return "avx2_vnni";
    case Isa::avx2: return "avx2";
    default: return "scalar";
  }
}
const char* isa_name() { return to_string(active_isa()); }

bool isa_available(Isa isa) {
  static const bool avx2 = cpu_has_avx2();
  static const bool vnni = cpu_has_avx2_vnni();
  static const bool vnni512 = cpu_has_avx512_vnni();
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return avx2;
    case Isa::avx2_vnni: return vnni;
    case Isa::avx512_vnni: return vnni512;
  }
  return false;
}

}  // namespace troupe::kernels::cpu
