// Reads llama.cpp's test-tokenizer-0 files: <vocab>.inp holds strings separated
// by "\n__ggml_vocab_test__\n", <vocab>.out one line of space-separated ids per string.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace troupe::tokenizer::testing {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<VocabCase> load_vocab_cases(const std::string& base) {
  const std::string inp = read_all(base + ".inp");
  const std::string outp = read_all(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (true) {
    const size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) break;
    texts.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::vector<VocabCase> cases;
  std::istringstream lines(outp);
  std::string line;
  for (const std::string& t : texts) {
    if (!std::getline(lines, line)) break;
    VocabCase c{t, {}};
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace troupe::tokenizer::testing
