// troupe_bench_maskbench: MaskBench's method (guidance-ai/jsonschemabench,
// maskbench/) on troupe's grammar engine. For each data file (a JSON Schema and
// its valid and invalid test instances): compile the schema and compute the
// first mask (time to first mask, with the vocabulary trie already built), then
// walk every instance token by token (bench/structured/maskbench_walk.hpp),
// timing each mask (time between masks). A schema passes when it compiles and
// every valid instance is accepted and every invalid one refused; a valid one
// refused is a validation error, an invalid one accepted an invalidation error.
//
// Two tables: the instances as stored, and (labelled "keys in the schema's
// order") each valid instance with its objects' keys in the order the engine
// writes them, `properties` order (bench/structured/maskbench_order.hpp).
//
// Only the splits this work may use are read (an allow-list on the file names):
// Github_trivial, Github_easy, Github_medium, Github_hard, Glaiveai2K,
// Synthesized, Handwritten and JME. Files of other splits are never opened.
//
//   troupe_bench_maskbench --vocab ggml-vocab-llama-bpe.gguf --data DIR [--filter PREFIX]
//                          [--limit N] [--results FILE.jsonl] [--timeout-s 60]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/structured/maskbench_order.hpp"
#include "bench/structured/maskbench_walk.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"
#include "runtime/rank/structured/grammar_matcher.hpp"
#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "runtime/text/json/python_json.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"

namespace {

using troupe::structured::Grammar;
using troupe::structured::TokenVocabulary;
using Clock = std::chrono::steady_clock;

const char* const kAllowedSplits[] = {"Github_trivial", "Github_easy", "Github_medium", "Github_hard",
                                      "Glaiveai2K",     "Synthesized", "Handwritten",   "JME"};

// The split a file belongs to, or "" when it is not on the allow-list.
std::string allowed_split(const std::string& file_name) {
  for (const char* split : kAllowedSplits) {
    if (file_name.rfind(split, 0) == 0) return split;
  }
  return "";
}

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

struct SplitStats {
  int schemas = 0, passing = 0, compile_error = 0, validation_error = 0, invalidation_error = 0, timeout = 0;
  int mismatch = 0, mask_error = 0;
  long valid_instances = 0, invalid_instances = 0, valid_refused = 0, invalid_accepted = 0;
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

std::string pct(int n, int of) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d (%.1f%%)", n, of ? 100.0 * n / of : 0.0);
  return buf;
}

std::shared_ptr<const TokenVocabulary> load_vocab(const std::string& path,
                                                  std::unique_ptr<troupe::tokenizer::Tokenizer>* tok) {
  auto file = troupe::gguf::GgufFile::open(path);
  if (!file) {
    std::fprintf(stderr, "%s\n", file.status().to_string().c_str());
    return nullptr;
  }
  auto t = troupe::gguf::read_tokenizer(**file);
  if (!t) {
    std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
    return nullptr;
  }
  *tok = std::move(*t);
  std::vector<std::string> bytes(static_cast<size_t>((*tok)->vocab_size()));
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) {
    // As the driver rank reads them (runtime/rank/runner/structured_outputs.cpp).
    bytes[static_cast<size_t>(id)] = (*tok)->is_special(id) ? "" : (*tok)->token_to_piece(id, /*special=*/false);
  }
  return TokenVocabulary::create(std::move(bytes), (*tok)->eog_ids(), (*tok)->vocab_size());
}

// The allowed data files under `dir` (others are skipped by name, never opened).
std::vector<std::filesystem::path> data_files(const std::string& dir, const std::string& filter, size_t limit) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() != ".json" || allowed_split(name).empty()) continue;
    if (!filter.empty() && name.rfind(filter, 0) != 0) continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (limit && files.size() > limit) files.resize(limit);
  return files;
}

struct Run {
  const troupe::tokenizer::Tokenizer& tok;
  std::shared_ptr<const TokenVocabulary> vocab;
  double timeout_s;
  std::vector<double> tbm, ttfm;
  std::vector<double> tbm_ordered;  // the re-walks of reordered valid instances
};

// One table's verdict on one schema from its instances' outcomes.
struct Verdict {
  bool validation = false, invalidation = false;
  std::string failure;
};

void count(SplitStats& st, const Verdict& v, bool timed_out) {
  if (timed_out) ++st.timeout;
  else if (v.invalidation) ++st.invalidation_error;
  else if (v.validation) ++st.validation_error;
  else ++st.passing;
}

