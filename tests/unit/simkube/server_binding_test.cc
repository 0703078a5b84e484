// pods/binding through the API emulator's HTTP front end: the binding sets
// spec.nodeName and PodScheduled=True in one write, as kube-apiserver's
// binding registry does, so no reader (a scheduler test, a kubelet's
// informer) ever sees a pod bound but not scheduled; a bound pod is 409.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/kube/server.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

TEST(ServerBindingTest, NodeNameAndPodScheduledInOneWrite) {
  ServerOptions o;
  o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  auto server = ApiServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client c((*server)->host(), (*server)->port());
  auto post = [&](const std::string& path, const Json& body) {
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    return r ? std::make_pair(r->status, Json::parse(r->body, nullptr, false))
             : std::make_pair(0, Json());
  };
  const std::string pods = "/api/v1/namespaces/default/pods";
  auto created = post(pods, {{"metadata", {{"name", "p"}}},
                             {"spec", {{"containers", {{{"name", "c"}, {"image", "i"}}}}}}});
  ASSERT_EQ(created.first, 201) << created.second.dump();
  // The scheduler said no once.
  Json with_status = created.second;
  with_status["status"]["conditions"] = {{{"type", "PodScheduled"},
                                          {"status", "False"},
                                          {"reason", "Unschedulable"},
                                          {"message", "0/1 nodes are available"}}};
  auto put = c.Put((pods + "/p/status").c_str(), with_status.dump(), "application/json");
  ASSERT_TRUE(put && put->status == 200) << (put ? put->body : "no answer");
  const int64_t before =
      std::stoll(Json::parse(put->body)["metadata"]["resourceVersion"].get<std::string>());

  auto bound = post(pods + "/p/binding",
                    {{"metadata", {{"name", "p"}}}, {"target", {{"kind", "Node"}, {"name", "n1"}}}});
  ASSERT_EQ(bound.first, 201) << bound.second.dump();
  auto got = c.Get((pods + "/p").c_str());
  ASSERT_TRUE(got && got->status == 200);
  Json pod = Json::parse(got->body);
  EXPECT_EQ(pod["spec"]["nodeName"], "n1");
  ASSERT_EQ(pod["status"]["conditions"].size(), 1u) << pod["status"].dump();
  EXPECT_EQ(pod["status"]["conditions"][0]["type"], "PodScheduled");
  EXPECT_EQ(pod["status"]["conditions"][0]["status"], "True");
  EXPECT_EQ(std::stoll(pod["metadata"]["resourceVersion"].get<std::string>()), before + 1)
      << "the binding took more than one write";

  auto again = post(pods + "/p/binding",
                    {{"metadata", {{"name", "p"}}}, {"target", {{"kind", "Node"}, {"name", "n2"}}}});
  EXPECT_EQ(again.first, 409);
}

}  // namespace
}  // namespace gpuop::simkube
