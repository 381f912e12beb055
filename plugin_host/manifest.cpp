#include "plugin_host/manifest.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "troupe/plugin.hpp"

namespace troupe::plugin_host {
namespace fs = std::filesystem;

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::vector<std::string> list_manifests(const std::string& dir, Status* why) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (why) *why = not_found("plugin directory " + dir + " does not exist");
    return out;
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (ends_with(file, kManifestSuffix) && !it->is_directory(ec)) out.push_back(fs::absolute(it->path()).string());
  }
  if (ec && why) *why = unavailable("cannot list plugin directory " + dir + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::string name_from_manifest_path(const std::string& path) {
  std::string file = fs::path(path).filename().string();
  const std::string suffix = kManifestSuffix;
  if (ends_with(file, suffix)) file.resize(file.size() - suffix.size());
  return file;
}

bool is_known_group(const std::string& group) {
  return group == kGroupGeneral || group == kGroupPlatform || group == kGroupIOProcessor ||
         group == kGroupStatLogger;
}

Status parse_manifest(const std::string& path, Manifest* out) {
  Manifest& m = *out;
  m.path = path;
  std::ifstream in(path);
  if (!in) return not_found("cannot read plugin manifest " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  // parse without exceptions: a broken manifest is data, not a crash.
  nlohmann::json j = nlohmann::json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return data_loss("malformed plugin manifest " + path + ": not valid JSON");
  if (!j.is_object()) return data_loss("malformed plugin manifest " + path + ": expected a JSON object");

  auto field = [&](const char* key, std::string* value, bool required) -> Status {
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) return data_loss("malformed plugin manifest " + path + ": missing field \"" + key + "\"");
      return {};
    }
    if (!it->is_string() || it->get_ref<const std::string&>().empty())
      return data_loss("malformed plugin manifest " + path + ": field \"" + key + "\" must be a non-empty string");
    *value = it->get<std::string>();
    return {};
  };
  TROUPE_RETURN_IF_ERROR(field("name", &m.name, true));
  TROUPE_RETURN_IF_ERROR(field("group", &m.group, true));
  TROUPE_RETURN_IF_ERROR(field("library", &m.library, true));
  m.symbol = TROUPE_PLUGIN_ENTRY_SYMBOL;
  TROUPE_RETURN_IF_ERROR(field("symbol", &m.symbol, false));
  if (!is_known_group(m.group))
    return data_loss("plugin manifest " + path + " names unknown group \"" + m.group + "\" (known: " +
                     kGroupGeneral + ", " + kGroupPlatform + ", " + kGroupIOProcessor + ", " + kGroupStatLogger + ")");
  fs::path lib(m.library);
  if (lib.is_relative()) lib = fs::path(path).parent_path() / lib;
  m.library = lib.lexically_normal().string();
  return {};
}

}  // namespace troupe::plugin_host
