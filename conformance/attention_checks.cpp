// The attention backend of the target against the reference: both allocate
// the same paged cache and see the same steps in lock step (prefill of mixed
// lengths, chunked prefill beside decodes, decodes across block boundaries, a
// long context in chunks), block tables drawn from shuffled block ids, two
// layers; every step's outputs are compared. Then Gemma's attention: a sliding
// window on one layer and none on the other (chunked prefill and decodes past
// the window), and logit soft-capping.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "conformance/check_util.hpp"
#include "conformance/random_data.hpp"

namespace troupe::conformance {

namespace {

constexpr int kBlockSize = 16;
constexpr int kLayers = 2;
constexpr int64_t kNumBlocks = 160;
constexpr int32_t kLongContext = 1025;  // the longest context the check uses: 4 chunks of 256, then a decode

struct HeadConfig {
  int heads, kv_heads, head_dim;
};

// A scenario's cache: kLayers layers of kBlockSize-token blocks for heads `h`, in `kv`.
KvCacheSpec scenario_cache(const HeadConfig& h, DType kv) {
  KvCacheSpec spec;
  spec.block_size = kBlockSize;
  spec.num_layers = kLayers;
  spec.num_kv_heads = h.kv_heads;
  spec.head_dim = h.head_dim;
  spec.dtype = kv;
  return spec;
}

double kv_tolerance(DType kv) { return kv == DType::f16 ? tolerance_for(DType::f16) : kF32Tolerance; }

struct Step {
  std::string what;
  std::vector<std::pair<int, int32_t>> seqs;  // (sequence, new tokens)
};

class Scenario {
 public:
  Scenario(Session& target, Session& reference, const Options& options, Rng& rng, Report* report)
      : t_(target), r_(reference), options_(options), rng_(rng), report_(report) {
    for (int32_t b = 0; b < kNumBlocks; ++b) free_.push_back(b);
    std::shuffle(free_.begin(), free_.end(), rng_);  // block tables are never contiguous
  }

  /// Allocates both caches; false (with the outcome recorded) when the scenario cannot run.
  bool allocate(const KvCacheSpec& spec, const std::string& label) {
    spec_ = spec;
    label_ = label;
    auto ref = r_.attention();
    auto tgt = t_.attention();
    Status rs = ref.ok() ? (*ref)->allocate(spec, kNumBlocks) : ref.status();
    Status ts = tgt.ok() ? (*tgt)->allocate(spec, kNumBlocks) : tgt.status();
    if (!rs.ok()) {
      report_->notes.push_back("paged_attention with a " + label + " cache not checked: the reference refuses it: " +
                               rs.message());
      return false;
    }
    if (!ts.ok()) {
      CaseResult c;
      c.group = "attention";
      c.op = "paged_attention";
      c.dtype = label;
      c.shape = "allocate " + std::to_string(kNumBlocks) + " blocks";
      c.outcome = ts.code() == StatusCode::not_supported ? Outcome::not_offered : Outcome::fail;
      c.detail = ts.to_string();
      report_->cases.push_back(std::move(c));
      return false;
    }
    backends_[&r_] = std::move(*ref);
    backends_[&t_] = std::move(*tgt);
    return true;
  }

  /// Per-layer sliding window and logit soft-capping of the following steps (0: none).
  void set_layer_attention(int layer, int32_t window, float softcap) {
    window_[layer] = window;
    softcap_[layer] = softcap;
  }
  /// gpt-oss's sinks on `layer`: one logit per head (empty: none).
  void set_layer_sinks(int layer, std::vector<float> sinks) { sinks_[layer] = std::move(sinks); }
  /// Whether the target's backend implements attention parameter `name`.
  bool target_implements(const std::string& name) const { return backends_.at(&t_)->implements(name); }

