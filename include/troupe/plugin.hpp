// The plugin ABI. A plugin library exports one C symbol,
//   extern "C" const troupe::PluginDescriptor* troupe_plugin_entry();
// returning a descriptor that starts with the ABI version it was built for.
// The host refuses a library whose ABI version, descriptor size, C++ ABI tag,
// SDK layout fingerprint or SDK header fingerprint differs from its own.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "troupe/config_view.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/io_processor.hpp"
#include "troupe/logits_processor.hpp"
#include "troupe/lora.hpp"
#include "troupe/platform.hpp"
#include "troupe/quantization.hpp"
#include "troupe/scheduler_policy.hpp"
#include "troupe/sdk_fingerprint.hpp"  // generated at build time: TROUPE_SDK_FINGERPRINT
#include "troupe/stat_logger.hpp"
#include "troupe/status.hpp"
#include "troupe/worker.hpp"

/// Bump whenever any SDK header changes a class layout, a vtable or a signature.
/// (TROUPE_SDK_FINGERPRINT catches a forgotten bump; the version names the release.)
#define TROUPE_ABI_VERSION 17u
#define TROUPE_SDK_VERSION "0.1.0"

// Identifies the compiler family and C++ standard library ABI: classes with
// std::string members cross the boundary, so both sides must agree.
#define TROUPE_STRINGIFY2(x) #x
#define TROUPE_STRINGIFY(x) TROUPE_STRINGIFY2(x)
#if defined(__GLIBCXX__)
#define TROUPE_CXX_ABI_TAG "libstdc++/cxx11abi=" TROUPE_STRINGIFY(_GLIBCXX_USE_CXX11_ABI)
#elif defined(_LIBCPP_VERSION)
#define TROUPE_CXX_ABI_TAG "libc++/abi=" TROUPE_STRINGIFY(_LIBCPP_ABI_VERSION)
#else
#define TROUPE_CXX_ABI_TAG "unknown"
#endif

