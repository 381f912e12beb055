// Checks a tokenizer against tests/data/golden/llamacpp_tokenize_*.json:
// llama.cpp b11434's ids for a corpus (gen_llamacpp_tokenize_cases.py), with
// and without special-token parsing, the text of its pieces, and the
// vocabulary's flags (BOS/EOS, end-of-generation, control, user-defined).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/text/tokenizer/tokenizer.hpp"

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

inline nlohmann::json load_llamacpp_golden(const std::string& name) {
  const std::string path = std::string(TROUPE_TEST_DATA_DIR) + "/golden/llamacpp_tokenize_" + name + ".json";
  std::ifstream f(path);
  EXPECT_TRUE(f) << "missing " << path;
  return f ? nlohmann::json::parse(f) : nlohmann::json::object();
}

// [[first, last], ...] runs of ids, expanded.
inline std::vector<int32_t> expand_runs(const nlohmann::json& runs) {
  std::vector<int32_t> ids;
  for (const auto& r : runs) {
    for (int32_t id = r[0].get<int32_t>(); id <= r[1].get<int32_t>(); ++id) ids.push_back(id);
  }
  return ids;
}

// BOS/EOS and their add flags, and which tokens end generation, are control
// (or unknown) and are user-defined, as llama.cpp decided them on loading.
// A llama.cpp token can be user-defined and control at once (it makes Gemma's
// "</s>" an end-of-generation control); it then behaves as a control token,
// which is what troupe's one type per token holds.
inline void check_llamacpp_vocab_flags(const Tokenizer& tok, const std::string& name) {
  const auto golden = load_llamacpp_golden(name);
  ASSERT_TRUE(golden.contains("vocab_flags"));
  const auto& flags = golden["vocab_flags"];
  EXPECT_EQ(tok.bos_id(), flags["bos"].get<int32_t>());
  EXPECT_EQ(tok.eos_id(), flags["eos"].get<int32_t>());
  EXPECT_EQ(tok.add_bos(), flags["add_bos"].get<bool>());
  EXPECT_EQ(tok.vocab().add_eos, flags["add_eos"].get<bool>());
  EXPECT_EQ(tok.eog_ids(), expand_runs(flags["eog"]));
  const auto special = expand_runs(flags["special"]);
  std::vector<int32_t> got_special, got_user_defined, want_user_defined;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) got_special.push_back(id);
    if (tok.vocab().types[id] == TokenType::user_defined) got_user_defined.push_back(id);
  }
  for (int32_t id : expand_runs(flags["user_defined"])) {
    if (!std::binary_search(special.begin(), special.end(), id)) want_user_defined.push_back(id);
  }
  EXPECT_EQ(got_special, special);
  EXPECT_EQ(got_user_defined, want_user_defined);
}

inline void check_llamacpp_golden(const Tokenizer& tok, const std::string& name) {
  const auto golden = load_llamacpp_golden(name);
  ASSERT_TRUE(golden.contains("cases"));
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
