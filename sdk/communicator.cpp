#include "troupe/communicator.hpp"

#include <string>

namespace troupe {

Result<std::unique_ptr<DeviceCommunicator>> DeviceCommunicator::new_group(const std::vector<int>& ranks) {
  return not_supported("this communicator cannot make a group of " + std::to_string(ranks.size()) + " ranks");
}

}  // namespace troupe
