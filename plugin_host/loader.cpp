#include "plugin_host/loader.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>

#include "troupe/log.hpp"

namespace troupe::plugin_host {
namespace {

using EntryFn = const PluginDescriptor* (*)();

LoadOutcome failed(std::string reason) { return {PluginStatus::failed, std::move(reason), nullptr}; }
LoadOutcome refused(std::string reason) { return {PluginStatus::refused, std::move(reason), nullptr}; }

std::string str_or(const char* s, const char* fallback) { return s ? std::string(s) : std::string(fallback); }

// As TROUPE_SDK_FINGERPRINT_HEX spells it, so the two sides read alike.
std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The entry point is plugin code: nothing it throws may escape into the host.
const PluginDescriptor* call_entry(EntryFn entry, std::string* error) {
  try {
    return entry();
  } catch (const std::exception& e) {
    *error = std::string("entry point threw: ") + e.what();
  } catch (...) {
    *error = "entry point threw a non-standard exception";
  }
  return nullptr;
}

}  // namespace

LoadOutcome load_library(const Manifest& m) {
  std::error_code ec;
  if (!std::filesystem::exists(m.library, ec))
    return failed("library " + m.library + " not found (named by manifest " + m.path + ")");

  dlerror();
  // RTLD_LOCAL: two plugins may define the same internal symbols without clashing.
  void* handle = dlopen(m.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return failed("cannot load library " + m.library + ": " + str_or(dlerror(), "unknown dlopen error"));

  dlerror();
  void* sym = dlsym(handle, m.symbol.c_str());
  if (!sym) {
    return failed("library " + m.library + " has no symbol " + m.symbol + " (" +
                  str_or(dlerror(), "symbol not found") + ")");
  }
  EntryFn entry = nullptr;
  static_assert(sizeof(entry) == sizeof(sym));
  std::memcpy(&entry, &sym, sizeof(entry));  // object pointer -> function pointer, as POSIX allows

  std::string error;
  const PluginDescriptor* d = call_entry(entry, &error);
  if (!error.empty()) return failed("library " + m.library + ": " + error);
  if (!d) return failed("library " + m.library + ": " + m.symbol + "() returned no descriptor");

  // abi_version is the first field of every descriptor version: read it before anything else.
  if (d->abi_version != TROUPE_ABI_VERSION) {
    return refused("library " + m.library + " was built for troupe plugin ABI version " +
                   std::to_string(d->abi_version) + ", but this troupe uses ABI version " +
                   std::to_string(TROUPE_ABI_VERSION) + " (SDK " TROUPE_SDK_VERSION "): rebuild the plugin against this troupe");
  }
  if (d->descriptor_size != sizeof(PluginDescriptor)) {
    return refused("library " + m.library + " has a plugin descriptor of " + std::to_string(d->descriptor_size) +
                   " bytes, expected " + std::to_string(sizeof(PluginDescriptor)) + " for ABI version " +
                   std::to_string(TROUPE_ABI_VERSION));
  }
  const std::string cxx_abi = str_or(d->cxx_abi, "(none)");
  if (cxx_abi != TROUPE_CXX_ABI_TAG) {
    return refused("library " + m.library + " was built with C++ ABI " + cxx_abi + ", but this troupe uses " +
                   TROUPE_CXX_ABI_TAG);
  }
  if (d->layout_fingerprint != sdk_layout_fingerprint()) {
    return refused("library " + m.library + " was built against SDK headers whose type layouts differ from this "
                   "troupe's (layout fingerprint " + std::to_string(d->layout_fingerprint) + ", expected " +
                   std::to_string(sdk_layout_fingerprint()) +
                   "): rebuild the plugin against the headers of this troupe, with the same compiler options");
  }
  // Same version and sizes, other header text: a vtable or a signature changed without a
  // version bump. Calling through such a vtable would run the wrong function.
  if (d->sdk_fingerprint != TROUPE_SDK_FINGERPRINT) {
    return refused("library " + m.library + " was built against SDK headers with fingerprint " +
                   hex16(d->sdk_fingerprint) + ", but this troupe's SDK headers have fingerprint " +
                   TROUPE_SDK_FINGERPRINT_HEX " (both ABI version " + std::to_string(TROUPE_ABI_VERSION) +
                   "): the headers differ, perhaps in a vtable or a signature; rebuild the plugin against "
                   "the headers of this troupe");
  }
  const std::string group = str_or(d->group, "(none)");
  if (group != m.group) {
    return refused("library " + m.library + " declares group " + group + ", but its manifest " + m.path +
                   " says " + m.group);
  }
  const std::string name = str_or(d->name, "(none)");
  if (name != m.name)
    TROUPE_LOG_WARNING("plugin {}: library {} calls itself {}; using the manifest's name", m.name, m.library, name);

  const bool has_fn = (group == kGroupGeneral && d->register_fn) || (group == kGroupPlatform && d->platform_probe) ||
                      (group == kGroupIOProcessor && d->make_io_processor) ||
                      (group == kGroupStatLogger && d->make_stat_logger);
  if (!has_fn) return failed("library " + m.library + ": descriptor of group " + group + " has no function for it");
  return {PluginStatus::loaded, "", d};
}

}  // namespace troupe::plugin_host
