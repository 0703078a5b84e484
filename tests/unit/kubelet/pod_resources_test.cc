// The pod-resources client (ListPodResources, GetPodResources,
// GetAllocatableDevices) against FakePodResources: every call crosses a real
// unix socket with real gRPC.
#include "kubelet/pod_resources.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "kubelet_test_util.h"
#include "podresources/v1/api.grpc.pb.h"
#include "sim/kubelet/fake_pod_resources.h"

namespace gpuop::kubelet {
namespace {

using sim::FakePodResources;
using std::chrono_literals::operator""s;
using std::chrono_literals::operator""ms;
using testing::ShortTempDir;

const std::string kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";
const std::string kGpu1 = "GPU-11111111-1111-1111-1111-111111111111";
const std::string kGpu2 = "GPU-22222222-2222-2222-2222-222222222222";
const std::string kMig0 = "MIG-aaaaaaaa-0000-0000-0000-000000000000";
const std::string kMig1 = "MIG-bbbbbbbb-1111-1111-1111-111111111111";

bool IsSocket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::unique_ptr<FakePodResources> StartFake(const ShortTempDir& dir) {
  auto fake = FakePodResources::Start(PodResourcesSocket(dir.path()));
  EXPECT_TRUE(fake.ok()) << fake.status().ToString();
  return fake.ok() ? std::move(*fake) : nullptr;
}

// A node with whole GPUs, MIG devices and time-sliced replicas, in the order
// the kubelet would list them.
std::vector<ContainerDevices> MixedNode() {
  return {
      {"train-0", "ml", "trainer", "nvidia.com/gpu", {kGpu0, kGpu1}},
      {"train-0", "ml", "trainer", "nvidia.com/mig-1g.10gb", {kMig0}},
      {"train-0", "ml", "logger", "nvidia.com/mig-3g.40gb", {kMig1}},
      {"notebook", "team-a", "jupyter", "nvidia.com/gpu", {kGpu2 + "::0"}},
      {"notebook-2", "team-b", "jupyter", "nvidia.com/gpu", {kGpu2 + "::3", kGpu2 + "::1"}},
  };
}

TEST(KubeletPodResources, SocketPathUnderKubeletDir) {
  EXPECT_EQ(PodResourcesSocket("/var/lib/kubelet"), "/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_EQ(PodResourcesSocket("/host/var/lib/kubelet/"),
            "/host/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_EQ(PodResourcesSocket("/"), "/pod-resources/kubelet.sock");
}

TEST(KubeletPodResources, ListRoundTripsPodsContainersAndResources) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  EXPECT_TRUE(IsSocket(dir / "pod-resources/kubelet.sock"));
  fake->SetAssignments(MixedNode());

  auto listed = ListPodResources(fake->socket_path(), 5s);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, MixedNode());
  EXPECT_EQ(fake->ListCalls(), 1u);

  fake->SetAssignments({});
  listed = ListPodResources(fake->socket_path(), 5s);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_TRUE(listed->empty());
  EXPECT_EQ(fake->ListCalls(), 2u);
}

TEST(KubeletPodResources, ListGroupsByPodAndContainerLikeTheKubelet) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  // Interleaved: the fake groups per pod, then per container.
  fake->SetAssignments({
      {"a", "ns", "c1", "nvidia.com/gpu", {kGpu0}},
      {"b", "ns", "c1", "nvidia.com/gpu", {kGpu1}},
      {"a", "ns", "c2", "nvidia.com/gpu", {kGpu2}},
      {"a", "ns", "c1", "nvidia.com/mig-1g.10gb", {kMig0}},
      {"a", "other", "c1", "nvidia.com/gpu", {kMig1}},  // same name, another namespace
  });
  auto listed = ListPodResources(fake->socket_path(), 5s);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  const std::vector<ContainerDevices> want = {
      {"a", "ns", "c1", "nvidia.com/gpu", {kGpu0}},
      {"a", "ns", "c1", "nvidia.com/mig-1g.10gb", {kMig0}},
      {"a", "ns", "c2", "nvidia.com/gpu", {kGpu2}},
      {"b", "ns", "c1", "nvidia.com/gpu", {kGpu1}},
      {"a", "other", "c1", "nvidia.com/gpu", {kMig1}},
  };
  EXPECT_EQ(*listed, want);
}

