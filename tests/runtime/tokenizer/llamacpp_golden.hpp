// Checks a tokenizer against tests/data/golden/llamacpp_tokenize_*.json:
// llama.cpp b11434's ids for a corpus (gen_llamacpp_tokenize_cases.py), with
// and without special-token parsing, and the text of its pieces.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::tokenizer::testing {

inline std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    s += ' ';
    s += std::to_string(id);  // appended in two steps: g++ 12 warns (-Wrestrict) on " " + to_string
  }
  return s;
}

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// A case's "text" or, when not valid UTF-8, "text_hex" (likewise "pieces").
inline std::string text_field(const nlohmann::json& c, const std::string& key) {
  if (c.contains(key)) return c[key].get<std::string>();
  return from_hex(c[key + "_hex"].get<std::string>());
}

inline void check_llamacpp_golden(const Tokenizer& tok, const std::string& name) {
  const std::string path = std::string(TROUPE_TEST_DATA_DIR) + "/golden/llamacpp_tokenize_" + name + ".json";
  std::ifstream f(path);
  ASSERT_TRUE(f) << "missing " << path;
  const auto golden = nlohmann::json::parse(f);
  ASSERT_GE(golden["cases"].size(), 100u);
  int failures = 0;
  for (const auto& c : golden["cases"]) {
    const std::string text = text_field(c, "text");
    for (const char* key : {"ids", "ids_special"}) {
      const bool parse_special = std::string_view(key) == "ids_special";
      const auto want = c[key].get<std::vector<int32_t>>();
      const auto ids = tok.encode(text, /*add_special=*/true, parse_special);
      EXPECT_EQ(ids, want) << key << " of '" << text << "'\n got:" << show_ids(ids) << "\nwant:" << show_ids(want);
      failures += ids != want;
    }
    std::string pieces;
    for (int32_t id : c["ids"].get<std::vector<int32_t>>()) pieces += tok.token_to_piece(id, true);
    EXPECT_EQ(pieces, text_field(c, "pieces")) << "pieces of '" << text << "'";
  }
  EXPECT_EQ(failures, 0) << "of " << 2 * golden["cases"].size() << " encodings";
}

}  // namespace troupe::tokenizer::testing
