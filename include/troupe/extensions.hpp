// Optional worker features as extension slots, in the spirit of ggml's
// get_proc_address: a worker answers Worker::get_extension(name) with a pointer
// to an interface it implements, or nullptr. A new optional feature is a new
// interface and name here, not a new virtual on Worker: plugins built before it
// keep their vtable layout and simply answer nullptr for it. An interface never
// changes once published; a changed one gets a new name (".v2").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/lora.hpp"
#include "troupe/status.hpp"
#include "troupe/worker.hpp"

namespace troupe {

/// Free device memory while the engine idles (vLLM's sleep mode). Level 1 offloads the
/// weights to host memory and drops the KV cache; level 2 drops both.
class SleepModeExtension {
 public:
  static constexpr std::string_view kName = "troupe.sleep_mode.v1";
  virtual Status sleep(int level) = 0;
  /// Undo sleep(); `tags` selects what to restore ("weights", "kv_cache"), empty = all.
  virtual Status wake_up(const std::vector<std::string>& tags) = 0;

 protected:
  ~SleepModeExtension() = default;
};

/// LoRA adapters applied on top of the base weights (troupe/lora.hpp). The runtime reads the
/// adapter file on each rank and hands its tensors over; the worker checks them against the
/// loaded model and keeps them in device memory until remove_lora.
class LoraExtension {
 public:
  static constexpr std::string_view kName = "troupe.lora.v2";
  /// invalid_argument naming the file, tensor and problem when `adapter` does not fit the model.
  virtual Status add_lora(int64_t lora_id, const LoraAdapterSpec& adapter) = 0;
  virtual Status remove_lora(int64_t lora_id) = 0;
  virtual Result<std::vector<int64_t>> list_loras() const = 0;
  /// Keep an adapter resident (adapters are only ever dropped by remove_lora).
  virtual Status pin_lora(int64_t lora_id) = 0;

 protected:
  ~LoraExtension() = default;
};

/// Speculative decoding: the draft tokens proposed for each request of the last step.
class DraftTokensExtension {
 public:
  static constexpr std::string_view kName = "troupe.draft_tokens.v1";
  virtual Result<std::vector<std::vector<int32_t>>> take_draft_token_ids() = 0;

 protected:
  ~DraftTokensExtension() = default;
};

/// The worker's implementation of `Extension`, or nullptr when it has none.
template <class Extension>
Extension* find_extension(Worker& worker) {
  return static_cast<Extension*>(worker.get_extension(Extension::kName));
}

/// The extension, or a not_supported error naming the feature and the platform.
template <class Extension>
Result<Extension*> require_extension(Worker& worker, std::string_view feature) {
  if (auto* e = find_extension<Extension>(worker)) return e;
  return not_supported(std::string(feature) + " is not supported by platform " + worker.platform_name() +
                       " (its worker has no " + std::string(Extension::kName) + " extension)");
}

}  // namespace troupe
