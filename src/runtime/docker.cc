#include "runtime/docker.h"

#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace gpuop::runtime {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kRestartNote =
    "reload docker to apply: systemctl reload docker (SIGHUP reloads runtimes and "
    "default-runtime); features.cdi takes effect only after systemctl restart docker";

Result<Json> ParseDaemonJson(std::string_view path, std::string_view text) {
  if (Trim(text).empty()) return Json::object();
  // nlohmann's parser stops at a NUL as at the end, and the bytes after it
  // (kept in the record) need not be UTF-8 that the record can hold.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument(JsonErrorAt(path, text, nul + 1, "a NUL byte") +
                           " (fix the file; nothing was written)");
  }
  try {
    Json j = Json::parse(text);
    if (!j.is_object()) {
      return InvalidArgument(std::string(path) + ": the top level is not a JSON object");
    }
    return j;
  } catch (const Json::parse_error& e) {
    return InvalidArgument(JsonErrorAt(path, text, e.byte, e.what()) +
                           " (fix the file; nothing was written)");
  } catch (const Json::out_of_range& e) {  // a number past a double's range
    return InvalidArgument(std::string(path) + ": " + e.what() +
                           " (fix the file; nothing was written)");
  }
}

std::string Dump(const Json& j) { return j.dump(2) + "\n"; }

// The record: what daemon.json was before gpuop, what gpuop wrote, and the
// values of the keys gpuop set (null: the key was absent).
struct DaemonJsonRecord {
  std::optional<std::string> original;
  std::string written;
  bool added_runtime = false;
  bool set_default = false;
  Json default_before;  // null: absent
  bool set_cdi = false;
  Json cdi_before;  // null: absent
};

std::string DaemonJsonRecordText(const DaemonJsonRecord& r) {
  Json j;
  j["original"] = r.original ? Json(*r.original) : Json();
  j["written"] = r.written;
  j["added_runtime"] = r.added_runtime;
  j["set_default"] = r.set_default;
  j["default_before"] = r.default_before;
  j["set_cdi"] = r.set_cdi;
  j["cdi_before"] = r.cdi_before;
  return Dump(j);
}

