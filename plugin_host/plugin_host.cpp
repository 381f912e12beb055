#include "plugin_host/plugin_host.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "plugin_host/loader.hpp"
#include "plugin_host/manifest.hpp"
#include "troupe/custom_op.hpp"
#include "troupe/log.hpp"
#include "troupe/plugin.hpp"

namespace troupe::plugin_host {
namespace fs = std::filesystem;

const char* to_string(PluginStatus s) {
  switch (s) {
    case PluginStatus::loaded: return "loaded";
    case PluginStatus::filtered: return "filtered";
    case PluginStatus::failed: return "failed";
    case PluginStatus::refused: return "refused";
  }
  return "unknown";
}

namespace {

constexpr const char* kGroups[] = {kGroupGeneral, kGroupPlatform, kGroupIOProcessor, kGroupStatLogger};

// General plugins register once per process, whichever host loads them
// (vLLM's plugins_loaded flag). Keyed by the library's canonical path.
std::mutex& registered_mutex() {
  static std::mutex mu;
  return mu;
}
std::set<std::string>& registered_libraries() {
  static std::set<std::string> s;
  return s;
}

std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  auto p = fs::canonical(path, ec);
  return ec ? path : p.string();
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Every call into plugin code goes through here: an exception becomes a reason.
template <class F>
bool guarded(F&& f, const std::string& what, std::string* error) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    *error = what + " threw: " + e.what();
  } catch (...) {
    *error = what + " threw a non-standard exception";
  }
  return false;
}

Status run_register_once(const PluginRecord& rec, const PluginDescriptor& d) {
  std::lock_guard lock(registered_mutex());
  const std::string key = canonical_or_same(rec.library);
  if (registered_libraries().count(key)) {
    TROUPE_LOG_DEBUG("plugin {} already registered in this process", rec.name);
    return {};
  }
  Status st;
  std::string error;
  if (!guarded([&] { st = d.register_fn(); }, "register()", &error)) return internal_error(error);
  if (!st.ok()) return Status(st.code(), "register() failed: " + st.to_string());
  registered_libraries().insert(key);
  return {};
}

}  // namespace

struct PluginHost::Impl {
  HostOptions options;
  mutable std::mutex mu;
  bool loaded = false;
  std::vector<PluginRecord> records;
  std::vector<const PluginDescriptor*> descriptors;  // parallel to records; null unless loaded

  bool platform_resolved = false;
  std::vector<PlatformCandidate> candidates;
  std::vector<std::unique_ptr<Platform>> platforms;  // every platform a probe returned
  Platform* active = nullptr;
  std::optional<std::string> active_name;
  Status platform_status;

  bool is_builtin_dir(const std::string& dir) const {
    const std::string c = canonical_or_same(dir);
    return std::any_of(options.builtin_dirs.begin(), options.builtin_dirs.end(),
                       [&](const std::string& b) { return canonical_or_same(b) == c; });
  }
  bool allowed(const std::string& name) const {
    if (!options.allowed) return true;
    const auto& a = *options.allowed;
    return std::find(a.begin(), a.end(), name) != a.end();
  }

  void discover();
  void log_discovered() const;
  void load_one(size_t i);
  void resolve_platform();
};

void PluginHost::Impl::discover() {
  std::map<std::string, std::string> seen;  // name -> manifest that provided it first
  std::set<std::string> searched;           // a directory listed twice is searched once
  for (const auto& dir : options.plugin_dirs) {
    if (!searched.insert(canonical_or_same(dir)).second) continue;
    Status why;
    auto manifests = list_manifests(dir, &why);
    const bool builtin = is_builtin_dir(dir);
    if (!why.ok()) {
      TROUPE_LOG_WARNING("{} (skipped{})", why.message(), builtin ? ", built-in plugin directory" : "");
      continue;
    }
    for (const auto& path : manifests) {
      Manifest m;
      Status st = parse_manifest(path, &m);
      PluginRecord rec;
      rec.name = m.name.empty() ? name_from_manifest_path(path) : m.name;
      rec.group = is_known_group(m.group) ? m.group : "";
      rec.library = m.library;
      rec.manifest = path;
      rec.builtin = builtin;
      if (!st.ok()) {
        rec.status = PluginStatus::failed;
        rec.reason = st.message();
      } else if (auto it = seen.find(rec.name); it != seen.end()) {
        rec.status = PluginStatus::failed;
        rec.reason = "another plugin named " + rec.name + " was found first (" + it->second + ")";
      } else {
        seen.emplace(rec.name, path);
        if (!builtin && !allowed(rec.name)) {
          rec.status = PluginStatus::filtered;
          rec.reason = "not named in TROUPE_PLUGINS (allowed: " +
                       (options.allowed->empty() ? std::string("none") : join(*options.allowed)) + ")";
        } else {
          rec.status = PluginStatus::failed;  // until load_one succeeds
        }
      }
      records.push_back(std::move(rec));
      descriptors.push_back(nullptr);
    }
  }
}

