// The Worker contract in order on a real model, greedy decoding of the golden
// prompts batched together (prefill in two chunks, then decodes), and the
// optional features a worker offers through its extension slots.
#include <algorithm>
#include <cmath>
#include <string>

#include "conformance/check_util.hpp"
#include "troupe/extensions.hpp"

namespace troupe::conformance {

namespace {

class Contract {
 public:
  Contract(const Options& options, Report* report) : options_(options), report_(report) {}

  /// Records step `op`: passes when `st` is ok; once a step fails, the later ones are skipped.
  bool step(const std::string& op, const Status& st, std::string detail = "") {
    CaseResult c;
    c.group = "worker";
    c.op = op;
    if (broken_) {
      c.outcome = Outcome::skipped;
      c.detail = "an earlier step of the contract failed";
    } else if (!st.ok()) {
      c.outcome = Outcome::fail;
      c.detail = st.to_string();
      broken_ = true;
    } else {
      c.detail = std::move(detail);
    }
    report_->cases.push_back(std::move(c));
    return !broken_;
  }
  bool broken() const { return broken_; }
  void feature(const std::string& name, Outcome o, std::string detail) {
    CaseResult c;
    c.group = "feature";
    c.op = name;
    c.outcome = o;
    c.detail = std::move(detail);
    report_->cases.push_back(std::move(c));
  }
  const Options& options() const { return options_; }

 private:
  const Options& options_;
  Report* report_;
  bool broken_ = false;
};

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

/// Greedy decoding of every prompt at once: the first half of each prompt, then the rest
/// (chunked prefill), then one token per step. Returns each prompt's generated tokens.
Result<std::vector<std::vector<int32_t>>> greedy(Worker& w, const std::vector<GoldenCase>& cases, int block_size,
                                                 int64_t max_tokens_per_step) {
  const auto S = static_cast<int>(cases.size());
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(S)), out(static_cast<size_t>(S));
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(S));
  std::vector<int32_t> done(static_cast<size_t>(S), 0);
  int32_t next_block = 0;
  size_t max_new = 0;
  for (int s = 0; s < S; ++s) {
    tokens[static_cast<size_t>(s)] = cases[static_cast<size_t>(s)].prompt_ids;
    max_new = std::max(max_new, cases[static_cast<size_t>(s)].output_ids.size());
    if (tokens[static_cast<size_t>(s)].empty()) return invalid_argument("a golden case has an empty prompt");
  }
  const int64_t vocab = w.model_info()->vocab_size;
  for (int step = 0;; ++step) {
    ExecuteModelRequest req;
    ForwardBatch& b = req.batch;
    b.query_start.push_back(0);
    std::vector<int> rows;  // which sequences want logits, in logits order
    for (int s = 0; s < S; ++s) {
      const auto& seq = tokens[static_cast<size_t>(s)];
      const auto prompt = static_cast<int32_t>(cases[static_cast<size_t>(s)].prompt_ids.size());
      if (out[static_cast<size_t>(s)].size() >= cases[static_cast<size_t>(s)].output_ids.size()) continue;
      // Step 0 prefills the first half of each prompt of two or more tokens; step 1 the rest.
      int32_t end = static_cast<int32_t>(seq.size());
      if (step == 0) {
        if (prompt < 2) continue;
        end = prompt / 2;
      }
      const int32_t begin = done[static_cast<size_t>(s)];
      if (begin >= end) continue;
      for (int32_t p = begin; p < end; ++p) {
        auto& table = tables[static_cast<size_t>(s)];
        while (p / block_size >= static_cast<int32_t>(table.size())) table.push_back(next_block++);
        b.token_ids.push_back(seq[static_cast<size_t>(p)]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(int64_t{table[static_cast<size_t>(p / block_size)]} * block_size + p % block_size);
      }
      done[static_cast<size_t>(s)] = end;
      b.query_start.push_back(b.num_tokens());
      b.seq_lens.push_back(end);
      b.block_tables.push_back(tables[static_cast<size_t>(s)]);
      if (end == static_cast<int32_t>(seq.size())) {
        b.logits_indices.push_back(b.num_tokens() - 1);
        rows.push_back(s);
      }
    }
    if (b.num_seqs() == 0) {
      if (step == 0) continue;
      break;
    }
    if (b.num_tokens() > max_tokens_per_step)
      return invalid_argument("the golden prompts need " + std::to_string(b.num_tokens()) +
                              " tokens in one step, more than the check's max_num_batched_tokens");
    auto result = w.execute_model(req);
    if (!result.ok()) return result.status();
    if (result->vocab_size != vocab ||
        static_cast<int64_t>(result->logits.size()) != static_cast<int64_t>(rows.size()) * vocab)
      return internal_error("execute_model returned " + std::to_string(result->logits.size()) + " logits for " +
                            std::to_string(rows.size()) + " rows of vocabulary " + std::to_string(vocab));
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = result->logits.data() + r * vocab;
      for (int64_t i = 0; i < vocab; ++i)
        if (!std::isfinite(row[i])) return internal_error("execute_model returned a logit that is not finite");
      const int32_t t = argmax(row, vocab);
      out[static_cast<size_t>(rows[r])].push_back(t);
      tokens[static_cast<size_t>(rows[r])].push_back(t);
    }
    w.recycle_output(std::move(*result));
    if (step > static_cast<int>(max_new) + 4) return internal_error("greedy decoding did not finish");
  }
  return out;
}

