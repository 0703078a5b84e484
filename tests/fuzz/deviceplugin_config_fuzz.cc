// The device plugin's config file (k8s-device-plugin api/config/v1, YAML or
// JSON, from a ConfigMap), and the strategy strings its flags and
// environment take.
#include "deviceplugin/config.h"
#include "fuzz_util.h"

using namespace gpuop::deviceplugin;
using gpuop::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = gpuop::fuzz::AsText(data, size);
  if (size < 128) {
    if (auto s = ParseDeviceListStrategy(text); s.ok()) {
      std::string csv = DeviceListStrategyString(*s);
      auto again = ParseDeviceListStrategy(csv);
      Check(again.ok() && *again == *s, "a device list strategy changes through its string", csv);
    }
    (void)ParseMigStrategy(text);
    (void)ParseDeviceIdStrategy(text);
    (void)ParseSharedAllocationPolicy(text);
  }
  auto config = ParseConfig(text, "config file fuzz.yaml");
  if (!config.ok()) {
    Check(config.status().message().starts_with("config file fuzz.yaml"),
          "a config error does not start with its origin", config.status().ToString());
    return 0;
  }
  (void)ValidateConfig(*config);
  return 0;
}
