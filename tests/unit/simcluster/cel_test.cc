#include "sim/cluster/cel.h"

#include <gtest/gtest.h>

namespace gpuop::simcluster {
namespace {

using kube::Json;

constexpr const char* kDriver = "gpu.nvidia.com";

// An H100 as NVIDIA's driver publishes it: own attributes without a domain, the
// standard ones qualified.
Json H100() {
  return Json::parse(R"({
    "name": "gpu-0",
    "attributes": {
      "type": {"string": "gpu"},
      "productName": {"string": "NVIDIA H100 80GB HBM3"},
      "architecture": {"string": "Hopper"},
      "driverVersion": {"version": "550.127.5"},
      "cudaComputeCapability": {"version": "9.0.0"},
      "resource.kubernetes.io/numaNode": {"int": 0},
      "gpu.nvidia.com/multiInstance": {"bool": false}
    },
    "capacity": {"memory": {"value": "80Gi"}}
  })");
}

Json Mig1g10gb() {
  return Json::parse(R"({
    "name": "gpu-0-mig-1g10gb-19-0",
    "attributes": {
      "type": {"string": "mig"},
      "profile": {"string": "1g.10gb"},
      "productName": {"string": "NVIDIA H100 80GB HBM3"},
      "driverVersion": {"version": "550.127.5"}
    },
    "capacity": {"memory": {"value": "10240Mi"}, "multiprocessors": {"value": "16"}}
  })");
}

// Parses (asserting it parses) and evaluates against `device`.
Result<bool> Eval(const std::string& expr, const Json& device, const char* driver = kDriver) {
  auto sel = CelSelector::Parse(expr);
  EXPECT_TRUE(sel.ok()) << sel.status().ToString();
  if (!sel.ok()) return sel.status();
  return sel->Evaluate(device, driver);
}

bool Matches(const std::string& expr, const Json& device) {
  auto r = Eval(expr, device);
  EXPECT_TRUE(r.ok()) << expr << ": " << r.status().ToString();
  return r.ok() && *r;
}

TEST(CelSelectorTest, NvidiaDeviceClassesSelectGpusAndMigDevices) {
  const std::string gpu_class =
      "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'";
  const std::string mig_class =
      "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'";
  EXPECT_TRUE(Matches(gpu_class, H100()));
  EXPECT_FALSE(Matches(gpu_class, Mig1g10gb()));
  EXPECT_TRUE(Matches(mig_class, Mig1g10gb()));
  EXPECT_FALSE(Matches(mig_class, H100()));
  // Another driver's device: the driver test decides before the attribute
  // lookup (which would be an error: its domain has no `type`).
  auto other = Eval(gpu_class, H100(), "example.com");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE(*other);
}

TEST(CelSelectorTest, AttributeEqualityBothIndexSpellingsAndQualifiedNames) {
  EXPECT_TRUE(Matches("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
                      H100()));
  EXPECT_TRUE(Matches(
      R"(device.attributes["gpu.nvidia.com"]["productName"] == "NVIDIA H100 80GB HBM3")", H100()));
  EXPECT_FALSE(Matches("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'",
                       H100()));
  EXPECT_TRUE(Matches("device.attributes['gpu.nvidia.com'].productName != 'NVIDIA L40S'", H100()));
  EXPECT_TRUE(Matches("device.attributes['resource.kubernetes.io'].numaNode == 0", H100()));
  EXPECT_TRUE(Matches("device.attributes['resource.kubernetes.io'].numaNode < 1", H100()));
  EXPECT_FALSE(Matches("device.attributes['resource.kubernetes.io'].numaNode >= 1", H100()));
  EXPECT_TRUE(Matches("device.attributes['resource.kubernetes.io'].numaNode > -1", H100()));
  // An own attribute stored with its domain spelled out.
  EXPECT_TRUE(Matches("device.attributes['gpu.nvidia.com'].multiInstance == false", H100()));
  EXPECT_TRUE(Matches("!device.attributes['gpu.nvidia.com'].multiInstance", H100()));
  EXPECT_TRUE(Matches("device.attributes['gpu.nvidia.com'].architecture >= 'Ampere'", H100()));
  // Different types are simply unequal, as in CEL.
  EXPECT_FALSE(Matches("device.attributes['gpu.nvidia.com'].type == 1", H100()));
}