/// Compares with the goldens: equal, or diverging only after a fragile step. Returns the number
/// of token-exact cases; `why` lists the cases that diverge without a fragile step before.
int compare_goldens(const std::vector<GoldenCase>& cases, const std::vector<std::vector<int32_t>>& got,
                    std::string* why) {
  int exact = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& want = cases[c].output_ids;
    const auto& mine = got[c];
    size_t diff = 0;
    while (diff < want.size() && diff < mine.size() && want[diff] == mine[diff]) ++diff;
    if (diff == want.size() && mine.size() == want.size()) {
      ++exact;
      continue;
    }
    bool fragile = false;
    for (size_t i = 0; i <= diff && i < cases[c].margins.size(); ++i) fragile |= cases[c].margins[i] < kFragileMargin;
    if (!fragile || mine.size() != want.size())
      *why += (why->empty() ? "" : "; ") + std::string("case ") + std::to_string(c) + " diverges at step " +
              std::to_string(diff) + " (token " + (diff < mine.size() ? std::to_string(mine[diff]) : "none") +
              ", golden " + (diff < want.size() ? std::to_string(want[diff]) : "none") + ")";
  }
  return exact;
}

void check_features(Worker& w, const std::vector<GoldenCase>& goldens, int block_size, int64_t max_tokens,
                    const std::vector<int32_t>& first_tokens, Contract& c) {
  if (selected(c.options(), "feature", "sleep_mode")) {
    if (auto* sleep = find_extension<SleepModeExtension>(w)) {
      Status st = sleep->sleep(1);
      if (st.ok()) st = sleep->wake_up({});
      std::string detail = "sleep(1), wake_up(), then greedy decoding of golden case 0 again";
      if (st.ok()) {
        auto again = greedy(w, {goldens.front()}, block_size, max_tokens);
        if (!again.ok())
          st = again.status();
        else if (again->front() != first_tokens)
          st = internal_error("after wake_up the tokens of golden case 0 differ from those before sleep");
      }
      c.feature("sleep_mode", st.ok() ? Outcome::pass : Outcome::fail, st.ok() ? detail : st.to_string());
    } else {
      c.feature("sleep_mode", Outcome::not_offered, "the worker has no " + std::string(SleepModeExtension::kName) +
                                                       " extension");
    }
  }
  if (selected(c.options(), "feature", "lora")) {
    if (auto* lora = find_extension<LoraExtension>(w)) {
      // The quartet on the loaded model: a rank-1 adapter of blk.0.attn_q (B = 0) is added,
      // listed, pinned and removed; one naming a tensor the model lacks is refused.
      const ModelInfo* info = w.model_info();
      const int64_t in = info ? info->hidden_size : 0;
      const int64_t out = info ? int64_t{info->num_heads} * info->head_dim : 0;
      std::vector<float> a(static_cast<size_t>(std::max<int64_t>(in, 1)), 0.01f);
      std::vector<float> b(static_cast<size_t>(std::max<int64_t>(out, 1)), 0.0f);
      auto matrix = [](const std::string& name, std::vector<float>& v, int64_t ne0, int64_t ne1) {
        WeightTensor t;
        t.name = name;
        t.n_dims = 2;
        t.ne[0] = ne0;
        t.ne[1] = ne1;
        t.data = v.data();
        t.nbytes = v.size() * sizeof(float);
        return t;
      };
      LoraAdapterSpec good{"platform-check:zero-adapter", 1.0f, {}};
      good.targets.push_back({"blk.0.attn_q.weight", matrix("a", a, in, 1), matrix("b", b, 1, out)});
      LoraAdapterSpec bad = good;
      bad.path = "platform-check:wrong-name";
      bad.targets[0].base_name = "blk.0.no_such_tensor.weight";
      Status st = lora->add_lora(1, good);
      if (st.ok()) {
        auto listed = lora->list_loras();
        if (!listed.ok()) st = listed.status();
        else if (*listed != std::vector<int64_t>{1}) st = internal_error("list_loras does not list the added adapter 1");
      }
      if (st.ok()) st = lora->pin_lora(1);
      if (st.ok()) {
        Status refused = lora->add_lora(2, bad);
        if (refused.code() != StatusCode::invalid_argument)
          st = internal_error("an adapter naming a tensor the model lacks was not refused as invalid: " +
                              refused.to_string());
      }
      if (st.ok()) st = lora->remove_lora(1);
      if (st.ok() && lora->remove_lora(1).ok()) st = internal_error("remove_lora of a removed adapter succeeded");
      c.feature("lora", st.ok() ? Outcome::pass : Outcome::fail,
                st.ok() ? "add_lora, list_loras, pin_lora, remove_lora; a wrong tensor name is refused" : st.to_string());
    } else {
      c.feature("lora", Outcome::not_offered, "the worker has no " + std::string(LoraExtension::kName) + " extension");
    }
  }
  if (selected(c.options(), "feature", "draft_tokens")) {
    if (auto* draft = find_extension<DraftTokensExtension>(w)) {
      auto ids = draft->take_draft_token_ids();
      c.feature("draft_tokens", ids.ok() ? Outcome::pass : Outcome::fail,
                ids.ok() ? "take_draft_token_ids answers" : ids.status().to_string());
    } else {
      c.feature("draft_tokens", Outcome::not_offered,
                "the worker has no " + std::string(DraftTokensExtension::kName) + " extension");
    }
  }
}

}  // namespace

