// One source for several test platform plugins, chosen by compile definitions:
// TEST_PLUGIN_NAME, TEST_PLATFORM_ENUM, TEST_PROBE (available|declines|throws),
// and TEST_PREVIOUS_ABI (the descriptor claims the ABI version before ours, as a
// platform built against the previous troupe release would).
#include <stdexcept>

#include "test_platform.hpp"
#include "troupe/plugin.hpp"

#define TEST_PROBE_available 1
#define TEST_PROBE_declines 2
#define TEST_PROBE_throws 3
#define TEST_CAT2(a, b) a##b
#define TEST_CAT(a, b) TEST_CAT2(a, b)

namespace {
troupe::Platform* probe([[maybe_unused]] std::string* why_not) {
#if TEST_CAT(TEST_PROBE_, TEST_PROBE) == TEST_PROBE_declines
  *why_not = "no " TEST_PLUGIN_NAME " device in this test machine";
  return nullptr;
#elif TEST_CAT(TEST_PROBE_, TEST_PROBE) == TEST_PROBE_throws
  throw std::runtime_error("probe exploded in " TEST_PLUGIN_NAME);
#else
  return new troupe_test::TestPlatform(troupe::PlatformEnum::TEST_PLATFORM_ENUM, TEST_PLUGIN_NAME);
#endif
}
}  // namespace

#ifdef TEST_PREVIOUS_ABI
static_assert(TROUPE_ABI_VERSION >= 2, "there is no ABI version before 1");
constexpr troupe::PluginDescriptor previous_abi_descriptor() {
  troupe::PluginDescriptor d = troupe::platform_plugin(TEST_PLUGIN_NAME, &probe);
  d.abi_version = TROUPE_ABI_VERSION - 1;
  return d;
}
TROUPE_PLUGIN(previous_abi_descriptor())
#else
TROUPE_PLUGIN(troupe::platform_plugin(TEST_PLUGIN_NAME, &probe))
#endif
