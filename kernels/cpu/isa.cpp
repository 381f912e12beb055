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

Isa choose() {
  const char* forced = std::getenv("TROUPE_KERNELS_ISA");
  if (forced != nullptr && std::strcmp(forced, "scalar") == 0) return Isa::scalar;
  return cpu_has_avx2() ? Isa::avx2 : Isa::scalar;
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

const char* to_string(Isa isa) { return isa == Isa::avx2 ? "avx2" : "scalar"; }
const char* isa_name() { return to_string(active_isa()); }

bool isa_available(Isa isa) {
  if (isa == Isa::scalar) return true;
  static const bool avx2 = cpu_has_avx2();
  return avx2;
}

}  // namespace troupe::kernels::cpu
