// The default model of `troupe generate` and `troupe serve`: the file that
// scripts/fetch-model.sh puts in $TROUPE_MODEL_CACHE (or ~/.cache/troupe/models).
#pragma once

#include <cstdlib>
#include <string>

namespace troupe::apps {

inline constexpr const char* kDefaultModelName = "SmolLM2-135M-Instruct.Q4_1.gguf";

inline std::string default_model_path() {
  std::string dir;
  if (const char* c = std::getenv("TROUPE_MODEL_CACHE"); c && *c) {
    dir = c;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home ? home : ".") + "/.cache/troupe/models";
  }
  return dir + "/" + kDefaultModelName;
}

}  // namespace troupe::apps
