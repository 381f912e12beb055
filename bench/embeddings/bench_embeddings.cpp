// troupe_bench_embeddings MODEL_DIR SENTENCES_FILE [--batches 1,32,256] [--threads N] [--seconds S]
//
// Embeddings per second of a pooling model through the engine: each round
// submits B sentences at once (one "request" of B inputs, as an
// /v1/embeddings call with B inputs would) and waits for all; rounds repeat
// for at least S seconds. Prints one JSON line per batch size.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "actors/engine.hpp"

using troupe::engine::Engine;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR SENTENCES_FILE [--batches 1,32,256] [--threads N] [--seconds S]\n",
                 argv[0]);
    return 2;
  }
  std::vector<int> batches = {1, 32, 256};
  int threads = 0;
  double seconds = 5;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--batches") {
      batches.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string b; std::getline(ss, b, ',');) batches.push_back(std::stoi(b));
    } else if (flag == "--threads") {
      threads = std::stoi(argv[i + 1]);
    } else if (flag == "--seconds") {
      seconds = std::stod(argv[i + 1]);
    }
  }
  std::vector<std::string> sentences;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) sentences.push_back(line);
  if (sentences.empty()) return std::fprintf(stderr, "no sentences in %s\n", argv[2]), 1;
  troupe::engine::EngineOptions opts;
  opts.config.model.model_path = argv[1];
  opts.config.parallel.num_threads = threads;
  opts.config.scheduler.max_num_seqs = 256;
  opts.config.scheduler.max_num_batched_tokens = 8192;
  opts.stat_log_interval_s = 0;
  auto engine = Engine::start(std::move(opts));
  if (!engine) return std::fprintf(stderr, "%s\n", engine.status().to_string().c_str()), 1;
  size_t next = 0;
  auto round = [&](int b) -> bool {
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    bool ok = true;
    for (int i = 0; i < b; ++i) {
      troupe::engine::GenerateRequest req;
      req.prompt = sentences[next++ % sentences.size()];
      req.pooling = troupe::engine::PoolingParams{};
      auto id = (*engine)->submit(req, [&](troupe::engine::RequestOutput o) {
        if (!o.finished) return;
        std::lock_guard lock(mu);
        ok = ok && o.finish_reason != troupe::FinishReason::error;
        ++done;
        cv.notify_all();
      });
      if (!id) return false;
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == b; });
    return ok;
  };
  for (int b : batches) {
    round(b);  // warm-up
    int64_t embedded = 0;
    const auto t0 = Clock::now();
    double wall = 0;
    do {
      if (!round(b)) return std::fprintf(stderr, "a request failed\n"), 1;
      embedded += b;
      wall = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (wall < seconds);
    std::printf("{\"engine\": \"troupe\", \"batch\": %d, \"embeddings\": %lld, \"seconds\": %.3f, \"per_second\": %.1f}\n",
                b, static_cast<long long>(embedded), wall, static_cast<double>(embedded) / wall);
    std::fflush(stdout);
  }
  return 0;
}