std::optional<DaemonJsonRecord> ReadDaemonJsonRecord(std::string_view text) {
  try {
    Json j = Json::parse(text);
    DaemonJsonRecord r;
    if (j.at("original").is_string()) r.original = j["original"].get<std::string>();
    r.written = j.at("written").get<std::string>();
    r.added_runtime = j.value("added_runtime", false);
    r.set_default = j.value("set_default", false);
    r.default_before = j.value("default_before", Json());
    r.set_cdi = j.value("set_cdi", false);
    r.cdi_before = j.value("cdi_before", Json());
    return r;
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

Json Member(const Json& j, std::string_view key) {
  auto it = j.find(key);
  return it == j.end() ? Json() : *it;
}

Json Member(const Json& j, std::string_view a, std::string_view b) {
  auto it = j.find(a);
  return it == j.end() || !it->is_object() ? Json() : Member(*it, b);
}

Result<Plan> Configure(const DockerInputs& in, const ConfigureOptions& opts,
                       const std::string& record_path) {
  GPUOP_ASSIGN_OR_RETURN(Json j, ParseDaemonJson(in.config_path, in.config.value_or("")));
  std::optional<DaemonJsonRecord> old = in.record ? ReadDaemonJsonRecord(*in.record) : std::nullopt;
  if (in.record && !old) {
    return FailedPrecondition(record_path +
                              " is not a record gpuop can read; move it away, "
                              "then run gpuop runtime configure again");
  }

  DaemonJsonRecord r;
  r.original = old ? old->original : in.config;
  bool had_runtime = j.contains("runtimes") && j["runtimes"].is_object() &&
                     j["runtimes"].contains(opts.runtime_name);
  r.added_runtime = old ? old->added_runtime : !had_runtime;
  r.set_default = (old && old->set_default) || opts.set_as_default;
  r.default_before = old && old->set_default ? old->default_before : Member(j, "default-runtime");
  r.set_cdi = (old && old->set_cdi) || opts.cdi_enabled;
  r.cdi_before = old && old->set_cdi ? old->cdi_before : Member(j, "features", "cdi");

  if (j.contains("runtimes") && !j["runtimes"].is_object()) {
    return InvalidArgument(in.config_path + ": `runtimes` is not an object");
  }
  if (j.contains("features") && !j["features"].is_object()) {
    return InvalidArgument(in.config_path + ": `features` is not an object");
  }
  Json next = j;
  std::string runc = in.runc_path.empty() ? "runc" : in.runc_path;
  next["runtimes"][opts.runtime_name] = Json{{"path", runc}};
  if (opts.set_as_default) next["default-runtime"] = opts.runtime_name;
  if (opts.cdi_enabled) next["features"]["cdi"] = true;

  Plan plan;
  plan.notes.push_back("configured docker runtime '" + opts.runtime_name +
                       "' (RuntimeClass handler: " + opts.runtime_name + ")");
  if (next == j && in.config && old) {
    plan.notes.push_back("nothing to change: " + in.config_path + " is up to date");
    return plan;
  }
  std::string text = next == j && in.config ? *in.config : Dump(next);
  r.written = text;
  std::string record = DaemonJsonRecordText(r);
  // Validate before anything is written.
  GPUOP_RETURN_IF_ERROR(ParseDaemonJson(in.config_path, text).status());
  if (!ReadDaemonJsonRecord(record))
    return Internal("the record for " + in.config_path + " is unreadable");

  // The record first: a daemon.json changed by gpuop always has one.
  if (in.record != record) plan.changes.push_back({record_path, in.record, record});
  if (in.config != text) plan.changes.push_back({in.config_path, in.config, text});
  if (in.runc_path.empty()) {
    plan.notes.push_back(
        "runc was not found on the host; the runtime path is \"runc\" "
        "(looked up on dockerd's PATH)");
  }
  plan.notes.push_back(std::string(kRestartNote));
  return plan;
}

Result<Plan> Revert(const DockerInputs& in, const ConfigureOptions& opts,
                    const std::string& record_path) {
  Plan plan;
  std::optional<DaemonJsonRecord> r = in.record ? ReadDaemonJsonRecord(*in.record) : std::nullopt;
  if (in.record && !r) {
    return FailedPrecondition(record_path + " is not a record gpuop can read; nothing was changed");
  }
  if (!r) {
    if (in.config) {
      GPUOP_ASSIGN_OR_RETURN(Json j, ParseDaemonJson(in.config_path, *in.config));
      if (Member(j, "default-runtime") == Json(opts.runtime_name)) {
        plan.notes.push_back("warning: " + in.config_path + " sets default-runtime \"" +
                             opts.runtime_name + "\", not written by gpuop; left as it is");
      }
    }
    plan.notes.push_back("nothing to revert: gpuop has not configured docker at " + in.config_path);
    return plan;
  }

  if (in.config && *in.config == r->written) {
    // Unchanged since gpuop wrote it: the original bytes come back.
    plan.changes.push_back({in.config_path, in.config, r->original});
  } else if (in.config) {
    GPUOP_ASSIGN_OR_RETURN(Json j, ParseDaemonJson(in.config_path, *in.config));
    Json next = j;
    if (r->added_runtime && next.contains("runtimes") && next["runtimes"].is_object()) {
      next["runtimes"].erase(opts.runtime_name);
      if (next["runtimes"].empty()) next.erase("runtimes");
    }
    if (r->set_default && Member(next, "default-runtime") == Json(opts.runtime_name)) {
      if (r->default_before.is_null()) {
        next.erase("default-runtime");
      } else {
        next["default-runtime"] = r->default_before;
      }
    }
    if (r->set_cdi && next.contains("features") && next["features"].is_object()) {
      if (r->cdi_before.is_null()) {
        next["features"].erase("cdi");
        if (next["features"].empty()) next.erase("features");
      } else {
        next["features"]["cdi"] = r->cdi_before;
      }
    }
    // dockerd does not start with a default-runtime it does not know.
    bool runtime_left = next.contains("runtimes") && next["runtimes"].is_object() &&
                        next["runtimes"].contains(opts.runtime_name);
    if (Member(next, "default-runtime") == Json(opts.runtime_name) && !runtime_left) {
      next.erase("default-runtime");
    }
    if (next != j) plan.changes.push_back({in.config_path, in.config, Dump(next)});
    plan.notes.push_back(in.config_path +
                         " changed since gpuop wrote it: removed only gpuop's "
                         "keys");
  }
  plan.changes.push_back({record_path, in.record, std::nullopt});
  plan.notes.push_back("removed docker runtime '" + opts.runtime_name + "'");
  plan.notes.push_back(std::string(kRestartNote));
  return plan;
}

}  // namespace

std::string JsonErrorAt(std::string_view path, std::string_view text, size_t byte,
                        std::string_view message) {
  size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::string(path) + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " +
         std::string(message);
}

Result<Plan> PlanDocker(const DockerInputs& in, const ConfigureOptions& opts) {
  if (!ValidRuntimeName(opts.runtime_name)) {
    return InvalidArgument("runtime name '" + opts.runtime_name +
                           "' is not a valid runtime name (letters, digits, '-', '_', '.')");
  }
  std::string record_path = in.config_path + std::string(kDockerRecordSuffix);
  return opts.revert ? Revert(in, opts, record_path) : Configure(in, opts, record_path);
}

}  // namespace gpuop::runtime
