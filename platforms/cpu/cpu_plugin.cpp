// Entry point of the CPU platform plugin. CPUs are always present, so the
// probe always answers with the platform.
#include "platforms/cpu/cpu_platform.hpp"
#include "troupe/plugin.hpp"

namespace {
troupe::Platform* probe_cpu(std::string* /*why_not*/) { return new troupe::cpu::CpuPlatform(); }
}  // namespace

TROUPE_PLUGIN(troupe::platform_plugin("cpu", &probe_cpu))
