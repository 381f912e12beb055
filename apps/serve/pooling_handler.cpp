// POST /v1/embeddings (OpenAI), /pooling, /score and /rerank (vLLM): every input is one
// pooling request to the engine, submitted together (they batch); the answer
// is written once all have finished, on the HTTP thread.
#include <asio.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "actors/io_processing.hpp"
#include "apps/serve/server_context.hpp"
#include "runtime/frontend/openai/render.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"

namespace troupe::apps::serve {
namespace {

/// One request's inputs in flight; answered when the last one ends.
struct Pooling {
  restinio::request_handle_t req;
  engine::Engine* engine = nullptr;
  std::vector<std::vector<float>> vectors;
  std::vector<std::string> engine_ids;
  int64_t prompt_tokens = 0;
  size_t remaining = 0;
  bool failed = false;
  std::function<void(Pooling&)> on_done;  // renders the answer from `vectors`

  void on_output(size_t i, engine::RequestOutput o) {
    if (failed || !o.finished) return;
    if (o.finish_reason == FinishReason::error || o.embedding.empty()) {
      failed = true;
      for (size_t k = 0; k < engine_ids.size(); ++k)
        if (k != i && !engine_ids[k].empty()) engine->abort(engine_ids[k]);
      return respond_error(req, openai::from_status(o.error.ok() ? internal_error("pooling failed") : o.error));
    }
    vectors[i] = std::move(o.embedding);
    prompt_tokens += o.num_prompt_tokens;
    if (--remaining == 0) on_done(*this);
  }
};

/// Submits `inputs` (text or token ids) as pooling requests of `params`.
void submit_all(ServerContext& ctx, std::shared_ptr<Pooling> job, const std::vector<openai::Prompt>& inputs,
                const engine::PoolingParams& params, std::optional<int64_t> truncate) {
  auto* e = job->engine;
  job->vectors.resize(inputs.size());
  job->engine_ids.resize(inputs.size());
  job->remaining = inputs.size();
  const std::string id = openai::make_request_id("embd");
  for (size_t i = 0; i < inputs.size(); ++i) {
    engine::GenerateRequest g;
    g.request_id = fmt::format("{}-{}", id, i);
    if (inputs[i].is_tokens) g.prompt_token_ids = inputs[i].token_ids;
    else g.prompt = inputs[i].text;
    g.pooling = params;
    g.truncate_prompt_tokens = truncate;
    std::string refused_field;
    auto submitted = submit_on_http_thread(
        ctx, *e, std::move(g), [job, i](engine::RequestOutput o) { job->on_output(i, std::move(o)); }, &refused_field);
    if (!submitted.ok()) {
      job->failed = true;
      for (size_t k = 0; k < i; ++k) e->abort(job->engine_ids[k]);
      return respond_error(job->req,
                           openai::from_status(submitted.status(), refused_field.empty() ? "input" : refused_field));
    }
    job->engine_ids[i] = *submitted;
  }
}

/// Cosine similarity in double precision; 0 when either vector is zero.
double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

bool check_model(const engine::Engine& e, const restinio::request_handle_t& req, const std::string& model) {
  if (e.serves_model(model)) return true;
  respond_error(req, openai::model_not_found(model));
  return false;
}

}  // namespace

void handle_embeddings(ServerContext& ctx, const restinio::request_handle_t& req, bool vllm_pooling) {
  engine::Engine* e = ctx.engine.load();
  if (vllm_pooling && ctx.io_processor) {
    // The plugin owns the request's shape; its answer is written on the HTTP thread.
    asio::io_context* io = ctx.io;
    engine::run_io_processor_async(*e, *ctx.io_processor, ctx.io_processor_name, std::string(req->body()),
                                   [io, req](Result<std::string> out) {
                                     asio::post(*io, [req, out = std::move(out)] {
                                       if (!out) return respond_error(req, openai::from_status(out.status()));
                                       respond(req, 200, "application/json", *out);
                                     });
                                   });
    return;
  }
  openai::EmbeddingRequest r;
  if (auto err = openai::parse_embedding_request(req->body(), ctx.options.limits, &r)) return respond_error(req, *err);
  if (!check_model(*e, req, r.model)) return;
  engine::PoolingParams params;
  if (r.dimensions) params.dimensions = static_cast<int32_t>(std::min<int64_t>(*r.dimensions, 1 << 20));
  params.normalize = r.normalize;
  auto job = std::make_shared<Pooling>();
  job->req = req;
  job->engine = e;
  const std::string model = e->served_model_name();
  const bool base64 = r.base64;
  job->on_done = [model, base64, vllm_pooling](Pooling& p) {
    respond(p.req, 200, "application/json",
            openai::render_embeddings(openai::make_request_id(vllm_pooling ? "pool" : "embd"), openai::unix_time_now(),
                                      model, vllm_pooling ? "pooling" : "embedding", p.vectors, base64,
                                      p.prompt_tokens));
  };
  submit_all(ctx, job, r.inputs, params, r.truncate_prompt_tokens);
}

void handle_score(ServerContext& ctx, const restinio::request_handle_t& req) {
  engine::Engine* e = ctx.engine.load();
  openai::ScoreRequest r;
  if (auto err = openai::parse_score_request(req->body(), ctx.options.limits, &r)) return respond_error(req, *err);
  if (!check_model(*e, req, r.model)) return;
  // Embed text_1 then text_2 in one batch; score = cosine of each pair.
  std::vector<openai::Prompt> inputs;
  for (const auto& t : r.text_1) inputs.push_back(openai::Prompt{false, t, {}});
  for (const auto& t : r.text_2) inputs.push_back(openai::Prompt{false, t, {}});
  const size_t n1 = r.text_1.size(), n2 = r.text_2.size();
  auto job = std::make_shared<Pooling>();
  job->req = req;
  job->engine = e;
  const std::string model = e->served_model_name();
  job->on_done = [model, n1, n2](Pooling& p) {
    std::vector<double> scores;
    for (size_t j = 0; j < n2; ++j) scores.push_back(cosine(p.vectors[n1 == 1 ? 0 : j], p.vectors[n1 + j]));
    respond(p.req, 200, "application/json",
            openai::render_scores(openai::make_request_id("score"), openai::unix_time_now(), model, scores,
                                  p.prompt_tokens));
  };
  submit_all(ctx, job, inputs, engine::PoolingParams{}, r.truncate_prompt_tokens);
}

void handle_rerank(ServerContext& ctx, const restinio::request_handle_t& req) {
  engine::Engine* e = ctx.engine.load();
  openai::RerankRequest r;
  if (auto err = openai::parse_rerank_request(req->body(), ctx.options.limits, &r)) return respond_error(req, *err);
  if (!check_model(*e, req, r.model)) return;
  // A bi-encoder: the query and every document embedded in one batch; relevance = cosine.
  std::vector<openai::Prompt> inputs;
  inputs.push_back(openai::Prompt{false, r.query, {}});
  for (const auto& d : r.documents) inputs.push_back(openai::Prompt{false, d, {}});
  auto job = std::make_shared<Pooling>();
  job->req = req;
  job->engine = e;
  const std::string model = e->served_model_name();
  const size_t top_n = r.top_n > 0 ? static_cast<size_t>(r.top_n) : r.documents.size();
  std::vector<std::string> documents = r.return_documents ? std::move(r.documents) : std::vector<std::string>{};
  job->on_done = [model, top_n, documents = std::move(documents)](Pooling& p) {
    std::vector<openai::RerankResult> results;
    for (size_t i = 1; i < p.vectors.size(); ++i) results.push_back({i - 1, cosine(p.vectors[0], p.vectors[i])});
    std::stable_sort(results.begin(), results.end(),
                     [](const auto& a, const auto& b) { return a.relevance_score > b.relevance_score; });
    if (results.size() > top_n) results.resize(top_n);
    respond(p.req, 200, "application/json",
            openai::render_rerank(openai::make_request_id("rerank"), model, results, documents, p.prompt_tokens));
  };
  submit_all(ctx, job, inputs, engine::PoolingParams{}, r.truncate_prompt_tokens);
}

}  // namespace troupe::apps::serve
