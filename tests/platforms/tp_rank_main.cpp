// One rank of a multi-process test (tensor_parallel_test.cpp starts several).
//
//   tp_rank_main model --model F --rank R --tp T --pp P [--id ID --token-id ID2] --out FILE
//                      [--steps N] [--prompt TEXT [--special 1]] [--threads N] [--kv-cache-dtype auto|fp16|fp32]
//     Builds the CPU worker of rank R through the real cpu plugin, loads the model, runs one
//     prefill batch (two fixed sequences, or TEXT tokenized with the model's tokenizer) and
//     N-1 greedy decode steps in lock step with the other ranks. Rank 0 picks each argmax and
//     broadcasts the tokens over a second communicator (ID2), so every rank feeds the same
//     batch; rank 0 writes its logits of every step to FILE.
//   tp_rank_main comm --id ID --rank R --world W --case all|stall|late|die|kill|mismatch|size|sums
//                     [--out FILE]
//     Collectives between W processes with values checked exactly (all), a rank that never
//     arrives (stall: rank W-1 is not started; late: rank W-1 attaches, then calls nothing
//     until after the timeout), a rank that exits after attaching (die: rank W-1 exits), a rank killed (SIGKILL) in the middle of large all_reduces (kill: rank
//     W-1), a collective that differs between ranks (mismatch), a receive of another size
//     than the message (size), sums of pseudo-random values whose bits every rank writes to
//     FILE.r<rank> (sums: to compare communicators bit for bit).
//
//   Instead of --id (and --token-id), `--tcp-host HOST --id-file F` meets over TCP: rank 0
//   makes the id(s) in its own process (a listener on HOST) and writes them to F, the other
//   ranks read F. `--tamper token|world` (a rank > 0) joins with a wrong token or world size.
//
// Prints "RESULT ok" or "RESULT <status>" as its last line; exit code 0 when the case did
// what it should.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "troupe/communicator.hpp"
#include "troupe/platform.hpp"
#include "troupe/worker.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> parse_flags(int argc, char** argv, int from) {
  std::map<std::string, std::string> f;
  for (int i = from; i + 1 < argc; i += 2) f[argv[i]] = argv[i + 1];
  return f;
}

/// The communicator ids of this rank: --id/--token-id, or over TCP (--tcp-host, --id-file) the
/// `count` ids rank 0 makes here and writes to the id file, which the other ranks wait for.
Result<std::vector<std::string>> communicator_ids(const std::map<std::string, std::string>& f, int rank, int world,
                                                  int count) {
  std::vector<std::string> ids;
  if (!f.count("--tcp-host")) {
    if (f.count("--id")) ids.push_back(f.at("--id"));
    if (f.count("--token-id")) ids.push_back(f.at("--token-id"));
    return ids;
  }
  const std::string file = f.at("--id-file");
  if (rank == 0) {
    Platform* platform = testing::cpu_platform();
    if (platform == nullptr) return unavailable("the cpu platform plugin did not load");
    ParallelConfig p;
    p.tensor_parallel_size = world;
    p.communicator_host = f.at("--tcp-host");
    std::string text;
    for (int i = 0; i < count; ++i) {
      auto id = platform->make_communicator_id(p);
      if (!id.ok()) return id.status();
      ids.push_back(*id);
      text += *id + "\n";
    }
    {
      std::ofstream o(file + ".tmp");
      o << text;
    }
    if (std::rename((file + ".tmp").c_str(), file.c_str()) != 0) return data_loss("cannot write " + file);
    return ids;
  }
  for (const auto deadline = Clock::now() + std::chrono::seconds(60); ids.empty();) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) ids.push_back(line);
    if (!ids.empty()) break;
    if (Clock::now() >= deadline) return unavailable("rank 0 wrote no id file " + file);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (f.count("--tamper") && f.at("--tamper") == "token")
    for (auto& id : ids) id.back() = id.back() == '0' ? '1' : '0';
  return ids;
}

int report(const Status& s) {
  std::printf("RESULT %s\n", s.ok() ? "ok" : s.to_string().c_str());
  std::fflush(stdout);
  return s.ok() ? 0 : 1;
}

