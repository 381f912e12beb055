// ModelRegistry: architecture name -> factory. One per process (it lives in
// libtroupe_sdk), filled by troupe's built-in models and by general plugins.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe {

using ModelFactory = Result<std::unique_ptr<Model>> (*)(const ModelSource& source, const ModelContext& context);

namespace model_registry {
/// Register `factory` for `architecture`; logs a warning when it replaces another factory.
/// Registering the same factory again is a no-op (so plugin registration can be re-run).
void register_model(std::string_view architecture, ModelFactory factory);
/// Sorted names of every registered architecture.
std::vector<std::string> supported_architectures();
bool is_registered(std::string_view architecture);
/// Build a model of `architecture`; not_found names the registered ones.
Result<std::unique_ptr<Model>> create(std::string_view architecture, const ModelSource& source,
                                      const ModelContext& context);
}  // namespace model_registry

}  // namespace troupe
