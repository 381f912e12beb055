// Reference side of gen_llamacpp_tokenize_cases.py (not part of the build):
// tokenizes texts with llama.cpp's libllama, as llama_tokenize does for a
// server prompt, and prints what it got.
//   llamacpp_tokenize_cases VOCAB.gguf < texts
// stdout starts with the vocabulary's flags, one line each: "bos N", "eos N",
// "add_bos 0|1", "add_eos 0|1", and the ids that llama_vocab_is_eog calls
// end-of-generation ("eog ..."), whose attributes have CONTROL or UNKNOWN
// ("special ...") and USER_DEFINED ("user_defined ...").
// stdin: each text as "<byte count>\n<bytes>". stdout: per text three lines,
// "ids <id>..." (add_special, parse_special=false), "ids_special <id>..."
// (add_special, parse_special=true) and "pieces <hex>" (llama_token_to_piece
// with special=true of the first ids, concatenated, as hex).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text, bool parse_special) {
  std::vector<llama_token> ids(text.size() + 8);
  int32_t n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                             static_cast<int32_t>(ids.size()), /*add_special=*/true, parse_special);
  if (n < 0) {
    ids.resize(-n);
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                       static_cast<int32_t>(ids.size()), true, parse_special);
  }
  if (n < 0) {
    std::fprintf(stderr, "llama_tokenize failed\n");
    std::exit(1);
  }
  ids.resize(n);
  return ids;
}

void print_ids(const char* key, const std::vector<llama_token>& ids) {
  std::printf("%s", key);
  for (llama_token id : ids) std::printf(" %d", id);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf < texts\n", argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::printf("bos %d\neos %d\nadd_bos %d\nadd_eos %d\n", llama_vocab_bos(vocab), llama_vocab_eos(vocab),
              llama_vocab_get_add_bos(vocab) ? 1 : 0, llama_vocab_get_add_eos(vocab) ? 1 : 0);
  std::vector<llama_token> eog, special, user_defined;
  for (llama_token id = 0; id < llama_vocab_n_tokens(vocab); ++id) {
    const int attr = llama_vocab_get_attr(vocab, id);
    if (llama_vocab_is_eog(vocab, id)) eog.push_back(id);
    if (attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN)) special.push_back(id);
    if (attr & LLAMA_TOKEN_ATTR_USER_DEFINED) user_defined.push_back(id);
  }
  print_ids("eog", eog);
  print_ids("special", special);
  print_ids("user_defined", user_defined);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string text(std::stoul(line), '\0');
    std::cin.read(text.data(), static_cast<std::streamsize>(text.size()));
    const auto ids = tokenize(vocab, text, false);
    print_ids("ids", ids);
    print_ids("ids_special", tokenize(vocab, text, true));
    std::printf("pieces ");
    for (llama_token id : ids) {
      char buf[512];
      const int32_t n = llama_token_to_piece(vocab, id, buf, sizeof(buf), 0, /*special=*/true);
      for (int32_t i = 0; i < n; ++i) std::printf("%02x", static_cast<unsigned char>(buf[i]));
    }
    std::printf("\n");
  }
  llama_model_free(model);
  return 0;
}