  void run(const Step& step, const HeadConfig& h, double tolerance) {
    ForwardBatch b;
    b.query_start.push_back(0);
    std::string lens;
    for (auto [s, n] : step.seqs) {
      Seq& seq = seqs_[s];
      for (int32_t p = seq.len; p < seq.len + n; ++p) {
        if (p / kBlockSize >= static_cast<int32_t>(seq.table.size())) {
          seq.table.push_back(free_.back());
          free_.pop_back();
        }
        b.token_ids.push_back(0);
        b.positions.push_back(p);
        b.slot_mapping.push_back(int64_t{seq.table[static_cast<size_t>(p / kBlockSize)]} * kBlockSize + p % kBlockSize);
      }
      seq.len += n;
      b.query_start.push_back(b.num_tokens());
      b.seq_lens.push_back(seq.len);
      b.block_tables.push_back(seq.table);
      if (!lens.empty()) lens += ',';
      lens += std::to_string(n);
      lens += '/';
      lens += std::to_string(seq.len);
    }
    const int64_t T = b.num_tokens();
    std::vector<std::vector<float>> q, k, v;
    for (int l = 0; l < kLayers; ++l) {
      q.push_back(random_floats(rng_, T * h.heads * h.head_dim));
      k.push_back(random_floats(rng_, T * h.kv_heads * h.head_dim));
      v.push_back(random_floats(rng_, T * h.kv_heads * h.head_dim));
    }
    CaseResult c;
    c.group = "attention";
    c.op = "paged_attention";
    c.dtype = label_;
    c.shape = step.what + " new/len=[" + lens + "] heads=" + std::to_string(h.heads) + "/" +
              std::to_string(h.kv_heads) + " head_dim=" + std::to_string(h.head_dim) +
              " block=" + std::to_string(kBlockSize);
    for (int l = 0; l < kLayers; ++l) {
      if (window_[l] > 0) c.shape += " window[" + std::to_string(l) + "]=" + std::to_string(window_[l]);
      if (softcap_[l] > 0)
        c.shape += " softcap[" + std::to_string(l) + "]=" + std::to_string(static_cast<int>(softcap_[l]));  // whole numbers
      if (!sinks_[l].empty()) c.shape += " sinks[" + std::to_string(l) + "]";
    }
    c.tolerance = tolerance;
    const float scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
    compare_case(t_, r_, report_, std::move(c), [&](Session& s) -> Result<std::vector<float>> {
      AttentionBackend& attn = *backends_.at(&s);
      std::vector<float> all;
      for (int l = 0; l < kLayers; ++l) {
        CONFORMANCE_ASSIGN(qd, s.put(q[static_cast<size_t>(l)]));
        CONFORMANCE_ASSIGN(kd, s.put(k[static_cast<size_t>(l)]));
        CONFORMANCE_ASSIGN(vd, s.put(v[static_cast<size_t>(l)]));
        CONFORMANCE_ASSIGN(out, s.scratch(T * h.heads * h.head_dim * 4));
        AttentionParams params(scale);
        if (window_[l] > 0) params.set("sliding_window", window_[l]);
        if (softcap_[l] > 0) params.set("logit_softcap", softcap_[l]);
        if (!sinks_[l].empty())
          params.set_array("sinks", sinks_[l].data(), static_cast<int64_t>(sinks_[l].size()));  // host memory
        if (Status st = attn.check_params(params); !st.ok()) return st;
        attn.forward(l, qd, kd, vd, static_cast<float*>(out), h.heads, b, params);
        CONFORMANCE_ASSIGN(o, s.get(static_cast<float*>(out), T * h.heads * h.head_dim));
        all.insert(all.end(), o.begin(), o.end());
      }
      return all;
    });
  }

  /// Decode speed over a context of kLongContext (call after the long steps).
  void measure_decode(const HeadConfig& h, int seq) {
    ForwardBatch b;
    const Seq& s = seqs_[seq];
    const int32_t p = s.len - 1;  // rewrites the last token: the cache stays as it is
    b.token_ids = {0};
    b.positions = {p};
    b.slot_mapping = {int64_t{s.table[static_cast<size_t>(p / kBlockSize)]} * kBlockSize + p % kBlockSize};
    b.query_start = {0, 1};
    b.seq_lens = {s.len};
    b.block_tables = {s.table};
    const int64_t row = int64_t{h.heads} * h.head_dim, kv = int64_t{h.kv_heads} * h.head_dim;
    const double bytes = 2.0 * s.len * kv * (spec_.dtype == DType::f16 ? 2 : 4);
    double rates[2] = {0, 0};
    Session* sessions[2] = {&t_, &r_};
    for (int i = 0; i < 2; ++i) {
      Session& se = *sessions[i];
      auto qd = se.put(random_floats(rng_, row));
      auto kd = se.put(random_floats(rng_, kv));
      auto out = se.scratch(row * 4);
      if (!qd.ok() || !kd.ok() || !out.ok()) return;
      AttentionBackend* attn = backends_.at(&se).get();
      float host = 0;
      float* o = static_cast<float*>(*out);
      rates[i] = runs_per_second([&] { attn->forward(0, *qd, *kd, *kd, o, h.heads, b, 0.125f); },
                                 [&] { (void)se.get_bytes(&host, o, 4); }) *
                 bytes / 1e9;
      se.clear();
    }
    report_->speeds.push_back({"paged_attention", "decode context=" + std::to_string(s.len) + " heads=" +
                                                      std::to_string(h.heads) + "/" + std::to_string(h.kv_heads) +
                                                      " head_dim=" + std::to_string(h.head_dim),
                               label_, "GB/s", rates[0], rates[1]});
  }

