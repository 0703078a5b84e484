#include "sim/cluster/cdi_view.h"

#include <filesystem>
#include <map>
#include <set>

#include "base/files.h"
#include "base/strings.h"
#include "base/yaml_json.h"

namespace gpuop::simcluster {

using Json = nlohmann::json;

namespace {

void TranslateEdits(Json& edits, const std::string& root) {
  if (!edits.is_object()) return;
  auto under = [&](const std::string& p) { return StartsWith(p, "/") ? root + p : p; };
  if (edits.contains("deviceNodes") && edits["deviceNodes"].is_array()) {
    for (Json& d : edits["deviceNodes"]) {
      std::string host = d.value("hostPath", d.value("path", ""));
      if (!host.empty()) d["hostPath"] = under(host);
    }
  }
  if (edits.contains("mounts") && edits["mounts"].is_array()) {
    for (Json& m : edits["mounts"]) {
      if (m.contains("hostPath") && m["hostPath"].is_string()) m["hostPath"] = under(m["hostPath"]);
    }
  }
  if (edits.contains("hooks") && edits["hooks"].is_array()) {
    for (Json& h : edits["hooks"]) {
      if (h.contains("path") && h["path"].is_string()) h["path"] = under(h["path"]);
    }
  }
}

}  // namespace

Json TranslateCdiSpec(const Json& spec, const std::string& root) {
  Json out = spec;
  if (out.contains("containerEdits")) TranslateEdits(out["containerEdits"], root);
  if (out.contains("devices") && out["devices"].is_array()) {
    for (Json& d : out["devices"]) {
      if (d.contains("containerEdits")) TranslateEdits(d["containerEdits"], root);
    }
  }
  return out;
}

Status SyncCdiView(const std::string& root, const std::string& view_dir) {
  GPUOP_RETURN_IF_ERROR(MakeDirs(view_dir));
  std::map<std::string, std::string> wanted;  // view file name -> content
  std::vector<std::string> bad;
  for (const char* dir : {"/etc/cdi", "/var/run/cdi"}) {
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(root + dir, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      const auto& path = it->path();
      std::string ext = path.extension().string();
      if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
      auto text = ReadFile(path.string());
      if (!text.ok()) continue;
      auto docs = ParseYamlDocuments(*text);  // JSON is YAML
      if (!docs.ok() || docs->size() != 1 || !docs->front().is_object()) {
        bad.push_back(path.string());
        continue;
      }
      wanted[path.stem().string() + ".json"] = TranslateCdiSpec(docs->front(), root).dump(1) + "\n";
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(view_dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (!wanted.count(it->path().filename().string())) std::filesystem::remove(it->path(), ec);
  }
  for (const auto& [name, content] : wanted) {
    auto old = ReadFile(view_dir + "/" + name);
    if (old.ok() && *old == content) continue;
    GPUOP_RETURN_IF_ERROR(WriteFileAtomic(view_dir + "/" + name, content));
  }
  if (!bad.empty()) return InvalidArgument("CDI specs that do not parse: " + Join(bad, ", "));
  return Status::Ok();
}

}  // namespace gpuop::simcluster