void PluginHost::Impl::log_discovered() const {
  for (const char* group : kGroups) {
    bool any = false;
    for (const auto& r : records) {
      if (r.group != group) continue;
      if (!any) TROUPE_LOG_INFO("Available plugins for group {}:", group);
      any = true;
      TROUPE_LOG_INFO("- {} -> {}", r.name, r.library.empty() ? r.manifest : r.library);
    }
    if (!any) TROUPE_LOG_DEBUG("No plugins for group {} found.", group);
  }
  if (!options.allowed) {
    TROUPE_LOG_INFO("All plugins will be loaded. Set TROUPE_PLUGINS to control which plugins to load.");
  } else {
    for (const auto& name : *options.allowed) {
      bool found = std::any_of(records.begin(), records.end(), [&](const PluginRecord& r) { return r.name == name; });
      if (!found)
        TROUPE_LOG_WARNING("plugin {} is named in TROUPE_PLUGINS but was not found in any plugin directory ({})",
                           name, join(options.plugin_dirs));
    }
  }
}

void PluginHost::Impl::load_one(size_t i) {
  PluginRecord& rec = records[i];
  Manifest m;
  Status st = parse_manifest(rec.manifest, &m);
  if (!st.ok()) {  // the file changed under us since discovery
    rec.reason = st.message();
    return;
  }
  LoadOutcome out = load_library(m);
  if (out.status == PluginStatus::loaded && rec.group == kGroupGeneral) {
    Status reg = run_register_once(rec, *out.descriptor);
    if (!reg.ok()) out = {PluginStatus::failed, reg.message(), nullptr};
  }
  rec.status = out.status;
  rec.reason = out.reason;
  descriptors[i] = out.descriptor;
  if (rec.status == PluginStatus::loaded) {
    TROUPE_LOG_INFO("plugin {} loaded.", rec.name);
  } else {
    TROUPE_LOG_ERROR("plugin {} {}: {}", rec.name, rec.status == PluginStatus::refused ? "refused" : "failed to load",
                     rec.reason);
  }
}

void PluginHost::Impl::resolve_platform() {
  platform_resolved = true;
  struct Available {
    std::string name;
    Platform* platform;
    size_t candidate;
  };
  std::vector<Available> oot, builtin;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& rec = records[i];
    if (rec.group != kGroupPlatform || rec.status != PluginStatus::loaded || !descriptors[i]) continue;
    PlatformCandidate c;
    c.name = rec.name;
    Platform* p = nullptr;
    std::string error;
    bool ok = guarded([&] { p = descriptors[i]->platform_probe(); }, "platform probe", &error);
    if (ok && p) {
      platforms.emplace_back(p);
      ok = guarded([&] {
        c.out_of_tree = p->is_out_of_tree();
        c.device_type = p->device_type();
      }, "platform identity", &error);
    }
    if (!ok) {
      c.reason = error;
      TROUPE_LOG_ERROR("platform plugin {}: {}", rec.name, error);
    } else if (!p) {
      c.reason = "probe returned no platform";
      TROUPE_LOG_DEBUG("platform plugin {}: {}", rec.name, c.reason);
    } else {
      c.available = true;
      (c.out_of_tree ? oot : builtin).push_back({rec.name, p, candidates.size()});
    }
    candidates.push_back(std::move(c));
  }

  auto names = [](const std::vector<Available>& v) {
    std::vector<std::string> n;
    for (const auto& a : v) n.push_back(a.name);
    return join(n);
  };
  const Available* winner = nullptr;
  if (oot.size() >= 2) {
    platform_status = invalid_argument("Only one out-of-tree platform plugin can be activated, but got: " + names(oot) +
                                       ". Use TROUPE_PLUGINS to choose one.");
  } else if (oot.size() == 1) {
    winner = &oot[0];
  } else if (builtin.size() >= 2) {
    // A real accelerator beats the CPU (vLLM: CUDA is chosen over CPU when both are present).
    std::vector<Available> accel;
    for (const auto& b : builtin)
      if (b.platform->platform_enum() != PlatformEnum::cpu) accel.push_back(b);
    if (accel.size() == 1) {
      winner = &*std::find_if(builtin.begin(), builtin.end(), [&](const Available& b) { return b.name == accel[0].name; });
    } else {
      platform_status = invalid_argument("Only one built-in platform can be activated, but got: " +
                                         names(accel.empty() ? builtin : accel));
    }
  } else if (builtin.size() == 1) {
    winner = &builtin[0];
  } else {
    std::string detail;
    for (const auto& c : candidates) detail += (detail.empty() ? "" : "; ") + c.name + ": " + c.reason;
    platform_status = not_found("no platform is available" +
                                (candidates.empty() ? std::string(": no platform plugin was loaded (plugin directories: " +
                                                                  join(options.plugin_dirs) + ")")
                                                    : " (" + detail + ")"));
  }

  if (!winner) {
    TROUPE_LOG_ERROR("{}", platform_status.message());
    return;
  }
  active = winner->platform;
  active_name = winner->name;
  for (auto& c : candidates)
    if (c.available && c.name != winner->name) c.reason = "available, but platform " + winner->name + " was activated";
  custom_op_registry::set_active_device_type(candidates[winner->candidate].device_type);
  if (!candidates[winner->candidate].out_of_tree)
    TROUPE_LOG_INFO("Automatically detected platform {}.", winner->name);
  TROUPE_LOG_INFO("Platform plugin {} is activated", winner->name);
}

