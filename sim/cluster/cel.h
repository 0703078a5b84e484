// CelSelector: the subset of CEL that DeviceClass and ResourceClaim device
// selectors use, evaluated against one device of a ResourceSlice
// (resource.k8s.io/v1), the way kube-scheduler's DynamicResources plugin
// evaluates them:
//   device.driver
//   device.attributes['<domain>'].<id>   device.attributes['<domain>']['<id>']
//   device.capacity['<domain>'].<id>
//   string ('...', "..."), int and bool literals
//   == != < <= > >=   && || !   ( )
//   semver('1.2.3') and quantity('10Gi'), with compareTo(), isGreaterThan()
//   and isLessThan() on versions and quantities
// An attribute's domain is the device's driver when its name has none
// ("productName" is device.attributes['gpu.nvidia.com'].productName for driver
// gpu.nvidia.com). A missing attribute or capacity makes the evaluation an
// error ("no such key: <id>"), as in CEL; && and || absorb an error when the
// other side decides the result (false && error is false).
//
// Anything outside the subset is refused when parsing, with a message naming
// the construct and saying the simulator does not support it: the simulator
// never guesses a match. Parse once, then Evaluate for every device.
//
// Thread-safety: a parsed CelSelector is immutable; Evaluate may be called
// from any thread at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "kube/object.h"

namespace gpuop::simcluster {

class CelSelector {
 public:
  // InvalidArgument for syntax errors, unsupported constructs and malformed
  // semver()/quantity() literals.
  static Result<CelSelector> Parse(std::string_view expression);

  // Whether `device` (a ResourceSlice spec.devices[] entry) of `driver`
  // matches. An error (missing attribute, mismatched types, a non-bool
  // result) means "does not match" to the allocator, which reports it.
  Result<bool> Evaluate(const kube::Json& device, std::string_view driver) const;

  const std::string& expression() const { return expression_; }

  struct Node;

 private:
  CelSelector(std::string expression, std::shared_ptr<const Node> root)
      : expression_(std::move(expression)), root_(std::move(root)) {}

  std::string expression_;
  std::shared_ptr<const Node> root_;
};

}  // namespace gpuop::simcluster
