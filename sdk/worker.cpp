#include "troupe/worker.hpp"

namespace troupe {

Status Worker::unsupported(const char* what) const {
  return not_supported(std::string(what) + " is not supported by platform " + platform_name_);
}

void Worker::recycle_output(ModelRunnerOutput&&) {}
Status Worker::sleep(int) { return unsupported("sleep"); }
Status Worker::wake_up(const std::vector<std::string>&) { return unsupported("wake_up"); }
Result<std::vector<std::vector<int32_t>>> Worker::take_draft_token_ids() {
  return unsupported("take_draft_token_ids (speculative decoding)");
}
Status Worker::add_lora(int64_t, const std::string&) { return unsupported("add_lora"); }
Status Worker::remove_lora(int64_t) { return unsupported("remove_lora"); }
Result<std::vector<int64_t>> Worker::list_loras() const { return unsupported("list_loras"); }
Status Worker::pin_lora(int64_t) { return unsupported("pin_lora"); }
Status Worker::execute_dummy_batch() { return unsupported("execute_dummy_batch"); }

}  // namespace troupe