// "[...last bytes before] next [refused token]" of a refused valid instance.
std::string refusal_context(const Run& run, const std::vector<int32_t>& tokens, size_t allowed) {
  std::string before;
  for (size_t k = 0; k < allowed; ++k) before += run.vocab->token_bytes(tokens[k]);
  if (before.size() > 80) before = "..." + before.substr(before.size() - 80);
  std::string refused = allowed < tokens.size() ? run.vocab->token_bytes(tokens[allowed]) : "<end>";
  return "at [" + before + "] next [" + refused + "]";
}

// One instance's outcome into a table's counts and verdict.
void record(Run& run, SplitStats& st, Verdict& v, const std::string& tag, bool valid,
            const troupe::bench::WalkResult& r, const std::vector<int32_t>& tokens) {
  (valid ? st.valid_instances : st.invalid_instances)++;
  if (!r.mismatch.empty()) {
    ++st.mismatch;
    v.failure += tag + r.mismatch + "; ";
  }
  if (!r.error.empty()) {
    ++st.mask_error;
    v.failure += tag + "mask error: " + r.error + "; ";
  }
  if (valid && !r.accepted) {
    ++st.valid_refused;
    v.validation = true;
    v.failure += tag + "valid refused after " + std::to_string(r.tokens_allowed) + "/" + std::to_string(tokens.size()) +
                 " tokens " + refusal_context(run, tokens, r.tokens_allowed) + "; ";
  } else if (!valid && r.accepted) {
    ++st.invalid_accepted;
    v.invalidation = true;
    v.failure += tag + "invalid accepted; ";
  }
}

// One data file: compile, first mask, every instance walked as stored (`st`) and, for
// valid instances refused as stored, with keys in the schema's order (`ordered`).
nlohmann::ordered_json run_schema(Run& run, const std::string& name, const nlohmann::ordered_json& doc, SplitStats& st,
                                  SplitStats& ordered) {
  nlohmann::ordered_json out = {{"id", name}};
  ++st.schemas;
  ++ordered.schemas;
  auto start = Clock::now();
  auto compiled = troupe::structured::compile_json_schema_grammar(doc["schema"].dump());
  if (!compiled) {
    ++st.compile_error;
    ++ordered.compile_error;
    out["compile_error"] = compiled.status().message();
    return out;
  }
  {
    troupe::structured::GrammarMatcher first(*compiled, run.vocab);
    std::vector<uint64_t> bits(run.vocab->mask_words());
    (void)first.fill_mask(bits.data());
  }
  double ttfm_us = us_since(start);
  run.ttfm.push_back(ttfm_us);
  out["ttfm_us"] = ttfm_us;
  Verdict stored_v, ordered_v;
  double max_mask_us = 0;
  int i = 0;
  for (const auto& test : doc["tests"]) {
    const bool valid = test.value("valid", false);
    std::string text = troupe::json_io::python_json_dumps(test["data"]);
    auto tokens = run.tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
    auto r = troupe::bench::walk_tokens(*compiled, run.vocab, tokens);
    run.tbm.insert(run.tbm.end(), r.mask_us.begin(), r.mask_us.end());
    for (double us : r.mask_us) max_mask_us = std::max(max_mask_us, us);
    const std::string tag = "test #" + std::to_string(i++) + ": ";
    record(run, st, stored_v, tag, valid, r, tokens);
    // A valid instance refused as stored is walked again with its keys in the schema's
    // order; one accepted as stored already is in an order the grammar writes (the
    // rough reordering could only get it wrong).
    if (valid && !r.accepted) {
      std::string text2 = troupe::json_io::python_json_dumps(
          troupe::bench::reorder_keys(test["data"], doc["schema"], doc["schema"]));
      if (text2 != text) {
        auto tokens2 = run.tok.encode(text2, /*add_special=*/false, /*parse_special=*/false);
        auto r2 = troupe::bench::walk_tokens(*compiled, run.vocab, tokens2);
        run.tbm_ordered.insert(run.tbm_ordered.end(), r2.mask_us.begin(), r2.mask_us.end());
        record(run, ordered, ordered_v, tag + "(keys reordered) ", valid, r2, tokens2);
        continue;
      }
    }
    record(run, ordered, ordered_v, tag, valid, r, tokens);
  }
  const double total_s = us_since(start) / 1e6;
  const bool timed_out = total_s > run.timeout_s;
  if (timed_out) out["timeout_s"] = total_s;
  count(st, stored_v, timed_out);
  count(ordered, ordered_v, timed_out);
  if (!stored_v.failure.empty()) out["failure"] = stored_v.failure;
  if (!ordered_v.failure.empty()) out["failure_keys_in_schema_order"] = ordered_v.failure;
  out["max_mask_us"] = max_mask_us;
  out["memory_bytes"] = (*compiled)->memory_bytes();
  return out;
}

