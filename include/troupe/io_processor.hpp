// IOProcessor: turns a plugin-specific request into prompts and model outputs
// into a response (vLLM's IOProcessor). Payloads are JSON text.
#pragma once

#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe {

class IOProcessor {
 public:
  virtual ~IOProcessor() = default;
  /// Validate a request body and return its normalized form.
  virtual Result<std::string> parse_request(const std::string& request_json) = 0;
  /// Turn a parsed request into one or more prompts for the engine.
  virtual Result<std::vector<std::string>> pre_process(const std::string& parsed_request_json) = 0;
  /// Turn the engine's outputs (one JSON object per prompt) into the response body.
  virtual Result<std::string> post_process(const std::vector<std::string>& outputs_json) = 0;
};

}  // namespace troupe
