// Opaque GpuConfig / MigDeviceConfig parameters: strict decoding, the
// refusals (MPS, time slicing of MIG devices, passthrough), and NVIDIA's
// precedence between defaults, FromClass and FromClaim entries.
#include "dra/config.h"

#include <gtest/gtest.h>

#include "tests/unit/dra/prepare_fixtures.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;
using testing::ConfigEntryJson;
using testing::GpuTimeSlicing;

Json Params(const std::string& kind, const Json& sharing = nullptr) {
  Json p = {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", kind}};
  if (!sharing.is_null()) p["sharing"] = sharing;
  return p;
}

std::string DecodeError(const Json& params) {
  auto c = DecodeDeviceConfig(params, "config[0]");
  EXPECT_FALSE(c.ok()) << params.dump();
  return c.ok() ? "" : c.status().message();
}

TEST(DecodeDeviceConfig, TimeSlicingIntervals) {
  for (auto [name, interval] : {std::pair{"Default", TimeSliceInterval::kDefault},
                                {"Short", TimeSliceInterval::kShort},
                                {"Medium", TimeSliceInterval::kMedium},
                                {"Long", TimeSliceInterval::kLong}}) {
    auto c = DecodeDeviceConfig(GpuTimeSlicing(name), "config[0]");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->kind, DeviceType::kGpu);
    EXPECT_EQ(c->time_slice, interval) << name;
  }
  // No interval, or no timeSlicingConfig at all: Default.
  auto c = DecodeDeviceConfig(Params("GpuConfig", {{"strategy", "TimeSlicing"}}), "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->time_slice, TimeSliceInterval::kDefault);
  c = DecodeDeviceConfig(
      Params("GpuConfig", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", Json::object()}}),
      "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->time_slice, TimeSliceInterval::kDefault);
  // No sharing: nothing applied.
  c = DecodeDeviceConfig(Params("MigDeviceConfig"), "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, DefaultConfig(DeviceType::kMig));
}

TEST(DecodeDeviceConfig, StrictAboutFieldsAndValues) {
  Json extra = GpuTimeSlicing("Long");
  extra["sharing"]["timeSlicingConfig"]["intervall"] = "Long";
  EXPECT_NE(DecodeError(extra).find(
                "config[0].opaque.parameters.sharing.timeSlicingConfig.intervall: unknown field"),
            std::string::npos);
  Json top = Params("GpuConfig");
  top["shareing"] = Json::object();
  EXPECT_NE(DecodeError(top).find("opaque.parameters.shareing: unknown field"), std::string::npos);
  EXPECT_NE(DecodeError(GpuTimeSlicing("Longest")).find("use Default, Short, Medium or Long"),
            std::string::npos);
  Json version = Params("GpuConfig");
  version["apiVersion"] = "resource.nvidia.com/v1";
  EXPECT_NE(DecodeError(version).find("is not resource.nvidia.com/v1beta1"), std::string::npos);
  EXPECT_NE(DecodeError(Params("TpuConfig")).find("use GpuConfig or MigDeviceConfig"),
            std::string::npos);
  EXPECT_NE(DecodeError(Params("GpuConfig", {{"strategy", "Exclusive"}}))
                .find("\"Exclusive\" is not a sharing strategy"),
            std::string::npos);
  EXPECT_NE(DecodeError(Params("GpuConfig", Json::object())).find("sharing.strategy: missing"),
            std::string::npos);
  EXPECT_NE(
      DecodeError(Params("GpuConfig", {{"strategy", "TimeSlicing"}, {"mpsConfig", Json::object()}}))
          .find("mpsConfig: only valid with strategy MPS"),
      std::string::npos);
  // MigDeviceConfig has no timeSlicingConfig.
  EXPECT_NE(DecodeError(Params("MigDeviceConfig", {{"strategy", "TimeSlicing"},
                                                   {"timeSlicingConfig", Json::object()}}))
                .find("timeSlicingConfig: unknown field"),
            std::string::npos);
  EXPECT_NE(DecodeError(Json::array()).find("must be an object"), std::string::npos);
}

TEST(DecodeDeviceConfig, RefusesWhatGpuopDoesNotDo) {
  auto mps = DecodeDeviceConfig(
      Params("GpuConfig",
             {{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", 50}}}}),
      "c");
  ASSERT_FALSE(mps.ok());
  EXPECT_EQ(mps.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(mps.status().message().find("MPS control daemon"), std::string::npos);
  EXPECT_NE(mps.status().message().find("use strategy TimeSlicing"), std::string::npos);
  auto mig_mps = DecodeDeviceConfig(Params("MigDeviceConfig", {{"strategy", "MPS"}}), "c");
  ASSERT_FALSE(mig_mps.ok());
  EXPECT_EQ(mig_mps.status().code(), StatusCode::kNotSupported);

  auto mig_ts = DecodeDeviceConfig(Params("MigDeviceConfig", {{"strategy", "TimeSlicing"}}), "c");
  ASSERT_FALSE(mig_ts.ok());
  EXPECT_EQ(mig_ts.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(mig_ts.status().message().find("per whole GPU"), std::string::npos);

  auto vfio = DecodeDeviceConfig(Params("VfioDeviceConfig"), "c");
  ASSERT_FALSE(vfio.ok());
  EXPECT_EQ(vfio.status().code(), StatusCode::kNotSupported);
}

TEST(ParseAllocationConfigs, OursOnlyClassBeforeClaim) {
  Json config = {
      ConfigEntryJson("FromClaim", {"gpu"}, GpuTimeSlicing("Short")),
      ConfigEntryJson("FromClass", {}, {{"anything", "goes"}}, "net.example.com"),
      ConfigEntryJson("FromClass", {}, GpuTimeSlicing("Long")),
  };
  auto entries = ParseAllocationConfigs(config);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].source, ConfigSource::kFromClass);
  EXPECT_EQ((*entries)[0].config.time_slice, TimeSliceInterval::kLong);
  EXPECT_TRUE((*entries)[0].requests.empty());
  EXPECT_EQ((*entries)[1].source, ConfigSource::kFromClaim);
  EXPECT_EQ((*entries)[1].requests, std::vector<std::string>{"gpu"});

  config[0]["opaque"]["parameters"]["sharing"]["strategy"] = "MPS";
  auto mps = ParseAllocationConfigs(config);
  ASSERT_FALSE(mps.ok());
  EXPECT_NE(mps.status().message().find("status.allocation.devices.config[0].opaque.parameters"),
            std::string::npos)
      << mps.status().message();

  auto no_opaque = ParseAllocationConfigs(Json::array({{{"source", "FromClaim"}}}));
  ASSERT_FALSE(no_opaque.ok());
  EXPECT_NE(no_opaque.status().message().find("config[0] has no opaque configuration"),
            std::string::npos);
  auto bad_source =
      ParseAllocationConfigs(Json::array({ConfigEntryJson("FromPod", {}, GpuTimeSlicing("Long"))}));
  ASSERT_FALSE(bad_source.ok());
  EXPECT_NE(bad_source.status().message().find("\"FromPod\" is not FromClass or FromClaim"),
            std::string::npos);
}

DeviceConfig Ts(TimeSliceInterval i) { return DeviceConfig{DeviceType::kGpu, i}; }

ConfigEntry Entry(ConfigSource s, std::vector<std::string> requests, DeviceConfig c) {
  return ConfigEntry{s, std::move(requests), c};
}

TEST(SelectConfig, Precedence) {
  const AllocatedDevice gpu{"gpu", "node-a", "gpu-0"};
  const AllocatedDevice sub{"big/h100", "node-a", "gpu-1"};
  const AllocatedDevice mig{"small", "node-a", "gpu-2-mig-1g5gb-19-0"};
  const auto kClass = ConfigSource::kFromClass;
  const auto kClaim = ConfigSource::kFromClaim;

  // Nothing configured: the defaults, nothing applied.
  EXPECT_EQ(*SelectConfig({}, gpu, DeviceType::kGpu), DefaultConfig(DeviceType::kGpu));

  // A FromClaim entry beats a FromClass one.
  std::vector<ConfigEntry> e = {Entry(kClass, {}, Ts(TimeSliceInterval::kLong)),
                                Entry(kClaim, {}, Ts(TimeSliceInterval::kShort))};
  EXPECT_EQ(SelectConfig(e, gpu, DeviceType::kGpu)->time_slice, TimeSliceInterval::kShort);
  // A request-less GpuConfig does not apply to a MIG device: its default does.
  EXPECT_EQ(*SelectConfig(e, mig, DeviceType::kMig), DefaultConfig(DeviceType::kMig));

  // Scanning from the highest: a later entry naming the request wins over an
  // earlier request-less one, and the higher request-less entry over a lower
  // named one.
  e = {Entry(kClass, {"gpu"}, Ts(TimeSliceInterval::kLong)),
       Entry(kClaim, {}, Ts(TimeSliceInterval::kShort)),
       Entry(kClaim, {"gpu"}, Ts(TimeSliceInterval::kMedium))};
  EXPECT_EQ(SelectConfig(e, gpu, DeviceType::kGpu)->time_slice, TimeSliceInterval::kMedium);
  e.pop_back();
  EXPECT_EQ(SelectConfig(e, gpu, DeviceType::kGpu)->time_slice, TimeSliceInterval::kShort);

  // A subrequest is matched by its own name and by its parent request's.
  e = {Entry(kClaim, {"big"}, Ts(TimeSliceInterval::kLong))};
  EXPECT_EQ(SelectConfig(e, sub, DeviceType::kGpu)->time_slice, TimeSliceInterval::kLong);
  e = {Entry(kClaim, {"big/h100"}, Ts(TimeSliceInterval::kMedium))};
  EXPECT_EQ(SelectConfig(e, sub, DeviceType::kGpu)->time_slice, TimeSliceInterval::kMedium);
  e = {Entry(kClaim, {"other"}, Ts(TimeSliceInterval::kMedium))};
  EXPECT_EQ(*SelectConfig(e, sub, DeviceType::kGpu), DefaultConfig(DeviceType::kGpu));

  // A GpuConfig naming a request whose device is a MIG device is an error.
  e = {Entry(kClaim, {"small"}, Ts(TimeSliceInterval::kLong))};
  auto wrong = SelectConfig(e, mig, DeviceType::kMig);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(
                "a GpuConfig names request \"small\", but its device gpu-2-mig-1g5gb-19-0 is of "
                "type mig; use a MigDeviceConfig"),
            std::string::npos)
      << wrong.status().message();
}

}  // namespace
}  // namespace gpuop::dra