void add(SplitStats& total, const SplitStats& s) {
  total.schemas += s.schemas;
  total.passing += s.passing;
  total.compile_error += s.compile_error;
  total.validation_error += s.validation_error;
  total.invalidation_error += s.invalidation_error;
  total.timeout += s.timeout;
  total.mismatch += s.mismatch;
  total.mask_error += s.mask_error;
  total.valid_instances += s.valid_instances;
  total.invalid_instances += s.invalid_instances;
  total.valid_refused += s.valid_refused;
  total.invalid_accepted += s.invalid_accepted;
}

void print_table(const char* title, const std::map<std::string, SplitStats>& stats) {
  std::printf("%s\n\n| split | schemas | passing | compile error | validation error | invalidation error | timeout | "
              "valid inst. refused | invalid inst. accepted |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
              title);
  auto row = [](const std::string& name, const SplitStats& s) {
    std::printf("| %s | %d | %s | %s | %s | %s | %s | %ld/%ld | %ld/%ld |\n", name.c_str(), s.schemas,
                pct(s.passing, s.schemas).c_str(), pct(s.compile_error, s.schemas).c_str(),
                pct(s.validation_error, s.schemas).c_str(), pct(s.invalidation_error, s.schemas).c_str(),
                pct(s.timeout, s.schemas).c_str(), s.valid_refused, s.valid_instances, s.invalid_accepted,
                s.invalid_instances);
  };
  SplitStats total;
  for (const auto& [name, s] : stats) {
    row(name, s);
    add(total, s);
  }
  row("TOTAL", total);
  std::printf("\nmask/accept disagreements (engine bugs): %d; masks failed on a grammar limit: %d instances\n\n",
              total.mismatch, total.mask_error);
}

void print_report(const std::map<std::string, SplitStats>& stats, const std::map<std::string, SplitStats>& ordered,
                  Run& run) {
  print_table("Instances as stored", stats);
  print_table("Keys in the schema's order (each valid instance's object keys in `properties` order, the text the "
              "engine is specified to produce)",
              ordered);
  std::printf("TBM (us, %zu masks):  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", run.tbm.size(), percentile(run.tbm, 50),
              percentile(run.tbm, 90), percentile(run.tbm, 99), percentile(run.tbm, 100));
  std::printf("TTFM (us, %zu schemas): p50 %.0f  p90 %.0f  p99 %.0f  max %.0f\n", run.ttfm.size(), percentile(run.ttfm, 50),
              percentile(run.ttfm, 90), percentile(run.ttfm, 99), percentile(run.ttfm, 100));
  std::printf("TBM of the reordered re-walks (us, %zu masks): p50 %.1f  p99 %.1f\n", run.tbm_ordered.size(),
              percentile(run.tbm_ordered, 50), percentile(run.tbm_ordered, 99));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"MaskBench's method on troupe's grammar engine (allowed splits only)"};
  std::string vocab_path, data_dir, filter, results_path;
  size_t limit = 0;
  double timeout_s = 60;
  app.add_option("--vocab", vocab_path, "GGUF with the tokenizer (Llama 3's ggml-vocab-llama-bpe.gguf)")->required();
  app.add_option("--data", data_dir, "maskbench/data folder")->required();
  app.add_option("--filter", filter, "only files whose name starts with this");
  app.add_option("--limit", limit, "at most this many files (0: all)");
  app.add_option("--results", results_path, "per-schema results as JSON lines");
  app.add_option("--timeout-s", timeout_s, "a schema taking longer than this counts as a timeout");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<troupe::tokenizer::Tokenizer> tok;
  auto t0 = Clock::now();
  auto vocab = load_vocab(vocab_path, &tok);
  if (!vocab) return 1;
  std::fprintf(stderr, "vocabulary: %lld tokens, tries built in %.0f ms\n", static_cast<long long>(vocab->vocab_size()),
               us_since(t0) / 1000);
  Run run{*tok, vocab, timeout_s, {}, {}, {}};
  std::ofstream results;
  if (!results_path.empty()) results.open(results_path);
  std::map<std::string, SplitStats> stats, ordered;
  for (const auto& path : data_files(data_dir, filter, limit)) {
    const std::string name = path.filename().string();
    nlohmann::ordered_json doc;
    try {
      std::ifstream in(path);
      doc = nlohmann::ordered_json::parse(in);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: unreadable (%s)\n", name.c_str(), e.what());
      continue;
    }
    if (!doc.contains("tests") || doc["tests"].empty()) continue;  // MaskBench counts schemas with tests
    const std::string split = allowed_split(name);
    auto out = run_schema(run, name, doc, stats[split], ordered[split]);
    if (results) results << out.dump() << "\n";
  }
  print_report(stats, ordered, run);
  return 0;
}
