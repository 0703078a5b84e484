// Test helpers for the cluster controllers (scheduler, DaemonSet, Deployment):
// Nodes written like a kubelet writes them (labels, taints, allocatable and a
// Ready condition through the status subresource), and a stand-in kubelet
// that finishes the graceful deletion of pods (a real kubelet removes a
// deleted pod once its containers are gone) and, when asked, reports bound
// pods Running and Ready; a fixture that starts the API emulator, and
// status and pod-list checks the controller tests share. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/wait.h"

namespace gpuop::simcluster::testing {

using kube::Json;
namespace res = kube::resources;

struct NodeSpec {
  std::string name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> allocatable = {
      {"cpu", "16"}, {"memory", "64Gi"}, {"pods", "110"}};
  std::vector<kube::Taint> taints;
  bool ready = true;
  bool unschedulable = false;
};

inline Json NodeStatus(const NodeSpec& n) {
  Json alloc = Json::object();
  for (const auto& [k, v] : n.allocatable) alloc[k] = v;
  return {{"capacity", alloc},
          {"allocatable", alloc},
          {"conditions", Json::array({{{"type", "Ready"},
                                       {"status", n.ready ? "True" : "False"},
                                       {"reason", n.ready ? "KubeletReady" : "KubeletNotReady"},
                                       {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}};
}

inline void CreateNode(kube::Client& client, const NodeSpec& n) {
  Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", n.name}}}};
  Json labels = Json::object();
  for (const auto& [k, v] : n.labels) labels[k] = v;
  labels["kubernetes.io/hostname"] = n.name;
  node["metadata"]["labels"] = labels;
  Json taints = Json::array();
  for (const auto& t : n.taints) {
    taints.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
  }
  node["spec"] = {{"taints", taints}, {"unschedulable", n.unschedulable}};
  auto created = client.Create(res::kNodes, "", node);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Json with_status = *created;
  with_status["status"] = NodeStatus(n);
  auto updated = client.UpdateStatus(res::kNodes, with_status);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
}

// Sets (nullopt: removes) a node label.
inline void SetNodeLabel(kube::Client& client, const std::string& node, const std::string& key,
                         std::optional<std::string> value) {
  auto updated = kube::UpdateWithRetry(client, res::kNodes, "", node, [&](Json& n) {
    return kube::SetLabel(n, key, value ? std::optional<std::string_view>(*value) : std::nullopt);
  });
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
}

inline void SetAllocatable(kube::Client& client, const std::string& node, const std::string& name,
                           const std::string& value) {
  auto updated = kube::UpdateWithRetry(
      client, res::kNodes, "", node,
      [&](Json& n) {
        n["status"]["allocatable"][name] = value;
        n["status"]["capacity"][name] = value;
        return true;
      },
      /*status_subresource=*/true);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
}

// Running and Ready, as a kubelet reports a started pod.
inline Status MarkPodReady(kube::Client& client, const Json& pod, bool ready = true) {
  auto updated = kube::UpdateWithRetry(
      client, res::kPods, kube::Namespace(pod), kube::Name(pod),
      [&](Json& p) {
        const std::string now = kube::Rfc3339(std::chrono::system_clock::now());
        bool changed = false;
        if (kube::PodPhase(p) != "Running") {
          p["status"]["phase"] = "Running";
          changed = true;
        }
        const char* s = ready ? "True" : "False";
        changed |= kube::SetCondition(p, {"Ready", s, "", "", "", 0}, now);
        changed |= kube::SetCondition(p, {"ContainersReady", s, "", "", "", 0}, now);
        return changed;
      },
      /*status_subresource=*/true);
  return updated.ok() || kube::IsNotFound(updated.status()) ? Status::Ok() : updated.status();
}

inline Status SetPodPhase(kube::Client& client, const Json& pod, const std::string& phase) {
  auto updated = kube::UpdateWithRetry(
      client, res::kPods, kube::Namespace(pod), kube::Name(pod),
      [&](Json& p) {
        p["status"]["phase"] = phase;
        return true;
      },
      /*status_subresource=*/true);
  return updated.status();
}

// What a kubelet does that the controllers rely on: pods deleted gracefully
// are removed (grace 0), and with auto_ready, bound pods become Running and Ready.
class FakeKubelet {
 public:
  FakeKubelet(kube::Client& client, bool auto_ready) : client_(client), auto_ready_(auto_ready) {
    kube::InformerOptions o;
    o.resource = res::kPods;
    informer_ = std::make_unique<kube::Informer>(&client, o);
    kube::EventHandler h;
    h.on_add = [this](const kube::ObjectPtr& p) { Handle(*p); };
    h.on_update = [this](const kube::ObjectPtr&, const kube::ObjectPtr& p) { Handle(*p); };
    informer_->AddEventHandler(std::move(h));
    informer_->Start();
  }
  ~FakeKubelet() { informer_->Stop(); }

  void set_auto_ready(bool v) { auto_ready_ = v; }

 private:
  void Handle(const Json& pod) {
    if (kube::IsBeingDeleted(pod)) {
      kube::DeleteOptions d;
      d.grace_period_seconds = 0;
      d.precondition_uid = kube::Uid(pod);
      (void)client_.Delete(res::kPods, kube::Namespace(pod), kube::Name(pod), d);
      return;
    }
    if (auto_ready_ && !kube::PodNodeName(pod).empty() && !kube::IsPodTerminal(pod) &&
        !kube::IsPodReady(pod)) {
      (void)MarkPodReady(client_, pod);
    }
  }

  kube::Client& client_;
  std::atomic<bool> auto_ready_;
  std::unique_ptr<kube::Informer> informer_;
};

inline std::vector<Json> ListPods(kube::Client& client, const std::string& ns,
                                  const std::string& selector = "") {
  kube::ListOptions lo;
  lo.label_selector = selector;
  auto list = client.List(res::kPods, ns, lo);
  if (!list.ok()) return {};
  return list->items;
}

// Live pods (not being deleted) matching `selector`.
inline std::vector<Json> LivePods(kube::Client& client, const std::string& ns,
                                  const std::string& selector) {
  std::vector<Json> out;
  for (auto& p : ListPods(client, ns, selector)) {
    if (!kube::IsBeingDeleted(p)) out.push_back(std::move(p));
  }
  return out;
}

// Whether every field of `want` equals the same field of obj's status.
inline bool StatusHas(const Json& obj, const Json& want) {
  Json status = obj.value("status", Json::object());
  for (const auto& [k, v] : want.items()) {
    if (status.value(k, Json()) != v) return false;
  }
  return true;
}

// A test against a fresh API emulator; subclasses call EmulatorTest::SetUp()
// first and return if it failed.
class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = ::gpuop::testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
  }
  kube::Client& client() { return *api_.client; }

  ::gpuop::testing::ApiEmulator api_;
};

}  // namespace gpuop::simcluster::testing