TEST(CelSelectorTest, DriverVersionComparesAsSemver) {
  const std::string dv = "device.attributes['gpu.nvidia.com'].driverVersion";
  EXPECT_TRUE(Matches(dv + ".compareTo(semver('550.0.0')) >= 0", H100()));
  EXPECT_FALSE(Matches(dv + ".compareTo(semver('560.0.0')) >= 0", H100()));
  EXPECT_TRUE(Matches(dv + ".compareTo(semver('550.127.5')) == 0", H100()));
  // Numerically, not as strings: 550.127.5 > 550.54.15.
  EXPECT_TRUE(Matches(dv + ".isGreaterThan(semver('550.54.15'))", H100()));
  EXPECT_TRUE(Matches(dv + ".isLessThan(semver('550.127.10'))", H100()));
  EXPECT_FALSE(Matches(dv + ".isLessThan(semver('550.127.5'))", H100()));
  EXPECT_TRUE(Matches(dv + " == semver('550.127.5')", H100()));
  // A pre-release sorts before its release.
  EXPECT_TRUE(Matches(dv + ".isGreaterThan(semver('550.127.5-rc.1'))", H100()));
  EXPECT_TRUE(
      Matches("device.attributes['gpu.nvidia.com'].cudaComputeCapability"
              ".compareTo(semver('8.0.0')) > 0",
              H100()));
  // semver orders only through its methods, as in kube's CEL library.
  auto lt = Eval(dv + " < semver('560.0.0')", H100());
  ASSERT_FALSE(lt.ok());
  EXPECT_NE(lt.status().message().find("no such overload"), std::string::npos);
  // A malformed literal is refused when parsing, not at every device.
  auto bad = CelSelector::Parse(dv + ".compareTo(semver('550.0')) >= 0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("semver('550.0'): not a semantic version"),
            std::string::npos);
}

TEST(CelSelectorTest, MemoryComparesAsQuantity) {
  const std::string mem = "device.capacity['gpu.nvidia.com'].memory";
  EXPECT_TRUE(Matches(mem + ".compareTo(quantity('40Gi')) > 0", H100()));
  EXPECT_TRUE(Matches(mem + ".isGreaterThan(quantity('79Gi'))", H100()));
  EXPECT_FALSE(Matches(mem + ".isGreaterThan(quantity('80Gi'))", H100()));
  EXPECT_TRUE(Matches(mem + ".compareTo(quantity('81920Mi')) == 0", H100()));
  EXPECT_TRUE(Matches(mem + ".isLessThan(quantity('100G'))", H100()));
  EXPECT_TRUE(Matches(mem + ".isLessThan(quantity('16Gi'))", Mig1g10gb()));
  EXPECT_TRUE(Matches(mem + " == quantity('10Gi')", Mig1g10gb()));
  EXPECT_TRUE(
      Matches("device.capacity['gpu.nvidia.com'].multiprocessors.compareTo(quantity('14')) >= 0",
              Mig1g10gb()));
  // Quantity against semver: no such overload.
  auto mixed = Eval(mem + ".compareTo(semver('1.0.0')) > 0", H100());
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("no such overload: quantity.compareTo(semver)"),
            std::string::npos);
}

TEST(CelSelectorTest, LogicAndPrecedence) {
  EXPECT_TRUE(Matches("true || false && false", H100()));  // && binds tighter
  EXPECT_FALSE(Matches("(true || false) && false", H100()));
  EXPECT_TRUE(Matches("!(device.attributes['gpu.nvidia.com'].type == 'mig')", H100()));
  EXPECT_TRUE(
      Matches("device.attributes['gpu.nvidia.com'].type == 'mig' && "
              "device.attributes['gpu.nvidia.com'].profile == '1g.10gb' || "
              "device.attributes['gpu.nvidia.com'].type == 'gpu'",
              H100()));
}

