// An IO processor plugin that passes prompts through: enough to test the
// host's io_processor group. Built with TEST_IO_THROWS it throws in
// pre_process (the host must answer 500 and stay up).
#include <stdexcept>

#include "troupe/plugin.hpp"

namespace {

class EchoIO final : public troupe::IOProcessor {
 public:
  troupe::Result<std::string> parse_request(const std::string& request_json) override { return request_json; }
  troupe::Result<std::vector<std::string>> pre_process(const std::string& parsed) override {
#ifdef TEST_IO_THROWS
    throw std::runtime_error("the throwing_io test plugin throws on purpose");
#endif
    return std::vector<std::string>{parsed};
  }
  troupe::Result<std::string> post_process(const std::vector<troupe::PoolingOutput>& outputs,
                                           const std::string&) override {
    return std::to_string(outputs.size());
  }
  troupe::Result<std::string> output_to_response(const std::string& output) override { return output; }
};

troupe::IOProcessor* make_echo(const troupe::ConfigView&) { return new EchoIO(); }

}  // namespace

#ifdef TEST_IO_THROWS
TROUPE_PLUGIN(troupe::io_processor_plugin("throwing_io", &make_echo))
#else
TROUPE_PLUGIN(troupe::io_processor_plugin("echo_io", &make_echo))
#endif
