// An IO processor plugin that passes prompts through: enough to test the
// host's io_processor group.
#include "troupe/plugin.hpp"

namespace {

class EchoIO final : public troupe::IOProcessor {
 public:
  troupe::Result<std::string> parse_request(const std::string& request_json) override { return request_json; }
  troupe::Result<std::vector<std::string>> pre_process(const std::string& parsed) override {
    return std::vector<std::string>{parsed};
  }
  troupe::Result<std::string> post_process(const std::vector<std::string>& outputs) override {
    return outputs.empty() ? std::string() : outputs.front();
  }
};

troupe::IOProcessor* make_echo(const troupe::EngineConfig&) { return new EchoIO(); }

}  // namespace

TROUPE_PLUGIN(troupe::io_processor_plugin("echo_io", &make_echo))