namespace troupe {

inline constexpr const char* kGroupGeneral = "troupe.general_plugins";
inline constexpr const char* kGroupPlatform = "troupe.platform_plugins";
inline constexpr const char* kGroupIOProcessor = "troupe.io_processor_plugins";
inline constexpr const char* kGroupStatLogger = "troupe.stat_logger_plugins";

/// General plugins: register models / custom ops. Must be safe to call more than once.
using RegisterFn = Status (*)();
/// Platform plugins: the platform to use, or nullptr when its hardware is absent; then
/// the probe says why in `why_not` ("cudaGetDeviceCount: ... (35)"), which `troupe
/// plugins` shows. The host owns the returned object and never unloads the library.
using PlatformProbeFn = Platform* (*)(std::string* why_not);
/// IO processor plugins: a new processor for this engine config (host owns it).
using IOProcessorFactoryFn = IOProcessor* (*)(const ConfigView& config);
/// Stat logger plugins: a new logger for engine `engine_index` (host owns it).
using StatLoggerFactoryFn = StatLogger* (*)(const ConfigView& config, int engine_index);

/// A fingerprint of the layouts of the SDK's types that cross the plugin boundary
/// (sizes and alignments, FNV-1a). It catches what TROUPE_ABI_VERSION alone misses: a
/// header changed without a version bump, or a plugin built with other packing or
/// standard-library options. Vtable changes are caught by TROUPE_SDK_FINGERPRINT.
constexpr uint64_t sdk_layout_fingerprint() {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (uint64_t v : std::initializer_list<uint64_t>{
           sizeof(std::string), alignof(std::string), sizeof(std::vector<float>), sizeof(Status),
           alignof(Status), sizeof(ConfigValues), sizeof(std::optional<std::string>),
           sizeof(DeviceMemory), sizeof(KvCacheSpec), sizeof(KvCacheConfig), sizeof(ForwardBatch),
           sizeof(ModelInfo), sizeof(ExecuteModelRequest), sizeof(ModelRunnerOutput),
           sizeof(Platform), sizeof(Worker), sizeof(Ops), sizeof(AttentionBackend), sizeof(DeviceCommunicator),
           sizeof(IOProcessor), sizeof(StatLogger), sizeof(ModelContext), sizeof(WeightTensor),
           sizeof(DeviceBuffer), sizeof(DeviceAllocator), sizeof(DeviceWeights),
           sizeof(SchedulingRequest), sizeof(SchedulerPolicy), sizeof(TokenizerView), sizeof(LogitsProcessorContext),
           sizeof(LogitsRequest), sizeof(LogitsRow), sizeof(LogitsBatch), sizeof(LogitsProcessor),
           sizeof(LoraTargetSpec), sizeof(LoraAdapterSpec), sizeof(LoraWeights), sizeof(WeightFormat)})
    mix(v);
  return h;
}

struct PluginDescriptor {
  uint32_t abi_version;        // TROUPE_ABI_VERSION the plugin was built with: checked first
  uint32_t descriptor_size;    // sizeof(PluginDescriptor) on the plugin's side
  const char* sdk_version;     // TROUPE_SDK_VERSION, for messages
  const char* cxx_abi;         // TROUPE_CXX_ABI_TAG
  uint64_t layout_fingerprint; // sdk_layout_fingerprint() on the plugin's side
  uint64_t sdk_fingerprint;    // TROUPE_SDK_FINGERPRINT: the text of the SDK headers it was built against
  const char* name;            // should equal the manifest's name
  const char* group;           // should equal the manifest's group
  RegisterFn register_fn;                    // general plugins
  PlatformProbeFn platform_probe;            // platform plugins
  IOProcessorFactoryFn make_io_processor;    // io processor plugins
  StatLoggerFactoryFn make_stat_logger;      // stat logger plugins
};

/// Descriptor builders: use them so the version fields are stamped at the plugin's build.
constexpr PluginDescriptor general_plugin(const char* name, RegisterFn fn) {
  return {TROUPE_ABI_VERSION, sizeof(PluginDescriptor), TROUPE_SDK_VERSION, TROUPE_CXX_ABI_TAG, sdk_layout_fingerprint(),
          TROUPE_SDK_FINGERPRINT, name, kGroupGeneral, fn, nullptr, nullptr, nullptr};
}
constexpr PluginDescriptor platform_plugin(const char* name, PlatformProbeFn fn) {
  return {TROUPE_ABI_VERSION, sizeof(PluginDescriptor), TROUPE_SDK_VERSION, TROUPE_CXX_ABI_TAG, sdk_layout_fingerprint(),
          TROUPE_SDK_FINGERPRINT, name, kGroupPlatform, nullptr, fn, nullptr, nullptr};
}
constexpr PluginDescriptor io_processor_plugin(const char* name, IOProcessorFactoryFn fn) {
  return {TROUPE_ABI_VERSION, sizeof(PluginDescriptor), TROUPE_SDK_VERSION, TROUPE_CXX_ABI_TAG, sdk_layout_fingerprint(),
          TROUPE_SDK_FINGERPRINT, name, kGroupIOProcessor, nullptr, nullptr, fn, nullptr};
}
constexpr PluginDescriptor stat_logger_plugin(const char* name, StatLoggerFactoryFn fn) {
  return {TROUPE_ABI_VERSION, sizeof(PluginDescriptor), TROUPE_SDK_VERSION, TROUPE_CXX_ABI_TAG, sdk_layout_fingerprint(),
          TROUPE_SDK_FINGERPRINT, name, kGroupStatLogger, nullptr, nullptr, nullptr, fn};
}

}  // namespace troupe

#define TROUPE_PLUGIN_ENTRY_SYMBOL "troupe_plugin_entry"

/// Define the plugin's entry point: TROUPE_PLUGIN(troupe::platform_plugin("cpu", &probe));
#define TROUPE_PLUGIN(descriptor_expr)                                                        \
  extern "C" __attribute__((visibility("default"))) const ::troupe::PluginDescriptor*          \
  troupe_plugin_entry() {                                                                     \
    static const ::troupe::PluginDescriptor troupe_descriptor_ = (descriptor_expr);           \
    return &troupe_descriptor_;                                                               \
  }
