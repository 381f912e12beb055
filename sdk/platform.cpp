#include "troupe/platform.hpp"

#include <algorithm>
#include <string>

namespace troupe {

const char* to_string(PlatformEnum e) {
  switch (e) {
    case PlatformEnum::cpu: return "cpu";
    case PlatformEnum::cuda: return "cuda";
    case PlatformEnum::rocm: return "rocm";
    case PlatformEnum::tpu: return "tpu";
    case PlatformEnum::xpu: return "xpu";
    case PlatformEnum::out_of_tree: return "out_of_tree";
    case PlatformEnum::unspecified: return "unspecified";
  }
  return "unknown";
}

Status Platform::verify_quantization(std::string_view quant) const {
  if (quant.empty()) return {};
  auto supported = supported_quantizations();
  if (std::find(supported.begin(), supported.end(), quant) != supported.end()) return {};
  std::string list;
  for (const auto& q : supported) list += (list.empty() ? "" : ", ") + q;
  return not_supported("quantization " + std::string(quant) + " is not supported by platform " + device_type() +
                       " (supported: " + list + ")");
}

Result<std::unique_ptr<DeviceAllocator>> Platform::make_allocator(const ConfigView& /*config*/) const {
  return make_host_allocator();
}

Result<std::string> Platform::make_communicator_id(const ConfigView& parallel) const {
  const int64_t tp = parallel.get_int("parallel.tensor_parallel_size", 1);
  const int64_t pp = parallel.get_int("parallel.pipeline_parallel_size", 1);
  if (tp == 1 && pp == 1) return std::string();
  return not_supported("platform " + device_type() + " has no communicator for " + std::to_string(tp * pp) +
                       " ranks (tensor_parallel_size " + std::to_string(tp) + ", pipeline_parallel_size " +
                       std::to_string(pp) + ")");
}

}  // namespace troupe
