// IOProcessor: lets a pooling model take and return any data (vLLM's
// IOProcessor). A request body goes through parse_request, pre_process turns
// it into prompts, the engine pools every prompt (one batch), post_process
// turns the index-ordered outputs into the plugin's output, and
// output_to_response renders the HTTP body. Payloads are JSON text; the host
// catches anything a plugin throws (a 500, never a crash).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe {

/// What the engine gives back for one prompt.
struct PoolingOutput {
  std::vector<float> data;        // the pooled vector
  int64_t num_prompt_tokens = 0;
};

class IOProcessor {
 public:
  virtual ~IOProcessor() = default;
  /// Validate a request body; return its normalized form (passed to the steps below).
  virtual Result<std::string> parse_request(const std::string& request_json) = 0;
  /// The prompts to pool for a parsed request (at least one).
  virtual Result<std::vector<std::string>> pre_process(const std::string& parsed_request) = 0;
  /// The plugin's output from the pooled prompts, in pre_process's order.
  virtual Result<std::string> post_process(const std::vector<PoolingOutput>& outputs,
                                           const std::string& parsed_request) = 0;
  /// The response body (JSON) for the plugin's output.
  virtual Result<std::string> output_to_response(const std::string& plugin_output) = 0;

  // Asynchronous variants (a plugin that awaits I/O overrides them); the
  // defaults call the synchronous ones. `done` is called exactly once.
  using PromptsDone = std::function<void(Result<std::vector<std::string>>)>;
  using OutputDone = std::function<void(Result<std::string>)>;
  virtual void pre_process_async(const std::string& parsed_request, PromptsDone done) {
    done(pre_process(parsed_request));
  }
  virtual void post_process_async(const std::vector<PoolingOutput>& outputs, const std::string& parsed_request,
                                  OutputDone done) {
    done(post_process(outputs, parsed_request));
  }
};

}  // namespace troupe
