// Lists and watch events written from the JSON the store keeps per object
// (ListResult::Dump, WatchEvent::Dump) must be the bytes a dump of the json
// tree gives, also after writes replace the objects; and the HTTP layer sends
// large lists gzip-compressed the way kube-apiserver does.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "sim/kube/server.h"
#include "sim/kube/store.h"
#include "tests/unit/simkube/store_testing.h"

namespace gpuop::simkube {
namespace {

using nlohmann::json;
using namespace gpuop::simkube::testing;  // NOLINT

json Node(const std::string& name, const std::string& zone) {
  return {{"metadata", {{"name", name}, {"labels", {{"zone", zone}, {"gpu", "true"}}}}},
          {"status", {{"capacity", {{"nvidia.com/gpu", "8"}}}}}};
}

std::string Dumped(const ListResult& l) { return l.ToJson(Nodes()).dump(); }

TEST(ListJsonTest, ListBodyFromStoredJsonEqualsTheDumpAfterWrites) {
  Store store(ManualGc());
  for (const char* n : {"n1", "n2", "n3"})
    ASSERT_TRUE(store.Create(Nodes(), "", Node(n, "a")).ok());
  auto before = store.List(Nodes(), "", {});
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->item_json.size(), 3u);
  EXPECT_EQ(before->Dump(Nodes()), Dumped(*before));  // also makes each object's JSON

  // A patch, a status update and a delete replace what the first list serialised.
  PatchOptions merge{PatchType::kMerge};
  ASSERT_TRUE(
      store.Patch(Nodes(), "", "n1", {{"metadata", {{"labels", {{"zone", "b"}}}}}}, merge).ok());
  json n2 = **store.Get(Nodes(), "", "n2");
  n2["status"]["capacity"]["nvidia.com/gpu"] = "4";
  UpdateOptions status;
  status.subresource = "status";
  ASSERT_TRUE(store.Update(Nodes(), "", "n2", n2, status).ok());
  ASSERT_TRUE(store.Delete(Nodes(), "", "n3").ok());

  auto after = store.List(Nodes(), "", {});
  ASSERT_TRUE(after.ok());
  const std::string body = after->Dump(Nodes());
  EXPECT_EQ(body, Dumped(*after));
  json parsed = json::parse(body);
  ASSERT_EQ(parsed["items"].size(), 2u);
  EXPECT_EQ(parsed["items"][0]["metadata"]["labels"]["zone"], "b");
  EXPECT_EQ(parsed["items"][1]["status"]["capacity"]["nvidia.com/gpu"], "4");
  EXPECT_EQ(parsed["metadata"]["resourceVersion"], std::to_string(store.CurrentResourceVersion()));
}

TEST(ListJsonTest, PagedAndSelectedListsMatchTheDump) {
  Store store(ManualGc());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store.Create(Nodes(), "", Node("n" + std::to_string(i), i % 2 ? "a" : "b")).ok());
  }
  ListOptions page;
  page.limit = 2;
  auto first = store.List(Nodes(), "", page);
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->continue_token.empty());
  ASSERT_TRUE(first->remaining_item_count.has_value());
  EXPECT_EQ(first->Dump(Nodes()), Dumped(*first));

  ListOptions selected;
  selected.label_selector = "zone=a";
  auto some = store.List(Nodes(), "", selected);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->items.size(), 2u);
  EXPECT_EQ(some->Dump(Nodes()), Dumped(*some));

  // Items without stored JSON (built by hand) are dumped on the spot.
  ListResult by_hand;
  by_hand.resource_version = "7";
  by_hand.items = some->items;
  EXPECT_EQ(by_hand.Dump(Nodes()), Dumped(by_hand));
}

TEST(ListJsonTest, WatchEventsFromStoredJsonEqualTheDump) {
  Store store(ManualGc());
  ASSERT_TRUE(store.Create(Nodes(), "", Node("n1", "a")).ok());
  WatchOptions all;
  auto w = store.Watch(Nodes(), "", all);
  ASSERT_TRUE(w.ok());
  WatchOptions zone_a;
  zone_a.label_selector = "zone=a";
  zone_a.resource_version = std::to_string(store.CurrentResourceVersion());
  auto selected = store.Watch(Nodes(), "", zone_a);
  ASSERT_TRUE(selected.ok());

  PatchOptions merge{PatchType::kMerge};
  ASSERT_TRUE(
      store.Patch(Nodes(), "", "n1", {{"metadata", {{"labels", {{"zone", "b"}}}}}}, merge).ok());
  ASSERT_TRUE(store.Delete(Nodes(), "", "n1").ok());

  for (auto type :
       {WatchEvent::Type::kAdded, WatchEvent::Type::kModified, WatchEvent::Type::kDeleted}) {
    auto ev = (*w)->Next(std::chrono::seconds(30));
    ASSERT_TRUE(ev.has_value());
    EXPECT_EQ(ev->type, type);
    EXPECT_TRUE(ev->object_json);
    EXPECT_EQ(ev->Dump(), ev->ToJson().dump());
  }

  // The node left the selection: a DELETED made from its previous content,
  // which the store never serialised.
  auto left = (*selected)->Next(std::chrono::seconds(30));
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->type, WatchEvent::Type::kDeleted);
  EXPECT_FALSE(left->object_json);
  EXPECT_EQ(left->Dump(), left->ToJson().dump());
  EXPECT_EQ((*left->object)["metadata"]["labels"]["zone"], "a");
}

// Over HTTP: kube-apiserver gzips a response over 128 KiB when the client
// accepts gzip, and offers no other encoding.
class ListEncodingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    o.threads = 4;
    auto s = ApiServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    // 200 ConfigMaps of 1 KB each: a list of about 250 KB.
    for (int i = 0; i < 200; ++i) {
      json cm = Named("cm-" + std::to_string(i), {{"data", {{"blob", std::string(1000, 'x')}}}});
      ASSERT_TRUE(server_->store().Create(ConfigMaps(), "default", cm).ok());
    }
  }

  httplib::Result Get(const std::string& path, const std::string& accept_encoding) {
    httplib::Client c(server_->host(), server_->port());
    c.set_read_timeout(60);
    return c.Get(path.c_str(), {{"Accept-Encoding", accept_encoding}});
  }

  json StoreList(const ListOptions& o = {}) {
    return server_->store().List(ConfigMaps(), "default", o)->ToJson(ConfigMaps());
  }

  std::unique_ptr<ApiServer> server_;
};

TEST_F(ListEncodingTest, LargeListIsGzippedWhenAccepted) {
  auto res = Get("/api/v1/namespaces/default/configmaps", "gzip, deflate, br");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(res->get_header_value("Vary"), "Accept-Encoding");
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(res->body), StoreList());  // httplib's client inflated it
}

TEST_F(ListEncodingTest, NoGzipNoBrotliAndSmallListsAsIs) {
  auto br = Get("/api/v1/namespaces/default/configmaps", "br");
  ASSERT_TRUE(br);
  ASSERT_EQ(br->status, 200);
  EXPECT_FALSE(br->has_header("Content-Encoding"));
  EXPECT_EQ(json::parse(br->body), StoreList());

  auto small = Get("/api/v1/namespaces/default/configmaps?limit=10", "gzip");
  ASSERT_TRUE(small);
  ASSERT_EQ(small->status, 200);
  EXPECT_FALSE(small->has_header("Content-Encoding"));
  ListOptions ten;
  ten.limit = 10;
  EXPECT_EQ(json::parse(small->body), StoreList(ten));
}

}  // namespace
}  // namespace gpuop::simkube
