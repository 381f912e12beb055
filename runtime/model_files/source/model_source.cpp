#include "runtime/model_files/source/model_source.hpp"

#include <filesystem>

#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/model_files/hf/hf_decoder_source.hpp"
#include "runtime/model_files/hf/hf_model_folder.hpp"
#include "runtime/model_files/source/finite_weights.hpp"

namespace troupe::engine {

Result<OpenedModel> open_model(const std::string& path) {
  OpenedModel m;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    auto folder = hf::HfModelFolder::open(path);
    if (!folder) return folder.status();
    std::shared_ptr<const hf::HfModelFolder> f(std::move(folder).value());
    for (const auto& shard : f->shards().files())
      TROUPE_RETURN_IF_ERROR(check_finite_weights(shard->tensors(), path));
    if (f->encoder()) {
      m.source = std::make_unique<hf::HfModelSource>(f);
    } else {
      auto decoder = hf::HfDecoderSource::create(f);
      if (!decoder) return decoder.status();
      m.source = std::move(decoder).value();
    }
    m.owner = f;
    m.folder = true;
    return m;
  }
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  std::shared_ptr<const gguf::GgufFile> g(std::move(file).value());
  TROUPE_RETURN_IF_ERROR(check_finite_weights(g->tensors(), path));
  m.source = std::make_unique<gguf::GgufModelSource>(g);
  m.owner = g;
  return m;
}

Result<OpenedModel> open_model(const ModelConfig& config) {
  if (config.load_format.empty() || config.load_format == "auto") return open_model(config.model_path);
  if (config.load_format != "dummy")
    return invalid_argument("unknown load format '" + config.load_format + "' (valid: auto, dummy)");
  auto spec = dummy::dummy_spec(config);
  if (!spec) return spec.status();
  auto file = dummy::open_dummy_model(*spec);
  if (!file) return file.status();
  OpenedModel m;
  m.source = std::make_unique<gguf::GgufModelSource>(*file);
  m.owner = *file;
  m.dummy = true;
  return m;
}

}  // namespace troupe::engine
