// A worker of a platform with a GGUF model loaded, and steps written by hand,
// for the single-process worker tests of tests/platforms (cpu_worker_test,
// batch_invariance_test): each sequence keeps its KV cache in a fixed range of
// blocks, so a test builds batches without a scheduler.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "troupe/platform.hpp"
#include "troupe/worker.hpp"

namespace troupe::testing {

struct LoadedWorker {
  std::unique_ptr<gguf::GgufModelSource> source;  // declared first: outlives the worker reading it
  std::unique_ptr<Worker> worker;
  int64_t vocab = 0;
};

/// The platform completes `config` (check_and_update_config); then its worker of rank 0
/// initialises its device, loads the GGUF file `path` and allocates `num_blocks` KV blocks.
/// An error names the step that failed.
inline Result<LoadedWorker> load_worker(Platform& platform, EngineConfig& config, const std::string& path,
                                        int64_t num_blocks) {
  auto step_error = [](const char* step, const Status& s) { return Status(s.code(), std::string(step) + ": " + s.message()); };
  if (Status s = platform.check_and_update_config(config); !s.ok()) return step_error("check_and_update_config", s);
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) return step_error("open", file.status());
  LoadedWorker w;
  w.source = std::make_unique<gguf::GgufModelSource>(std::shared_ptr<const gguf::GgufFile>(std::move(*file)));
  auto worker = platform.make_worker(config, 0);
  if (!worker.ok()) return step_error("make_worker", worker.status());
  w.worker = std::move(*worker);
  if (Status s = w.worker->init_device(); !s.ok()) return step_error("init_device", s);
  if (Status s = w.worker->load_model(*w.source); !s.ok()) return step_error("load_model", s);
  if (Status s = w.worker->initialize_cache(num_blocks); !s.ok()) return step_error("initialize_cache", s);
  w.vocab = w.worker->model_info()->vocab_size;
  return w;
}

/// `n` tokens of one sequence in a step: ids[0..n) at positions start_pos.., its KV cache in
/// blocks first_block, first_block + 1, ... (`block_size` tokens each, the spec's).
struct BatchPart {
  int first_block;
  const int32_t* ids;
  int n;
  int start_pos;
  bool want_logits;
};

/// Runs one step of `parts`; the logits row of every part that wants one, in order (none, and
/// a test failure, when the step fails). The output's buffers go back to the worker.
inline std::vector<std::vector<float>> run_step(LoadedWorker& w, const std::vector<BatchPart>& parts,
                                                int block_size) {
  ExecuteModelRequest req;
  auto& b = req.batch;
  b.query_start.push_back(0);
  for (const auto& p : parts) {
    for (int i = 0; i < p.n; ++i) {
      const int pos = p.start_pos + i;
      b.token_ids.push_back(p.ids[i]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{p.first_block + pos / block_size} * block_size + pos % block_size);
    }
    b.query_start.push_back(b.num_tokens());
    const int len = p.start_pos + p.n;
    b.seq_lens.push_back(len);
    std::vector<int32_t> table;
    for (int i = 0; i < (len + block_size - 1) / block_size; ++i) table.push_back(p.first_block + i);
    b.block_tables.push_back(table);
    if (p.want_logits) b.logits_indices.push_back(b.num_tokens() - 1);
  }
  auto out = w.worker->execute_model(req);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  std::vector<std::vector<float>> rows;
  if (!out.ok()) return rows;
  for (size_t r = 0; r < b.logits_indices.size(); ++r)
    rows.emplace_back(out->logits.begin() + r * w.vocab, out->logits.begin() + (r + 1) * w.vocab);
  w.worker->recycle_output(std::move(*out));
  return rows;
}

}  // namespace troupe::testing
