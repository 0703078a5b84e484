// Every container the operator renders holds the privileges docs/security.md
// lists for it, no more and no fewer: a rendered pod that gains a privilege
// (privileged, a host namespace, a capability, root, a writable root
// filesystem, privilege escalation, no seccomp profile, a host path written)
// fails here until the table, and so its review, says so.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/strings.h"
#include "base/yaml_json.h"
#include "operator/render.h"

namespace gpuop::op {
namespace {

const std::string kSecurityDoc = std::string(GPUOP_SOURCE_DIR) + "/docs/security.md";
const std::string kTableMarker =
    "<!-- privileges table: tests/unit/operator/privileges_test.cc -->";

// The columns the test checks; the table's last column (NVIDIA's) is prose.
struct Privileges {
  std::string privileged, host_namespaces, capabilities, user, root_fs, escalation, seccomp,
      host_paths_written;
  bool operator==(const Privileges&) const = default;
};

std::string Describe(const Privileges& p) {
  return "privileged=" + p.privileged + " | host namespaces=" + p.host_namespaces +
         " | capabilities=" + p.capabilities + " | user=" + p.user + " | root fs=" + p.root_fs +
         " | escalation=" + p.escalation + " | seccomp=" + p.seccomp +
         " | host paths written=" + p.host_paths_written;
}

std::string OrDash(const std::vector<std::string>& items) {
  return items.empty() ? "—" : Join(items, ", ");
}

// What one container of a pod template may do, in the table's words.
Privileges Of(const Json& pod, const Json& container) {
  const Json& sc = container.contains("securityContext") ? container["securityContext"] : Json();
  const Json& psc = pod.contains("securityContext") ? pod["securityContext"] : Json();
  auto field = [&](const char* key) -> Json {
    if (sc.is_object() && sc.contains(key)) return sc[key];
    if (psc.is_object() && psc.contains(key)) return psc[key];
    return Json();
  };
  Privileges p;
  const bool privileged = field("privileged") == true;
  p.privileged = privileged ? "yes" : "no";

  std::vector<std::string> ns;
  if (pod.value("hostPID", false)) ns.push_back("PID");
  if (pod.value("hostNetwork", false)) ns.push_back("network");
  if (pod.value("hostIPC", false)) ns.push_back("IPC");
  p.host_namespaces = OrDash(ns);

  const Json caps = field("capabilities");
  if (privileged) {
    p.capabilities = "all";
  } else if (!caps.is_object()) {
    p.capabilities = "runtime default";
  } else {
    std::vector<std::string> add;
    for (const Json& c : caps.value("add", Json::array())) add.push_back(c.get<std::string>());
    bool drop_all = false;
    for (const Json& c : caps.value("drop", Json::array())) drop_all |= c == "ALL";
    p.capabilities = drop_all ? (add.empty() ? "none" : Join(add, ", ")) : "runtime default";
  }

  const Json uid = field("runAsUser");
  p.user = uid.is_number_integer() && uid.get<int64_t>() != 0 ? std::to_string(uid.get<int64_t>())
                                                              : "root";
  p.root_fs = field("readOnlyRootFilesystem") == true ? "read-only" : "writable";
  p.escalation = !privileged && field("allowPrivilegeEscalation") == false ? "no" : "yes";
  const Json seccomp = field("seccompProfile");
  p.seccomp = privileged            ? "unconfined"
              : seccomp.is_object() ? seccomp.value("type", "?")
                                    : "unset";

  // hostPath volumes this container mounts writable.
  std::map<std::string, std::string> host_paths;
  for (const Json& v : pod.value("volumes", Json::array())) {
    if (v.contains("hostPath")) host_paths[v["name"]] = v["hostPath"]["path"];
  }
  std::set<std::string> written;
  for (const Json& m : container.value("volumeMounts", Json::array())) {
    auto it = host_paths.find(m.value("name", ""));
    if (it != host_paths.end() && !m.value("readOnly", false)) written.insert(it->second);
  }
  p.host_paths_written = OrDash({written.begin(), written.end()});
  return p;
}

// "<DaemonSet> / <container>" (init containers: "<container> (init)") ->
// privileges, in the DaemonSets the operator renders for the Helm-default
// ClusterPolicy with every component on (`enable`), the opt-ins
// (dcgmExporter.hostPID, hostNetwork) left off.
void AddRendered(const std::vector<std::string>& enable, std::map<std::string, Privileges>& out) {
  Json owner = YamlToJson(
      YAML::LoadFile(std::string(GPUOP_SOURCE_DIR) + "/deploy/samples/clusterpolicy.yaml"));
  owner["metadata"]["uid"] = "5f1c2a3e-0d7b-4c8e-9a61-2b3c4d5e6f70";
  for (const std::string& key : enable) owner["spec"][key]["enabled"] = true;
  OperatorEnv env;
  env.gpuop_image = "ghcr.io/gpuop/gpuop:1.2.3";
  auto policy = ParsePolicy(owner, env);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  const RenderInput in{*policy, env, owner, {{"ubuntu", "22.04"}}, true};
  std::vector<RenderedObject> objects = RenderNodeDiscovery(in);
  for (Component c : kAllComponents) {
    if (!policy->Enabled(c)) continue;
    for (RenderedObject& r : RenderComponent(c, in)) objects.push_back(std::move(r));
  }
  for (const RenderedObject& r : objects) {
    if (r.object.value("kind", "") != "DaemonSet") continue;
    const std::string ds = r.object["metadata"]["name"];
    const Json& pod = r.object["spec"]["template"]["spec"];
    for (const char* list : {"initContainers", "containers"}) {
      for (const Json& c : pod.value(list, Json::array())) {
        std::string name = c["name"];
        if (std::string(list) == "initContainers") name += " (init)";
        out[ds + " / " + name] = Of(pod, c);
      }
    }
  }
}

std::map<std::string, Privileges> Rendered() {
  std::map<std::string, Privileges> out;
  // The device plugin and the DRA driver exclude each other.
  AddRendered({"driver", "migManager", "nodeStatusExporter"}, out);
  AddRendered({"driver", "draDriver"}, out);
  return out;
}

std::string Cell(std::string s) {
  s = std::string(Trim(s));
  // `code` in the doc reads as code; the test compares the words.
  s.erase(std::remove(s.begin(), s.end(), '`'), s.end());
  return s;
}

// The table under the marker in docs/security.md.
std::map<std::string, Privileges> Documented() {
  auto text = ReadFile(kSecurityDoc);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return {};
  std::map<std::string, Privileges> out;
  const size_t start = text->find(kTableMarker);
  EXPECT_NE(start, std::string::npos) << kSecurityDoc << " has no " << kTableMarker;
  if (start == std::string::npos) return out;
  int row = 0;
  for (const std::string& line : Split(text->substr(start + kTableMarker.size()), '\n', false)) {
    if (line.empty() && row == 0) continue;
    if (line.empty() || line[0] != '|') break;
    if (row++ < 2) continue;  // header and separator
    std::vector<std::string> cells = Split(line, '|', false);
    // "| a | b |" splits into "", a, b, "".
    EXPECT_EQ(cells.size(), 13u) << "a row of 11 columns: " << line;
    if (cells.size() != 13) continue;
    Privileges p{Cell(cells[3]), Cell(cells[4]), Cell(cells[5]), Cell(cells[6]),
                 Cell(cells[7]), Cell(cells[8]), Cell(cells[9]), Cell(cells[10])};
    out[Cell(cells[1]) + " / " + Cell(cells[2])] = p;
  }
  return out;
}

TEST(PrivilegesTest, EveryRenderedContainerHoldsWhatSecurityMdLists) {
  const std::map<std::string, Privileges> rendered = Rendered();
  const std::map<std::string, Privileges> documented = Documented();
  ASSERT_FALSE(rendered.empty());
  for (const auto& [container, got] : rendered) {
    auto it = documented.find(container);
    if (it == documented.end()) {
      ADD_FAILURE() << container << " is rendered but not in " << kSecurityDoc
                    << "'s privileges table; add its row: " << Describe(got);
      continue;
    }
    EXPECT_EQ(got, it->second) << container << " renders with\n  " << Describe(got) << "\nbut "
                               << kSecurityDoc << " lists\n  " << Describe(it->second);
  }
  for (const auto& [container, want] : documented) {
    EXPECT_TRUE(rendered.count(container))
        << kSecurityDoc << " lists " << container << ", which the operator does not render";
  }
}

// The checker itself: a container that gains a privilege no longer matches.
TEST(PrivilegesTest, GainingAPrivilegeChangesTheDescription) {
  Json pod{{"volumes", Json::array({Json{{"name", "v"}, {"hostPath", {{"path", "/etc"}}}}})}};
  Json c{{"name", "c"},
         {"securityContext",
          {{"allowPrivilegeEscalation", false},
           {"readOnlyRootFilesystem", true},
           {"runAsUser", 65532},
           {"capabilities", {{"drop", {"ALL"}}}},
           {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
         {"volumeMounts",
          Json::array({Json{{"name", "v"}, {"mountPath", "/x"}, {"readOnly", true}}})}};
  const Privileges base = Of(pod, c);
  EXPECT_EQ(
      Describe(base),
      "privileged=no | host namespaces=— | capabilities=none | user=65532 | root fs=read-only "
      "| escalation=no | seccomp=RuntimeDefault | host paths written=—");
  auto gains = [&](const std::function<void(Json&, Json&)>& change) {
    Json p2 = pod, c2 = c;
    change(p2, c2);
    return !(Of(p2, c2) == base);
  };
  EXPECT_TRUE(gains([](Json&, Json& x) { x["securityContext"]["privileged"] = true; }));
  EXPECT_TRUE(gains([](Json& p, Json&) { p["hostPID"] = true; }));
  EXPECT_TRUE(gains([](Json& p, Json&) { p["hostNetwork"] = true; }));
  EXPECT_TRUE(
      gains([](Json&, Json& x) { x["securityContext"]["capabilities"]["add"] = {"SYS_ADMIN"}; }));
  EXPECT_TRUE(gains([](Json&, Json& x) { x["securityContext"].erase("capabilities"); }));
  EXPECT_TRUE(gains([](Json&, Json& x) { x["securityContext"].erase("runAsUser"); }));
  EXPECT_TRUE(
      gains([](Json&, Json& x) { x["securityContext"]["readOnlyRootFilesystem"] = false; }));
  EXPECT_TRUE(
      gains([](Json&, Json& x) { x["securityContext"].erase("allowPrivilegeEscalation"); }));
  EXPECT_TRUE(gains([](Json&, Json& x) { x["securityContext"].erase("seccompProfile"); }));
  EXPECT_TRUE(gains([](Json&, Json& x) { x["volumeMounts"][0]["readOnly"] = false; }));
}

}  // namespace
}  // namespace gpuop::op