TEST(CelSelectorTest, MissingAttributeIsNoSuchKeyUnlessTheOtherSideDecides) {
  const std::string profile = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'";
  auto missing = Eval(profile, H100());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "no such key: profile");
  auto other_domain = Eval("device.attributes['example.com'].productName == 'x'", H100());
  ASSERT_FALSE(other_domain.ok());
  EXPECT_EQ(other_domain.status().message(), "no such key: productName");
  auto capacity =
      Eval("device.capacity['gpu.nvidia.com'].decoders.isGreaterThan(quantity('0'))", H100());
  ASSERT_FALSE(capacity.ok());
  EXPECT_EQ(capacity.status().message(), "no such key: decoders");
  // CEL's commutative && and ||: the deciding side wins over the error.
  EXPECT_FALSE(Matches(profile + " && false", H100()));
  EXPECT_FALSE(Matches("false && " + profile, H100()));
  EXPECT_TRUE(Matches(profile + " || true", H100()));
  EXPECT_FALSE(Eval(profile + " && true", H100()).ok());
  EXPECT_FALSE(Eval(profile + " || false", H100()).ok());
  EXPECT_FALSE(Eval("!(" + profile + ")", H100()).ok());
}

TEST(CelSelectorTest, NonBoolResultIsAnError) {
  auto r = Eval("device.driver", H100());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("returned a string, not a bool"), std::string::npos);
}

TEST(CelSelectorTest, UnsupportedConstructsAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"'gpu' in device.attributes['gpu.nvidia.com']", "the 'in' operator"},
      {"has(device.attributes['gpu.nvidia.com'].profile)", "the has() macro"},
      {"device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')",
       "the method startsWith()"},
      {"device.attributes['gpu.nvidia.com'].productName.matches('H100')", "the method matches()"},
      {"size(device.attributes['gpu.nvidia.com']) > 2", "the function size()"},
      {"device.attributes['resource.kubernetes.io'].numaNode + 1 == 1", "arithmetic ('+')"},
      {"device.attributes['gpu.nvidia.com'].type == 'gpu' ? true : false",
       "the conditional operator (?:)"},
      {"device.attributes['gpu.nvidia.com'].type in ['gpu', 'mig']", "the 'in' operator"},
      {"device.capacity['gpu.nvidia.com'].memory.asInteger() > 1", "the method asInteger()"},
      {"device.name == 'gpu-0'", "the field device.name"},
      {"device.attributes['gpu.nvidia.com'] == {}", "a map or message literal"},
      {"device.attributes == device.attributes",
       "a whole device.attributes or device.capacity map"},
      {"cel.bind(x, 1, x == 1)", "the identifier 'cel'"},
      {"device.attributes['resource.kubernetes.io'].numaNode == 1.0", "a floating-point literal"},
      {"device.attributes['gpu.nvidia.com'].type == r'gpu'", "a raw or bytes string literal"},
      {"1 < 2 < 3", "a chained comparison"},
  };
  for (const auto& [expr, construct] : cases) {
    auto parsed = CelSelector::Parse(expr);
    ASSERT_FALSE(parsed.ok()) << expr;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = parsed.status().message();
    EXPECT_NE(m.find(construct), std::string::npos) << expr << " -> " << m;
    EXPECT_NE(m.find("is not supported by the simulator"), std::string::npos) << m;
    EXPECT_NE(m.find(expr), std::string::npos) << "names the expression: " << m;
  }
}

TEST(CelSelectorTest, SyntaxErrorsSayWhatWasExpected) {
  auto open = CelSelector::Parse("(device.driver == 'x'");
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("syntax error: expected ')', found the end"),
            std::string::npos)
      << open.status().message();
  auto quote = CelSelector::Parse("device.driver == 'x");
  ASSERT_FALSE(quote.ok());
  EXPECT_NE(quote.status().message().find("unterminated string literal"), std::string::npos);
}

TEST(CelSelectorTest, ParsedOnceEvaluatedOnManyDevices) {
  auto sel = CelSelector::Parse("device.attributes['gpu.nvidia.com'].type == 'gpu'");
  ASSERT_TRUE(sel.ok());
  const CelSelector copy = *sel;  // shares the parsed tree
  int matched = 0;
  for (const Json& d : {H100(), Mig1g10gb(), H100()}) {
    auto r = copy.Evaluate(d, kDriver);
    ASSERT_TRUE(r.ok());
    matched += *r ? 1 : 0;
  }
  EXPECT_EQ(matched, 2);
  EXPECT_EQ(copy.expression(), "device.attributes['gpu.nvidia.com'].type == 'gpu'");
}

}  // namespace
}  // namespace gpuop::simcluster