// ---------------------------------------------------------------------------------------
// model

constexpr int kBlockSize = 16;
constexpr int kBlocksPerSeq = 8;

struct Seq {
  std::vector<int32_t> tokens;
  int32_t cached = 0;  // tokens already in the KV cache
};

ForwardBatch make_batch(const std::vector<Seq>& seqs) {
  ForwardBatch b;
  b.query_start.push_back(0);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const Seq& q = seqs[s];
    for (int32_t pos = q.cached; pos < static_cast<int32_t>(q.tokens.size()); ++pos) {
      b.token_ids.push_back(q.tokens[static_cast<size_t>(pos)]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{static_cast<int64_t>(s) * kBlocksPerSeq + pos / kBlockSize} * kBlockSize +
                               pos % kBlockSize);
    }
    b.query_start.push_back(b.num_tokens());
    b.seq_lens.push_back(static_cast<int32_t>(q.tokens.size()));
    std::vector<int32_t> table;
    for (int i = 0; i < kBlocksPerSeq; ++i) table.push_back(static_cast<int32_t>(s) * kBlocksPerSeq + i);
    b.block_tables.push_back(table);
    b.logits_indices.push_back(b.num_tokens() - 1);
  }
  return b;
}

Status run_model(const std::map<std::string, std::string>& f) {
  Platform* platform = testing::cpu_platform();
  if (platform == nullptr) return unavailable("the cpu platform plugin did not load");
  runtime::register_builtin_models();
  const int rank = std::stoi(f.at("--rank"));
  EngineConfig config;
  config.model.model_path = f.at("--model");
  config.parallel.tensor_parallel_size = std::stoi(f.at("--tp"));
  config.parallel.pipeline_parallel_size = std::stoi(f.at("--pp"));
  config.parallel.num_threads = f.count("--threads") ? std::stoi(f.at("--threads")) : 1;
  config.scheduler.max_num_batched_tokens = 64;
  if (f.count("--kv-cache-dtype")) config.cache.cache_dtype = f.at("--kv-cache-dtype");
  TROUPE_RETURN_IF_ERROR(platform->check_and_update_config(config));
  const int world = config.parallel.world_size();
  auto ids = communicator_ids(f, rank, world, 2);
  if (!ids.ok()) return ids.status();
  if (world > 1 && ids->size() != 2) return invalid_argument("a world of several ranks needs --id and --token-id");
  config.parallel.communicator_id = world > 1 ? (*ids)[0] : "";
  const int steps = f.count("--steps") ? std::stoi(f.at("--steps")) : 6;

  auto worker = platform->make_worker(config, rank);
  if (!worker.ok()) return worker.status();
  TROUPE_RETURN_IF_ERROR((*worker)->init_device());
  auto file = gguf::GgufFile::open(config.model.model_path);
  if (!file.ok()) return file.status();
  std::shared_ptr<const gguf::GgufFile> shared(std::move(*file));
  gguf::GgufModelSource source(shared);
  TROUPE_RETURN_IF_ERROR((*worker)->load_model(source));
  auto spec = (*worker)->get_kv_cache_spec();
  if (!spec.ok()) return spec.status();
  TROUPE_RETURN_IF_ERROR((*worker)->initialize_from_config(KvCacheConfig{*spec, 2 * kBlocksPerSeq}));
  const int64_t vocab = (*worker)->model_info()->vocab_size;

  // The tokens rank 0 chooses reach every rank through a communicator of the test's own.
  std::unique_ptr<DeviceCommunicator> tokens_comm;
  if (world > 1) {
    ParallelConfig p;
    p.tensor_parallel_size = world;
    p.communicator_id = (*ids)[1];
    auto c = platform->make_device_communicator(p, rank);
    if (!c.ok()) return c.status();
    tokens_comm = std::move(*c);
  }

  std::vector<Seq> seqs;
  std::unique_ptr<tokenizer::Tokenizer> text_tokenizer;
  if (f.count("--prompt")) {
    auto tok = gguf::read_tokenizer(*shared);
    if (!tok.ok()) return tok.status();
    text_tokenizer = std::move(*tok);
    const bool special = f.count("--special") && f.at("--special") == "1";  // "<|im_start|>" etc. as tokens
    seqs.push_back({text_tokenizer->encode(f.at("--prompt"), true, special), 0});
  } else {
    seqs.push_back({{1, 72, 301, 259, 403, 35}, 0});
    seqs.push_back({{1, 410, 66, 295, 282, 260, 300, 48, 290, 511}, 0});
  }
  const auto S = static_cast<int64_t>(seqs.size());
  std::vector<int32_t> chosen;      // [steps][S]
  std::vector<float> all_logits;    // [steps][S][vocab], rank 0
  double model_seconds = 0;
  for (int step = 0; step < steps; ++step) {
    ExecuteModelRequest req;
    req.batch = make_batch(seqs);
    const auto t0 = Clock::now();
    auto out = (*worker)->execute_model(req);
    model_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (!out.ok()) return out.status();
    std::vector<float> next(static_cast<size_t>(S), 0.0f);  // token ids as f32 (exact below 2^24)
    if (rank == 0) {
      if (static_cast<int64_t>(out->logits.size()) != S * vocab)
        return internal_error("rank 0 got " + std::to_string(out->logits.size()) + " logits, not " +
                              std::to_string(S * vocab));
      all_logits.insert(all_logits.end(), out->logits.begin(), out->logits.end());
      for (int64_t s = 0; s < S; ++s) {
        const float* row = out->logits.data() + s * vocab;
        int64_t best = 0;
        for (int64_t v = 1; v < vocab; ++v)
          if (row[v] > row[best]) best = v;
        next[static_cast<size_t>(s)] = static_cast<float>(best);
      }
    } else if (!out->logits.empty() || out->vocab_size != vocab) {
      return internal_error("rank " + std::to_string(rank) + " returned logits or no vocab size");
    }
    if (tokens_comm) TROUPE_RETURN_IF_ERROR(tokens_comm->broadcast(next.data(), S, DType::f32, 0));
    for (int64_t s = 0; s < S; ++s) {
      Seq& q = seqs[static_cast<size_t>(s)];
      q.cached = static_cast<int32_t>(q.tokens.size());
      q.tokens.push_back(static_cast<int32_t>(next[static_cast<size_t>(s)]));
      chosen.push_back(q.tokens.back());
    }
  }
  std::printf("rank %d: %d steps, model %.3f s\n", rank, steps, model_seconds);
  if (text_tokenizer && rank == 0) {
    const Seq& q = seqs.front();
    const std::vector<int32_t> generated(q.tokens.end() - steps, q.tokens.end());
    std::printf("text: %s\n", text_tokenizer->decode(generated).c_str());
  }
  if (rank == 0) {
    // "TPLG", vocab, rows per step, steps; then per step the chosen tokens and the logits rows.
    std::ofstream o(f.at("--out"), std::ios::binary);
    const int32_t head[4] = {0x474c5054, static_cast<int32_t>(vocab), static_cast<int32_t>(S), steps};
    o.write(reinterpret_cast<const char*>(head), sizeof head);
    for (int step = 0; step < steps; ++step) {
      o.write(reinterpret_cast<const char*>(chosen.data() + step * S), static_cast<std::streamsize>(S * 4));
      o.write(reinterpret_cast<const char*>(all_logits.data() + step * S * vocab),
              static_cast<std::streamsize>(S * vocab * 4));
    }
    if (!o) return data_loss("cannot write " + f.at("--out"));
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// comm

Status expect(bool ok, const std::string& what) { return ok ? Status() : internal_error("wrong values: " + what); }

Status comm_all(DeviceCommunicator& c) {
  const int me = c.rank(), W = c.world_size();
  // all_reduce over several rounds (1.3M floats > one 2 MiB slot).
  {
    const int64_t n = 1'300'007;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((me + 1) * (i % 1000) + me);
    TROUPE_RETURN_IF_ERROR(c.all_reduce(x.data(), n, DType::f32));
    const int64_t ranks_sum = W * (W + 1) / 2, base = W * (W - 1) / 2;
    for (int64_t i = 0; i < n; ++i)
      if (x[i] != static_cast<float>(ranks_sum * (i % 1000) + base)) return expect(false, "all_reduce at " + std::to_string(i));
  }
  // all_gather, two rounds.
  {
    const int64_t n = 700'001;
    std::vector<float> in(static_cast<size_t>(n)), out(static_cast<size_t>(n * W), -1.0f);
    for (int64_t i = 0; i < n; ++i) in[i] = static_cast<float>(me * 1000 + i % 997);
    TROUPE_RETURN_IF_ERROR(c.all_gather(in.data(), out.data(), n, DType::f32));
    for (int r = 0; r < W; ++r)
      for (int64_t i = 0; i < n; ++i)
        if (out[r * n + i] != static_cast<float>(r * 1000 + i % 997)) return expect(false, "all_gather");
  }
  // reduce_scatter: rank q keeps the sum of block q.
  {
    const int64_t n = 300'000;
    std::vector<float> in(static_cast<size_t>(n * W)), out(static_cast<size_t>(n), -1.0f);
    for (int q = 0; q < W; ++q)
      for (int64_t i = 0; i < n; ++i) in[q * n + i] = static_cast<float>(me + q * 10 + i % 100);
    TROUPE_RETURN_IF_ERROR(c.reduce_scatter(in.data(), out.data(), n, DType::f32));
    for (int64_t i = 0; i < n; ++i)
      if (out[i] != static_cast<float>(W * (W - 1) / 2 + W * (me * 10 + i % 100))) return expect(false, "reduce_scatter");
  }
  // gather at rank 1 (f16 bytes travel as they are).
  {
    const int64_t n = 1000;
    std::vector<uint16_t> in(static_cast<size_t>(n)), out(static_cast<size_t>(n * W), 0xffff);
    for (int64_t i = 0; i < n; ++i) in[i] = static_cast<uint16_t>(me * 7 + i);
    TROUPE_RETURN_IF_ERROR(c.gather(in.data(), out.data(), n, DType::f16, 1));
    if (me == 1) {
      for (int r = 0; r < W; ++r)
        for (int64_t i = 0; i < n; ++i)
          if (out[r * n + i] != static_cast<uint16_t>(r * 7 + i)) return expect(false, "gather");
    } else if (out[0] != 0xffff) {
      return expect(false, "gather wrote outside its root");
    }
  }
  // broadcast from the last rank, two rounds.
  {
    const int64_t n = 600'000;
    std::vector<float> x(static_cast<size_t>(n), static_cast<float>(-me));
    if (me == W - 1)
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 4093);
    TROUPE_RETURN_IF_ERROR(c.broadcast(x.data(), n, DType::f32, W - 1));
    for (int64_t i = 0; i < n; ++i)
      if (x[i] != static_cast<float>(i % 4093)) return expect(false, "broadcast");
  }
  // send/recv along a chain 0 -> 1 -> ... -> W-1 -> 0 with no cycle of waits: rank 0 sends
  // first, every other rank receives first. 1.5M floats: several mailbox chunks.
  {
    const int64_t n = 1'500'000;
    std::vector<float> msg(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
    const int next = (me + 1) % W, prev = (me + W - 1) % W;
    for (int64_t i = 0; i < n; ++i) msg[i] = static_cast<float>(me * 100000 + i % 65521);
    if (me == 0) {
      TROUPE_RETURN_IF_ERROR(c.send(msg.data(), n, DType::f32, next));
      TROUPE_RETURN_IF_ERROR(c.recv(got.data(), n, DType::f32, prev));
    } else {
      TROUPE_RETURN_IF_ERROR(c.recv(got.data(), n, DType::f32, prev));
      TROUPE_RETURN_IF_ERROR(c.send(msg.data(), n, DType::f32, next));
    }
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != static_cast<float>(prev * 100000 + i % 65521)) return expect(false, "recv");
  }
  // Only f32 sums.
  {
    uint16_t h[4] = {};
    if (c.all_reduce(h, 4, DType::bf16).code() != StatusCode::not_supported) return expect(false, "bf16 all_reduce");
  }
  // Four ranks: the tensor groups of two pipeline stages ({0, 1} and {2, 3}, made at the same
  // time), a large all_reduce in each, and a group made from a group (its ranks reversed).
  if (W == 4) {
    const int stage = me / 2;
    auto g = c.new_group({stage * 2, stage * 2 + 1});
    if (!g.ok()) return g.status();
    if ((*g)->world_size() != 2 || (*g)->rank() != me % 2) return expect(false, "stage group ranks");
    const int64_t n = 900'001;
    std::vector<float> x(static_cast<size_t>(n), static_cast<float>(me + 1));
    TROUPE_RETURN_IF_ERROR((*g)->all_reduce(x.data(), n, DType::f32));
    for (int64_t i = 0; i < n; ++i)
      if (x[i] != static_cast<float>(4 * stage + 3)) return expect(false, "stage group all_reduce");
    auto h = (*g)->new_group({1, 0});
    if (!h.ok()) return h.status();
    if ((*h)->rank() != 1 - me % 2) return expect(false, "nested group ranks");
    float v[2] = {static_cast<float>(me), -1.0f};
    TROUPE_RETURN_IF_ERROR((*h)->broadcast(v, 2, DType::f32, 0));  // from the stage's second rank
    if (v[0] != static_cast<float>(stage * 2 + 1)) return expect(false, "nested group broadcast");
  }
  // A group of the first and the last rank; the others are not in it.
  if (me == 0 || me == W - 1) {
    auto g = c.new_group({0, W - 1});
    if (!g.ok()) return g.status();
    if ((*g)->world_size() != 2 || (*g)->rank() != (me == 0 ? 0 : 1)) return expect(false, "group ranks");
    float v[3] = {1.0f + static_cast<float>(me), 2.0f, 3.0f};
    TROUPE_RETURN_IF_ERROR((*g)->all_reduce(v, 3, DType::f32));
    if (v[0] != static_cast<float>(2 + W - 1) || v[1] != 4.0f || v[2] != 6.0f) return expect(false, "group all_reduce");
  }
  float done = 1.0f;
  TROUPE_RETURN_IF_ERROR(c.all_reduce(&done, 1, DType::f32));
  return expect(done == static_cast<float>(W), "final all_reduce");
}

/// Sums whose bits depend on the order of the additions (values of many magnitudes), through
/// all_reduce (a small buffer, and a large one that goes in several rounds or pieces) and
/// reduce_scatter; this rank's results go to `out`.r<rank>.
Status comm_sums(DeviceCommunicator& c, const std::string& out) {
  const int me = c.rank(), W = c.world_size();
  uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(me + 1);
  auto value = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int exponent = static_cast<int>((state >> 59) % 24) - 12;
    return std::ldexp(static_cast<float>((state >> 33) & 0xffffff) / 16777216.0f - 0.5f, exponent);
  };
  std::vector<float> results;
  for (int64_t n : {int64_t{1001}, int64_t{1'000'003}}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = value();
    TROUPE_RETURN_IF_ERROR(c.all_reduce(x.data(), n, DType::f32));
    results.insert(results.end(), x.begin(), x.end());
  }
  const int64_t n = 300'001;
  std::vector<float> in(static_cast<size_t>(n * W)), y(static_cast<size_t>(n));
  for (auto& v : in) v = value();
  TROUPE_RETURN_IF_ERROR(c.reduce_scatter(in.data(), y.data(), n, DType::f32));
  results.insert(results.end(), y.begin(), y.end());
  std::ofstream o(out + ".r" + std::to_string(me), std::ios::binary);
  o.write(reinterpret_cast<const char*>(results.data()), static_cast<std::streamsize>(results.size() * sizeof(float)));
  return o ? Status() : data_loss("cannot write " + out);
}

