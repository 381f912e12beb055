// The router's choices of a mixture-of-experts model in llama.cpp b11434, for the goldens of
// tests/golden/moe_golden_test: the prompt's token ids are decoded as one batch with every
// row's output asked for (so the last layer routes every row too), and the eval callback
// copies each layer's `ffn_moe_topk-L` (the chosen experts, [n_used][n_tokens] int32) and
// `ffn_moe_probs-L` (what llama.cpp chose from, [n_expert][n_tokens]). Prints one JSON
// object: "routes" [layer][token][k] and "route_margins" [layer][token], the gap between
// the k-th and (k+1)-th router logit (log-probabilities for a softmax router, the logits
// themselves for gpt-oss's). Built and run by tests/golden/gen_moe_routes.sh.
//
// usage: llamacpp_moe_routes MODEL IDS_JSON_ARRAY [THREADS]
#include <ggml-backend.h>
#include <ggml.h>
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Capture {
  std::map<int, std::vector<int32_t>> topk;  // layer -> [n_tokens][n_used]
  std::map<int, std::vector<float>> probs;   // layer -> [n_tokens][n_expert]
  int n_used = 0, n_expert = 0;
};

// The layer of a tensor named exactly "<prefix>-<layer>", or -1 (not its views: "... (reshaped)").
int layer_of(const char* name, const char* prefix) {
  const size_t n = std::strlen(prefix);
  if (std::strncmp(name, prefix, n) != 0 || name[n] != '-') return -1;
  char* end = nullptr;
  const long layer = std::strtol(name + n + 1, &end, 10);
  return end != name + n + 1 && *end == '\0' ? static_cast<int>(layer) : -1;
}

bool on_tensor(ggml_tensor* t, bool ask, void* user) {
  const int topk = layer_of(t->name, "ffn_moe_topk"), probs = layer_of(t->name, "ffn_moe_probs");
  if (ask) return topk >= 0 || probs >= 0;
  auto* c = static_cast<Capture*>(user);
  if (topk >= 0 && t->type == GGML_TYPE_I32) {
    // A view of the argsort: rows of ne[0] ids, nb[1] bytes apart.
    std::vector<uint8_t> raw(ggml_nbytes(t));
    ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
    c->n_used = static_cast<int>(t->ne[0]);
    auto& out = c->topk[topk];
    for (int64_t r = 0; r < t->ne[1]; ++r)
      for (int64_t k = 0; k < t->ne[0]; ++k) {
        int32_t v;
        std::memcpy(&v, raw.data() + r * t->nb[1] + k * t->nb[0], sizeof v);
        out.push_back(v);
      }
  }
  if (probs >= 0 && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t)) {
    c->n_expert = static_cast<int>(t->ne[0]);
    auto& out = c->probs[probs];
    out.resize(static_cast<size_t>(ggml_nelements(t)));
    ggml_backend_tensor_get(t, out.data(), 0, ggml_nbytes(t));
  }
  return true;
}

std::vector<llama_token> parse_ids(const char* s) {
  std::vector<llama_token> ids;
  for (const char* p = s; *p;) {
    if ((*p >= '0' && *p <= '9') || *p == '-') {
      char* end = nullptr;
      ids.push_back(static_cast<llama_token>(std::strtol(p, &end, 10)));
      p = end;
    } else {
      ++p;
    }
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL IDS_JSON_ARRAY [THREADS]\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> ids = parse_ids(argv[2]);
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.use_extra_bufts = false;  // no repacking: b11434's AMX repack dies on some Xeons (gen_arch_goldens.sh: --no-repack)
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  char arch[64] = {};
  llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
  const bool softmax_weight = std::string(arch) == "gpt-oss";
  Capture cap;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 1024;
  cp.n_ubatch = 1024;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.cb_eval = on_tensor;
  cp.cb_eval_user_data = &cap;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int n = static_cast<int>(ids.size());
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = ids[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;  // every row's output: the last layer then routes every row
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) return 1;
  std::printf("{\"routes\": [");
  bool first_layer = true;
  for (const auto& [layer, flat] : cap.topk) {
    std::printf("%s[", first_layer ? "" : ", ");
    first_layer = false;
    for (int t = 0; t < n; ++t) {
      std::printf("%s[", t ? ", " : "");
      for (int k = 0; k < cap.n_used; ++k) std::printf("%s%d", k ? ", " : "", flat[static_cast<size_t>(t * cap.n_used + k)]);
      std::printf("]");
    }
    std::printf("]");
  }
  std::printf("], \"route_margins\": [");
  first_layer = true;
  for (const auto& [layer, p] : cap.probs) {
    std::printf("%s[", first_layer ? "" : ", ");
    first_layer = false;
    for (int t = 0; t < n; ++t) {
      std::vector<float> row(p.begin() + static_cast<ptrdiff_t>(t) * cap.n_expert,
                             p.begin() + static_cast<ptrdiff_t>(t + 1) * cap.n_expert);
      std::sort(row.begin(), row.end(), [](float a, float b) { return a > b; });
      const int k = cap.n_used;
      double gap = 1e9;
      if (k < cap.n_expert)
        gap = softmax_weight ? static_cast<double>(row[k - 1]) - row[k] : std::log(row[k - 1]) - std::log(row[k]);
      std::printf("%s%.8g", t ? ", " : "", gap);
    }
    std::printf("]");
  }
  std::printf("]}\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
