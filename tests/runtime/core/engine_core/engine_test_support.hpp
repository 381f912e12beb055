// Shared by the engine-core tests: the real stories260K tokenizer and the
// text a sequence of its tokens decodes to.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/incremental_decoder.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::engine::testing {

inline std::shared_ptr<const tokenizer::Tokenizer> stories_tokenizer() {
  static std::shared_ptr<const tokenizer::Tokenizer> tok = [] {
    auto file = gguf::GgufFile::open(std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf");
    EXPECT_TRUE(file.ok()) << file.status().to_string();
    auto t = gguf::read_tokenizer(**file);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return std::shared_ptr<const tokenizer::Tokenizer>(std::move(t).value());
  }();
  return tok;
}

/// Ids of `text` without BOS.
inline std::vector<int32_t> ids_of(const std::string& text) {
  return stories_tokenizer()->encode(text, /*add_special=*/false, /*parse_special=*/false);
}

/// What streaming `ids` through an incremental decoder shows.
inline std::string streamed_text(const std::vector<int32_t>& ids) {
  tokenizer::IncrementalDecoder d(*stories_tokenizer(), true);
  std::string s;
  for (int32_t id : ids) s += d.push(id);
  return s + d.flush();
}

}  // namespace troupe::engine::testing
