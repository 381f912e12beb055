// Platform: everything the engine asks of a kind of hardware. The core never
// asks which device it runs on; it asks the active Platform for capabilities.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/attention.hpp"
#include "troupe/communicator.hpp"
#include "troupe/config_view.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/ops.hpp"
#include "troupe/status.hpp"
#include "troupe/worker.hpp"

namespace troupe {

/// Identity of a platform, as vLLM's PlatformEnum. Third-party platforms are out_of_tree.
enum class PlatformEnum { cpu, cuda, rocm, tpu, xpu, out_of_tree, unspecified };
const char* to_string(PlatformEnum e);

struct DeviceMemory {
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
};

class Platform {
 public:
  virtual ~Platform() = default;

  /// Which kind of platform this is; out_of_tree for plugins of third parties.
  virtual PlatformEnum platform_enum() const = 0;
  bool is_out_of_tree() const { return platform_enum() == PlatformEnum::out_of_tree; }
  /// Short device type ("cpu", "cuda", "dummy"): names the platform in logs and errors.
  virtual std::string device_type() const = 0;
  /// Human-readable name of device `device_id` ("AMD EPYC 7B13", "NVIDIA H200").
  virtual std::string device_name(int device_id = 0) const = 0;

  /// Validate and adjust the engine's settings (troupe/config_view.hpp): choose
  /// "parallel.worker_cls", "cache.block_size", "compilation.graph_mode", ...
  virtual Status check_and_update_config(ConfigEditor& config) const = 0;

  /// The attention backend this platform uses for `config` (vLLM's get_attn_backend_cls).
  virtual Result<std::unique_ptr<AttentionBackend>> make_attention_backend(const ConfigView& config) const = 0;
  /// Compute kernels for model definitions.
  virtual Result<std::unique_ptr<Ops>> make_ops(const ConfigView& config) const = 0;
  /// The memory a worker's model keeps its weights and activations in, and the copies to
  /// and from it. The default is host memory (make_host_allocator()), right for platforms
  /// whose kernels run on the host; a device platform returns its own.
  virtual Result<std::unique_ptr<DeviceAllocator>> make_allocator(const ConfigView& config) const;
  /// A fresh rendezvous id for the communicator of the ranks of `parallel` (its
  /// "parallel.*" settings: world size tensor_parallel_size * pipeline_parallel_size). The
  /// head calls it once, in its own process, and sends the id to every rank in
  /// "parallel.communicator_id". The SDK default answers "" for a world of 1 and
  /// not_supported otherwise.
  virtual Result<std::string> make_communicator_id(const ConfigView& parallel) const;
  /// Collectives for global rank `rank` of the world of `parallel`, meeting the other ranks
  /// at "parallel.communicator_id". Every rank of the world calls it (in its own process).
  virtual Result<std::unique_ptr<DeviceCommunicator>> make_device_communicator(const ConfigView& parallel,
                                                                               int rank) const = 0;
  /// The worker named by "parallel.worker_cls" for `rank`.
  virtual Result<std::unique_ptr<Worker>> make_worker(const ConfigView& config, int rank) const = 0;

  /// Total and free memory of device `device_id`.
  virtual DeviceMemory memory_info(int device_id = 0) const = 0;
  /// Weight quantizations this platform can run ("q4_0", "q8_0", ...).
  virtual std::vector<std::string> supported_quantizations() const = 0;
  /// ok when `quant` (as ModelConfig::quantization names it) runs here; else a not_supported error.
  virtual Status verify_quantization(std::string_view quant) const;
  /// Optional features by name ("sleep_mode", "graph_capture", "lora", "pinned_memory").
  virtual bool supports(std::string_view /*capability*/) const { return false; }
};

}  // namespace troupe
