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

Isa choose() {
  const char* forced = std::getenv("TROUPE_KERNELS_ISA");
  if (forced != nullptr && std::strcmp(forced, "scalar") == 0) return Isa::scalar;
  if (cpu_has_avx2_vnni() && (forced == nullptr || std::strcmp(forced, "avx2") != 0)) return Isa::avx2_vnni;
  return cpu_has_avx2() ? Isa::avx2 : Isa::scalar;
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::avx2_vnni: return "avx2_vnni";
    case Isa::avx2: return "avx2";
    default: return "scalar";
  }
}
const char* isa_name() { return to_string(active_isa()); }

bool isa_available(Isa isa) {
  static const bool avx2 = cpu_has_avx2();
  static const bool vnni = cpu_has_avx2_vnni();
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return avx2;
    case Isa::avx2_vnni: return vnni;
  }
  return false;
}

}  // namespace troupe::kernels::cpu
