// Greedy generation through llama.cpp's public C API (libllama), for the golden
// references of tests/golden: one prompt (the file's whole text) is tokenized by
// llama.cpp (add_special, parse_special), decoded as one batch, then one token per
// llama_decode; each step's argmax and its top-1/top-2 logit margin are printed as one
// JSON object. Built and run by gen_gemma3_llamacpp.py against a llama.cpp build.
//
// usage: llamacpp_greedy MODEL PROMPT_FILE N_PREDICT [THREADS [KV_TYPE [FLASH_ATTN]]]
//   KV_TYPE: f16 (llama.cpp's default) or f32; FLASH_ATTN: auto (default), on or off
#include <llama.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT_FILE N_PREDICT [THREADS [f16|f32 [auto|on|off]]]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string prompt = ss.str();
  const int n_predict = std::atoi(argv[3]);
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 4096;
  cp.n_batch = 2048;
  cp.n_ubatch = 512;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  if (argc > 6) {
    const std::string fa = argv[6];
    cp.flash_attn_type = fa == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                       : LLAMA_FLASH_ATTN_TYPE_AUTO;
  }
  if (argc > 5 && std::string(argv[5]) == "f32") {
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;

  std::vector<llama_token> ids(prompt.size() + 16);
  const int n = llama_tokenize(vocab, prompt.data(), static_cast<int32_t>(prompt.size()), ids.data(),
                               static_cast<int32_t>(ids.size()), true, true);
  if (n < 0) return 1;
  ids.resize(static_cast<size_t>(n));
  std::vector<llama_token> prompt_ids = ids;
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::vector<llama_token> out;
  std::vector<double> margins;
  std::string text;
  llama_batch batch = llama_batch_get_one(ids.data(), n);
  for (int step = 0; step < n_predict; ++step) {
    if (llama_decode(ctx, batch) != 0) return 1;
    const float* logits = llama_get_logits_ith(ctx, -1);
    int best = 0;
    for (int i = 1; i < n_vocab; ++i)
      if (logits[i] > logits[best]) best = i;  // first index wins ties
    float second = -1e30f;
    for (int i = 0; i < n_vocab; ++i)
      if (i != best && logits[i] > second) second = logits[i];
    out.push_back(best);
    margins.push_back(static_cast<double>(logits[best]) - second);
    char piece[256];
    const int len = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, true);
    if (len > 0) text.append(piece, static_cast<size_t>(len));
    static llama_token next;
    next = best;
    batch = llama_batch_get_one(&next, 1);
  }
  std::printf("{\"prompt_ids\": [");
  for (size_t i = 0; i < prompt_ids.size(); ++i) std::printf("%s%d", i ? ", " : "", prompt_ids[i]);
  std::printf("], \"output_ids\": [");
  for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? ", " : "", out[i]);
  std::printf("], \"top1_top2_logit_margin\": [");
  for (size_t i = 0; i < margins.size(); ++i) std::printf("%s%.6f", i ? ", " : "", margins[i]);
  std::printf("], \"output_text\": %s}\n", json_string(text).c_str());
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