Status run_comm(const std::map<std::string, std::string>& f) {
  Platform* platform = testing::cpu_platform();
  if (platform == nullptr) return unavailable("the cpu platform plugin did not load");
  ParallelConfig p;
  p.tensor_parallel_size = std::stoi(f.at("--world"));
  const int rank = std::stoi(f.at("--rank"));
  auto ids = communicator_ids(f, rank, p.tensor_parallel_size, 1);
  if (!ids.ok()) return ids.status();
  if (ids->empty()) return invalid_argument("comm needs --id, or --tcp-host and --id-file");
  p.communicator_id = ids->front();
  if (f.count("--tamper") && f.at("--tamper") == "world") p.tensor_parallel_size += 1;
  const std::string which = f.at("--case");
  auto c = platform->make_device_communicator(p, rank);
  if (!c.ok()) return c.status();
  DeviceCommunicator& comm = **c;
  if (which == "all") return comm_all(comm);
  if (which == "die" && rank == comm.world_size() - 1) std::_Exit(0);  // attached, then gone
  if (which == "late" && rank == comm.world_size() - 1) {  // attached, then silent past the others' timeout
    const auto timeout = std::chrono::duration<double>(std::atof(std::getenv("TROUPE_CPU_COMM_TIMEOUT_S")));
    std::this_thread::sleep_for(timeout + std::chrono::seconds(2));
    return {};
  }
  if (which == "stall" || which == "die" || which == "late") {
    const auto t0 = Clock::now();
    float x[4] = {1, 2, 3, 4};
    Status s = comm.all_reduce(x, 4, DType::f32);
    std::printf("waited %.3f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
    if (s.ok()) return internal_error("the all_reduce succeeded without the last rank");
    std::printf("error %s\n", s.to_string().c_str());
    // Later calls answer at once with the same failure.
    Status again = comm.broadcast(x, 4, DType::f32, 0);
    if (again.code() != s.code() || again.message().find(s.message()) == std::string::npos)
      return internal_error("a later call did not repeat the failure: " + again.to_string());
    return s;
  }
  if (which == "kill") {  // rank W-1 is killed while large all_reduces run
    if (rank == comm.world_size() - 1)
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        kill(getpid(), SIGKILL);
      }).detach();
    std::vector<float> x(size_t{2} << 20, 1.0f);
    for (int i = 0; i < 100000; ++i) {
      const auto t0 = Clock::now();
      Status s = comm.all_reduce(x.data(), static_cast<int64_t>(x.size()), DType::f32);
      if (!s.ok()) {
        std::printf("waited %.3f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
        // Stay a moment, so the other survivors learn of the killed rank, not of this one's end.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        return s;
      }
      std::fill(x.begin(), x.end(), 1.0f);
    }
    return internal_error("no all_reduce failed although rank " + std::to_string(comm.world_size() - 1) +
                          " was killed");
  }
  if (which == "sums") return comm_sums(comm, f.at("--out"));
  if (which == "mismatch") {  // every rank fails, none waits
    float x[4] = {1, 2, 3, 4};
    // Every rank attached first: rank 0 fails at once and its end unlinks the segment's name.
    TROUPE_RETURN_IF_ERROR(comm.all_reduce(x, 1, DType::f32));
    return rank == 0 ? comm.broadcast(x, 4, DType::f32, 0) : comm.all_reduce(x, 4, DType::f32);
  }
  if (which == "size") {  // a receive of another size than the message is an error, not garbage
    float x[16] = {};
    // Both attached first: rank 0 may send and be gone before rank 1 even opens the segment.
    TROUPE_RETURN_IF_ERROR(comm.all_reduce(x, 1, DType::f32));
    if (rank == 0) return comm.send(x, 10, DType::f32, 1);
    if (rank == 1) return comm.recv(x, 11, DType::f32, 0);
    return {};
  }
  return invalid_argument("unknown case " + which);
}

}  // namespace
}  // namespace troupe

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model|comm --flag value ...\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const auto flags = troupe::parse_flags(argc, argv, 2);
  try {
    if (mode == "model") return troupe::report(troupe::run_model(flags));
    if (mode == "comm") return troupe::report(troupe::run_comm(flags));
  } catch (const std::exception& e) {  // a missing flag (std::map::at, std::stoi)
    std::fprintf(stderr, "bad arguments: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