void check_worker(const Platform& target, const ModelSource& model, const std::vector<GoldenCase>& goldens,
                  const Options& options, Report* report) {
  report->platform = target.device_type();
  const bool contract = selected(options, "worker", "execute_model");
  const bool features = selected(options, "feature", "sleep_mode") || selected(options, "feature", "lora") ||
                        selected(options, "feature", "draft_tokens");
  if (!contract && !features) return;
  Contract c(options, report);
  if (goldens.empty()) {
    c.step("golden tokens", invalid_argument("no golden cases were given"));
    return;
  }
  constexpr int64_t kMaxBatchedTokens = 512;
  ConfigValues config;  // ConfigValues takes any name: these sets cannot fail
  (void)config.set_int("parallel.num_threads", options.num_threads);
  (void)config.set_int("scheduler.max_num_batched_tokens", kMaxBatchedTokens);
  (void)config.set_bool("lora.enable_lora", true);  // the worker offers its LoRA extension to the feature checks
  if (!c.step("check_and_update_config", target.check_and_update_config(config))) return;
  auto made = target.make_worker(config, 0);
  if (!c.step("make_worker", made.ok() ? Status{} : made.status())) return;
  Worker& w = **made;
  if (!c.step("init_device", w.init_device())) return;
  if (!c.step("load_model", w.load_model(model), model.architecture())) return;
  auto spec = w.get_kv_cache_spec();
  Status spec_ok = spec.ok() ? Status{} : spec.status();
  const ModelInfo* info = w.model_info();
  if (spec_ok.ok() && info == nullptr) spec_ok = internal_error("model_info() is null after load_model");
  if (spec_ok.ok() && (spec->num_layers != info->num_layers || spec->head_dim != info->head_dim ||
                       spec->num_kv_heads != info->num_kv_heads || spec->block_size <= 0))
    spec_ok = internal_error("the KV cache spec does not match the loaded model");
  if (!c.step("get_kv_cache_spec", spec_ok,
              spec.ok() ? "block " + std::to_string(spec->block_size) + ", " + std::to_string(spec->num_layers) +
                              " layers, " + std::string(to_string(spec->dtype))
                        : ""))
    return;
  // Blocks for every golden sequence, each in blocks of its own.
  int64_t blocks = 0;
  for (const auto& g : goldens)
    blocks += (static_cast<int64_t>(g.prompt_ids.size() + g.output_ids.size()) + spec->block_size - 1) /
              spec->block_size;
  blocks += 1;
  auto available = w.determine_available_memory();
  Status mem_ok = available.ok() ? Status{} : available.status();
  if (mem_ok.ok() && *available < blocks * spec->bytes_per_block())
    mem_ok = resource_exhausted(std::to_string(*available) + " bytes are available for the KV cache, the check needs " +
                                std::to_string(blocks * spec->bytes_per_block()));
  if (!c.step("determine_available_memory", mem_ok,
              available.ok() ? std::to_string(*available >> 20) + " MiB for the KV cache" : ""))
    return;
  if (!c.step("initialize_from_config", w.initialize_from_config({*spec, blocks}),
              std::to_string(blocks) + " blocks"))
    return;
  if (!c.step("compile_or_warm_up_model", w.compile_or_warm_up_model())) return;
  std::vector<int32_t> first_tokens;
  if (contract) {
    auto got = greedy(w, goldens, spec->block_size, kMaxBatchedTokens);
    if (!got.ok()) {
      c.step("execute_model", got.status());
      return;
    }
    std::string why;
    const int exact = compare_goldens(goldens, *got, &why);
    const int n = static_cast<int>(goldens.size());
    Status st = why.empty() ? Status{} : internal_error("greedy tokens differ from the golden ones: " + why);
    if (st.ok() && exact < n - 3)
      st = internal_error("only " + std::to_string(exact) + " of " + std::to_string(n) +
                          " golden cases are token-exact (at least " + std::to_string(n - 3) + " must be)");
    c.step("execute_model", st,
           std::to_string(exact) + " of " + std::to_string(n) + " golden cases token-exact, " +
               std::to_string(goldens.front().output_ids.size()) + " greedy tokens each, batched, chunked prefill");
    first_tokens = got->front();
  }
  if (features && !c.broken()) {
    if (first_tokens.empty()) {
      auto got = greedy(w, {goldens.front()}, spec->block_size, kMaxBatchedTokens);
      if (got.ok()) first_tokens = got->front();
    }
    check_features(w, goldens, spec->block_size, kMaxBatchedTokens, first_tokens, c);
  }
}

}  // namespace troupe::conformance
