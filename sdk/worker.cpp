#include "troupe/worker.hpp"

namespace troupe {

Status Worker::unsupported(const char* what) const {
  return not_supported(std::string(what) + " is not supported by platform " + platform_name_);
}

Status Worker::initialize_cache(int64_t num_blocks) {
  auto spec = get_kv_cache_spec();
  if (!spec.ok()) return spec.status();
  return initialize_from_config(KvCacheConfig{*spec, num_blocks});
}

void Worker::recycle_output(ModelRunnerOutput&&) {}
void* Worker::get_extension(std::string_view) { return nullptr; }

}  // namespace troupe
