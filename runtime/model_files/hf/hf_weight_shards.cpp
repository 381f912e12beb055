#include "runtime/model_files/hf/hf_weight_shards.hpp"

#include <sys/stat.h>

#include <set>

#include "runtime/text/json/json_io.hpp"

namespace troupe::hf {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

Result<std::unique_ptr<HfWeightShards>> HfWeightShards::open(const std::string& dir) {
  std::unique_ptr<HfWeightShards> w(new HfWeightShards());
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (exists(single) || !exists(index)) {
    if (!exists(single) && exists(dir + "/pytorch_model.bin"))
      return not_supported(dir + "/pytorch_model.bin: PyTorch pickles are not read; convert the model to safetensors");
    auto file = safetensors::SafetensorsFile::open(single);
    if (!file.ok()) return file.status();
    std::shared_ptr<const safetensors::SafetensorsFile> f(std::move(*file));
    for (const auto& e : f->entries()) w->by_name_.emplace(e.name, f.get());
    w->files_.push_back(std::move(f));
    return w;
  }
  auto doc = json_io::read_file(index, uint64_t{64} << 20);
  if (!doc.ok()) return doc.status();
  const auto map = doc->is_object() ? doc->find("weight_map") : doc->end();
  if (!doc->is_object() || map == doc->end() || !map->is_object() || map->empty())
    return data_loss(index + ": no \"weight_map\" object naming each tensor's shard");
  std::map<std::string, std::shared_ptr<const safetensors::SafetensorsFile>> shards;
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string())
      return data_loss(index + ": the shard of tensor '" + json_io::printable(name) + "' is not a string");
    const std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      return data_loss(index + ": shard '" + json_io::printable(s) + "' of tensor '" + json_io::printable(name) +
                       "' is not a file name in the folder");
    auto it = shards.find(s);
    if (it == shards.end()) {
      if (!exists(dir + "/" + s))
        return not_found(dir + "/" + s + ": missing shard (named by model.safetensors.index.json for tensor '" +
                         json_io::printable(name) + "')");
      auto file = safetensors::SafetensorsFile::open(dir + "/" + s);
      if (!file.ok()) return file.status();
      it = shards.emplace(s, std::shared_ptr<const safetensors::SafetensorsFile>(std::move(*file))).first;
      w->files_.push_back(it->second);
    }
    if (it->second->entry(name) == nullptr)
      return data_loss(index + ": tensor '" + json_io::printable(name) + "' is listed in shard " + s +
                       ", which does not hold it");
    w->by_name_.emplace(name, it->second.get());
  }
  // Tensors a shard holds but the index does not list are still found (transformers reads
  // the shards' own headers too); one name in two shards is ambiguous.
  for (const auto& f : w->files_)
    for (const auto& e : f->entries()) {
      auto [it, fresh] = w->by_name_.emplace(e.name, f.get());
      if (!fresh && it->second != f.get() && !map->contains(e.name))
        return data_loss(index + ": tensor '" + json_io::printable(e.name) + "' is in two shards (" +
                         it->second->name() + " and " + f->name() + ")");
    }
  return w;
}

const WeightTensor* HfWeightShards::tensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second->tensor(name);
}

const safetensors::TensorEntry* HfWeightShards::entry(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second->entry(name);
}

std::vector<const WeightTensor*> HfWeightShards::tensors() const {
  std::vector<const WeightTensor*> out;
  for (const auto& f : files_)
    for (const WeightTensor& t : f->tensors()) out.push_back(&t);
  return out;
}

uint64_t HfWeightShards::mapped_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_) n += f->file_size();
  return n;
}

}  // namespace troupe::hf