PluginHost::PluginHost(HostOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
PluginHost::~PluginHost() = default;

PluginHost& PluginHost::instance() {
  // Leaked on purpose: platforms and loggers point into plugin libraries that
  // stay loaded, and static destruction order across libraries is unknowable.
  static PluginHost* host = new PluginHost(HostOptions::from_environment());
  return *host;
}

void PluginHost::load_all() {
  std::lock_guard lock(impl_->mu);
  if (impl_->loaded) return;
  impl_->loaded = true;
  impl_->discover();
  impl_->log_discovered();
  for (size_t i = 0; i < impl_->records.size(); ++i) {
    const auto& r = impl_->records[i];
    if (r.status == PluginStatus::filtered || !r.reason.empty()) continue;  // filtered or already failed
    impl_->load_one(i);
  }
}

Result<Platform*> PluginHost::activate_platform() {
  load_all();
  std::lock_guard lock(impl_->mu);
  if (!impl_->platform_resolved) impl_->resolve_platform();
  if (!impl_->active) return impl_->platform_status;
  return impl_->active;
}

const std::vector<PluginRecord>& PluginHost::records() const { return impl_->records; }
const std::vector<PlatformCandidate>& PluginHost::platform_candidates() const { return impl_->candidates; }
const HostOptions& PluginHost::options() const { return impl_->options; }

std::optional<std::string> PluginHost::activated_platform_name() const {
  std::lock_guard lock(impl_->mu);
  return impl_->active_name;
}

std::vector<std::unique_ptr<StatLogger>> PluginHost::make_stat_loggers(const EngineConfig& config, int engine_index) {
  load_all();
  std::vector<std::unique_ptr<StatLogger>> out;
  std::lock_guard lock(impl_->mu);
  for (size_t i = 0; i < impl_->records.size(); ++i) {
    const auto& rec = impl_->records[i];
    const PluginDescriptor* d = impl_->descriptors[i];
    if (rec.group != kGroupStatLogger || rec.status != PluginStatus::loaded || !d) continue;
    StatLogger* logger = nullptr;
    std::string error;
    if (!guarded([&] { logger = d->make_stat_logger(config, engine_index); }, "stat logger factory", &error)) {
      TROUPE_LOG_ERROR("stat logger plugin {}: {}", rec.name, error);
    } else if (!logger) {
      TROUPE_LOG_WARNING("stat logger plugin {} returned no logger", rec.name);
    } else {
      out.emplace_back(logger);
    }
  }
  return out;
}

Result<std::unique_ptr<IOProcessor>> PluginHost::make_io_processor(const std::string& name, const EngineConfig& config) {
  load_all();
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> available;
  for (size_t i = 0; i < impl_->records.size(); ++i) {
    const auto& rec = impl_->records[i];
    if (rec.group != kGroupIOProcessor) continue;
    if (rec.name != name) {
      if (rec.status == PluginStatus::loaded) available.push_back(rec.name);
      continue;
    }
    const PluginDescriptor* d = impl_->descriptors[i];
    if (rec.status != PluginStatus::loaded || !d)
      return unavailable("IO processor plugin " + name + " is " + to_string(rec.status) + ": " + rec.reason);
    IOProcessor* p = nullptr;
    std::string error;
    if (!guarded([&] { p = d->make_io_processor(config); }, "IO processor factory", &error))
      return internal_error("IO processor plugin " + name + ": " + error);
    if (!p) return internal_error("IO processor plugin " + name + " returned no processor");
    return std::unique_ptr<IOProcessor>(p);
  }
  return not_found("no IO processor plugin named " + name + " (loaded: " +
                   (available.empty() ? std::string("none") : join(available)) + ")");
}

}  // namespace troupe::plugin_host
