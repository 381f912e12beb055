// General plugins that misbehave in one way each, chosen by TEST_BAD_KIND:
//   throws     register() throws
//   fails      register() returns an error Status
//   abi        the descriptor claims another ABI version
//   wrong_group the descriptor's group differs from the manifest's
//   size       the descriptor claims another size (a descriptor of another layout)
//   cxx_abi    the descriptor was "built" against another C++ standard library ABI
//   layout     the SDK layout fingerprint differs (headers changed without a version bump)
#include <stdexcept>

#include "troupe/plugin.hpp"

#define TEST_KIND_throws 1
#define TEST_KIND_fails 2
#define TEST_KIND_abi 3
#define TEST_KIND_wrong_group 4
#define TEST_KIND_size 5
#define TEST_KIND_cxx_abi 6
#define TEST_KIND_layout 7
#define TEST_CAT2(a, b) a##b
#define TEST_CAT(a, b) TEST_CAT2(a, b)
#define TEST_KIND TEST_CAT(TEST_KIND_, TEST_BAD_KIND)

namespace {

[[maybe_unused]] troupe::Status register_bad() {
#if TEST_KIND == TEST_KIND_throws
  throw std::runtime_error("boom from throws_register");
#else
  return troupe::invalid_argument("fails_register cannot register today");
#endif
}

[[maybe_unused]] troupe::Platform* no_platform(std::string*) { return nullptr; }

constexpr troupe::PluginDescriptor make_descriptor() {
#if TEST_KIND == TEST_KIND_abi
  troupe::PluginDescriptor d = troupe::general_plugin(TEST_PLUGIN_NAME, &register_bad);
  d.abi_version = TROUPE_ABI_VERSION + 41;  // a plugin from another troupe release
  return d;
#elif TEST_KIND == TEST_KIND_size
  troupe::PluginDescriptor d = troupe::general_plugin(TEST_PLUGIN_NAME, &register_bad);
  d.descriptor_size = sizeof(troupe::PluginDescriptor) - 8;  // one field fewer
  return d;
#elif TEST_KIND == TEST_KIND_cxx_abi
  troupe::PluginDescriptor d = troupe::general_plugin(TEST_PLUGIN_NAME, &register_bad);
  d.cxx_abi = "libc++/abi=1";
  return d;
#elif TEST_KIND == TEST_KIND_layout
  troupe::PluginDescriptor d = troupe::general_plugin(TEST_PLUGIN_NAME, &register_bad);
  d.layout_fingerprint ^= 0x10;
  return d;
#elif TEST_KIND == TEST_KIND_wrong_group
  return troupe::platform_plugin(TEST_PLUGIN_NAME, &no_platform);
#else
  return troupe::general_plugin(TEST_PLUGIN_NAME, &register_bad);
#endif
}

}  // namespace

TROUPE_PLUGIN(make_descriptor())