TEST(KubeletPodResources, ContainersWithoutDevicesAreSkipped) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  fake->SetAssignments({
      {"web", "default", "nginx", "", {}},  // a pod with no devices at all
      {"train", "ml", "sidecar", "", {}},
      {"train", "ml", "trainer", "nvidia.com/gpu", {kGpu0}},
  });

  // The kubelet's answer does carry the device-less containers...
  auto channel =
      grpc::CreateChannel("unix://" + fake->socket_path(), grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ListPodResourcesResponse raw;
  ASSERT_TRUE(stub->List(&ctx, v1::ListPodResourcesRequest(), &raw).ok());
  ASSERT_EQ(raw.pod_resources_size(), 2);
  EXPECT_EQ(raw.pod_resources(0).name(), "web");
  ASSERT_EQ(raw.pod_resources(0).containers_size(), 1);
  EXPECT_EQ(raw.pod_resources(0).containers(0).devices_size(), 0);
  ASSERT_EQ(raw.pod_resources(1).containers_size(), 2);

  // ...and the client drops them.
  auto listed = ListPodResources(fake->socket_path(), 5s);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  const std::vector<ContainerDevices> want = {
      {"train", "ml", "trainer", "nvidia.com/gpu", {kGpu0}}};
  EXPECT_EQ(*listed, want);
}

TEST(KubeletPodResources, MissingSocketIsAClearError) {
  ShortTempDir dir;
  const std::string socket = PodResourcesSocket(dir.path());
  auto listed = ListPodResources(socket, 5s);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(listed.status().message().find(socket), std::string::npos) << listed.status().message();
  EXPECT_NE(listed.status().message().find("is the kubelet running?"), std::string::npos);
  EXPECT_NE(listed.status().message().find("--kubelet-dir"), std::string::npos);

  auto got = GetPodResources(socket, "ns", "pod", 5s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find(socket), std::string::npos);
}

TEST(KubeletPodResources, StoppedFakeIsUnavailableAndRestartServesAgain) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  const std::string socket = fake->socket_path();
  fake->SetAssignments(MixedNode());
  fake->Stop();
  EXPECT_FALSE(std::filesystem::exists(socket));
  fake->Stop();  // idempotent
  auto listed = ListPodResources(socket, 5s);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kUnavailable);

  std::ofstream(socket) << "left over by a crashed kubelet";
  auto again = StartFake(dir);
  ASSERT_TRUE(again);
  EXPECT_TRUE(IsSocket(socket));
  again->SetAssignments(MixedNode());
  listed = ListPodResources(socket, 5s);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, MixedNode());
}

TEST(KubeletPodResources, GetReturnsOnePodOrNotFound) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  fake->SetAssignments(MixedNode());

  auto got = GetPodResources(fake->socket_path(), "ml", "train-0", 5s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::vector<ContainerDevices> node = MixedNode();
  const std::vector<ContainerDevices> want(node.begin(), node.begin() + 3);  // train-0's
  EXPECT_EQ(*got, want);

  got = GetPodResources(fake->socket_path(), "team-b", "notebook-2", 5s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].device_ids, (std::vector<std::string>{kGpu2 + "::3", kGpu2 + "::1"}));

  auto missing = GetPodResources(fake->socket_path(), "ml", "nope", 5s);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("ml/nope"), std::string::npos)
      << missing.status().message();
  // Right name, wrong namespace: not the same pod.
  EXPECT_FALSE(GetPodResources(fake->socket_path(), "team-a", "train-0", 5s).ok());
  EXPECT_EQ(fake->GetCalls(), 4u);
  EXPECT_EQ(fake->ListCalls(), 0u);
}

TEST(KubeletPodResources, AllocatableDevicesPerResource) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  fake->SetAllocatable({{"nvidia.com/gpu", {kGpu0, kGpu1}}, {"nvidia.com/mig-1g.10gb", {kMig0}}});
  auto alloc = GetAllocatableDevices(fake->socket_path(), 5s);
  ASSERT_TRUE(alloc.ok()) << alloc.status().ToString();
  const std::vector<ContainerDevices> want = {
      {"", "", "", "nvidia.com/gpu", {kGpu0, kGpu1}},
      {"", "", "", "nvidia.com/mig-1g.10gb", {kMig0}},
  };
  EXPECT_EQ(*alloc, want);
  EXPECT_EQ(fake->AllocatableCalls(), 1u);
}

TEST(KubeletPodResources, TimeoutHonouredWhenTheKubeletHangs) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  fake->SetAssignments(MixedNode());
  fake->SetStalled(true);

  auto listed = ListPodResources(fake->socket_path(), 200ms);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(listed.status().message().find(fake->socket_path()), std::string::npos)
      << listed.status().message();
  EXPECT_NE(listed.status().message().find("List"), std::string::npos);
  EXPECT_EQ(fake->ListCalls(), 1u);  // the call did reach the kubelet

  EXPECT_FALSE(GetPodResources(fake->socket_path(), "ml", "train-0", 200ms).ok());
  EXPECT_FALSE(GetAllocatableDevices(fake->socket_path(), 200ms).ok());

  fake->SetStalled(false);
  listed = ListPodResources(fake->socket_path(), 5s);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, MixedNode());
}

