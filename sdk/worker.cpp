#include "troupe/worker.hpp"

namespace troupe {

Status Worker::unsupported(const char* what) const {
  return not_supported(std::string(what) + " is not supported by platform " + platform_name_);
}

void Worker::recycle_output(ModelRunnerOutput&&) {}
Status Worker::execute_dummy_batch() { return unsupported("execute_dummy_batch"); }
void* Worker::get_extension(std::string_view) { return nullptr; }

}  // namespace troupe