 private:
  struct Seq {
    int32_t len = 0;
    std::vector<int32_t> table;
  };
  Session& t_;
  Session& r_;
  const Options& options_;
  Rng& rng_;
  Report* report_;
  KvCacheSpec spec_;
  std::string label_;
  std::map<Session*, std::unique_ptr<AttentionBackend>> backends_;
  std::vector<int32_t> free_;
  std::map<int, Seq> seqs_;
  int32_t window_[kLayers] = {};
  float softcap_[kLayers] = {};
  std::vector<float> sinks_[kLayers];
};

}  // namespace

void check_attention(Session& target, Session& reference, const Options& options, Rng& rng, Report* report) {
  if (!selected(options, "attention", "paged_attention")) return;
  const std::vector<HeadConfig> heads = {{4, 2, 32}, {7, 1, 64}, {5, 5, 8}, {6, 3, 16}};
  const std::vector<Step> steps = {
      {"prefill", {{0, 1}, {1, 16}, {2, 37}}},                   // 1 token, exactly one block, across two boundaries
      {"chunked prefill + decode", {{2, 13}, {3, 5}, {0, 1}}},   // a second chunk beside a new prefill and a decode
      {"decode", {{0, 1}, {1, 1}, {2, 1}, {3, 1}}},              // sequence 1 starts its second block
  };
  for (DType kv : {DType::f16, DType::f32}) {
    for (size_t hi = 0; hi < heads.size(); ++hi) {
      const HeadConfig& h = heads[hi];
      Scenario sc(target, reference, options, rng, report);
      const double tol = kv_tolerance(kv);
      if (!sc.allocate(scenario_cache(h, kv), "kv " + std::string(to_string(kv)))) break;
      for (const Step& s : steps) sc.run(s, h, tol);
      if (hi != 0) continue;
      // The longest context: a prefill in chunks of 256, then a decode beside a short sequence.
      for (int c = 0; c < 4; ++c) sc.run({"long prefill chunk", {{4, 256}}}, h, tol);
      sc.run({"long decode", {{4, 1}, {0, 1}}}, h, tol);
      if (options.measure_speed) sc.measure_decode(h, 4);
    }
  }
  // Gemma's attention: layer 0 windowed (a window that is no multiple of the block size or
  // the kernels' key chunks), layer 1 global, both soft-capped in the second scenario; the
  // steps cross the window in a chunked prefill and in decodes.
  for (DType kv : {DType::f16, DType::f32}) {
    for (float softcap : {0.0f, 5.0f}) {
      const HeadConfig h = softcap > 0 ? HeadConfig{4, 1, 64} : HeadConfig{4, 2, 32};
      Scenario sc(target, reference, options, rng, report);
      const double tol = kv_tolerance(kv);
      if (!sc.allocate(scenario_cache(h, kv), "kv " + std::string(to_string(kv)))) break;
      sc.set_layer_attention(0, 83, softcap);
      sc.set_layer_attention(1, 0, softcap);
      sc.run({"window: prefill", {{0, 1}, {1, 60}, {2, 100}}}, h, tol);          // shorter than, inside and past the window
      sc.run({"window: chunked prefill + decode", {{1, 70}, {2, 1}, {3, 9}}}, h, tol);  // a chunk that crosses it
      for (int c = 0; c < 3; ++c) sc.run({"window: long prefill chunk", {{4, 200}}}, h, tol);
      sc.run({"window: decode", {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}}}, h, tol);
    }
  }
  // gpt-oss's attention: sinks on both layers (large ones too: they may outweigh every key),
  // layer 0 also windowed; GQA with several query heads per kv head.
  for (DType kv : {DType::f16, DType::f32}) {
    const HeadConfig h{8, 2, 64};
    Scenario sc(target, reference, options, rng, report);
    const double tol = kv_tolerance(kv);
    if (!sc.allocate(scenario_cache(h, kv), "kv " + std::string(to_string(kv)))) break;
    if (!sc.target_implements("sinks")) {
      report_not_offered(report, "attention", "paged_attention sinks",
                         "models with attention sinks (gpt-oss) are refused at load");
      break;
    }
    std::vector<float> big = random_floats(rng, h.heads, -2.0f, 2.0f);
    big[0] = 30.0f;  // a sink above every score: the head's output nearly vanishes
    sc.set_layer_attention(0, 37, 0.0f);
    sc.set_layer_sinks(0, random_floats(rng, h.heads, -3.0f, 3.0f));
    sc.set_layer_sinks(1, big);
    sc.run({"sinks: prefill", {{0, 1}, {1, 20}, {2, 90}}}, h, tol);
    sc.run({"sinks: chunked prefill + decode", {{1, 30}, {2, 1}, {0, 1}}}, h, tol);
    sc.run({"sinks: decode", {{0, 1}, {1, 1}, {2, 1}}}, h, tol);
  }
  report->notes.push_back("paged_attention: longest context checked " + std::to_string(kLongContext) +
                          " tokens, block size " + std::to_string(kBlockSize));
}

}  // namespace troupe::conformance