TEST(KubeletPodResources, StopReleasesStalledCalls) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  fake->SetStalled(true);
  std::atomic<bool> done{false};
  Status result;
  std::thread caller([&] {
    result = ListPodResources(fake->socket_path(), 60s).status();
    done = true;
  });
  ASSERT_TRUE(testing::WaitFor([&] { return fake->ListCalls() == 1; }));
  fake->Stop();
  caller.join();
  EXPECT_TRUE(done);
  EXPECT_FALSE(result.ok());
}

TEST(KubeletPodResources, ConcurrentListsSeeWholeTables) {
  ShortTempDir dir;
  auto fake = StartFake(dir);
  ASSERT_TRUE(fake);
  const std::vector<ContainerDevices> one = {{"p", "ns", "c", "nvidia.com/gpu", {kGpu0}}};
  const std::vector<ContainerDevices> two = MixedNode();
  fake->SetAssignments(one);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) fake->SetAssignments(i % 2 ? one : two);
  });
  std::vector<std::thread> readers;
  std::atomic<int> bad{0}, ok{0};
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        auto listed = ListPodResources(fake->socket_path(), 10s);
        if (!listed.ok() || (*listed != one && *listed != two)) {
          ++bad;
        } else {
          ++ok;
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  stop = true;
  writer.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(ok, 100);
  EXPECT_EQ(fake->ListCalls(), 100u);
}

TEST(KubeletPodResources, FakeRejectsTooLongSocketPath) {
  auto fake = FakePodResources::Start("/tmp/" + std::string(120, 'x') + "/kubelet.sock");
  ASSERT_FALSE(fake.ok());
  EXPECT_EQ(fake.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fake.status().message().find("107"), std::string::npos);
}

// --- the assignments file of `gpuop sim kubelet --pod-resources` ---

TEST(SimPodResourcesFile, ParsesEntries) {
  auto parsed = sim::ParsePodResourcesJson(R"([
    {"pod": "train-0", "namespace": "ml", "container": "trainer",
     "resource": "nvidia.com/mig-1g.10gb", "devices": ["MIG-a", "MIG-b"]},
    {"pod": "web", "container": "nginx", "resource": "nvidia.com/gpu", "devices": []}
  ])",
                                           "pods.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const std::vector<ContainerDevices> want = {
      {"train-0", "ml", "trainer", "nvidia.com/mig-1g.10gb", {"MIG-a", "MIG-b"}},
      {"web", "default", "nginx", "nvidia.com/gpu", {}},
  };
  EXPECT_EQ(*parsed, want);
  auto empty = sim::ParsePodResourcesJson("[]", "pods.json");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(SimPodResourcesFile, ErrorsNameTheFileAndEntry) {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"{", "not JSON"},
      {R"({"pod": "x"})", "must be a JSON array"},
      {R"([1])", "entry 0: must be an object"},
      {R"([{"pod":"a","container":"c","resource":"r","devices":[]},
           {"pod":"a","container":"c","resource":"r","devices":[],"gpu":1}])",
       "entry 1: unknown key \"gpu\""},
      {R"([{"container":"c","resource":"r","devices":[]}])", "entry 0: missing \"pod\""},
      {R"([{"pod":"a","container":"c","resource":"r"}])", "entry 0: missing \"devices\""},
      {R"([{"pod":"a","container":"c","resource":7,"devices":[]}])",
       "\"resource\" must be a non-empty string"},
      {R"([{"pod":"a","container":"c","resource":"r","devices":"GPU-0"}])",
       "\"devices\" must be an array"},
      {R"([{"pod":"a","container":"c","resource":"r","devices":[""]}])",
       "\"devices\" must hold non-empty strings"},
  };
  for (const Case& c : cases) {
    auto parsed = sim::ParsePodResourcesJson(c.text, "/etc/pods.json");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("/etc/pods.json"), std::string::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(c.want), std::string::npos)
        << c.text << " -> " << parsed.status().message();
  }
}

TEST(SimPodResourcesFile, LoadNamesAMissingFile) {
  ShortTempDir dir;
  auto loaded = sim::LoadPodResourcesFile(dir / "absent.json");
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(dir / "absent.json"), std::string::npos)
      << loaded.status().message();
  std::ofstream(dir / "pods.json") << R"([{"pod":"p","container":"c","resource":"nvidia.com/gpu",
                                          "devices":["GPU-0::1"]}])";
  loaded = sim::LoadPodResourcesFile(dir / "pods.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0].device_ids, std::vector<std::string>{"GPU-0::1"});
}

}  // namespace
}  // namespace gpuop::kubelet
