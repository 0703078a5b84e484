// The API server's rules for names, label keys and values, as Kubernetes'
// apimachinery validation package states them (IsDNS1123Subdomain,
// IsQualifiedName, ...). Each returns the server's own messages, empty when the
// value is valid: the API emulator answers with them, and gpuop checks what it
// is about to write (a resource name, a label) with the same rules.
//
// Pure functions; thread-safe (each thread keeps its compiled patterns).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpuop::kube {

// metadata.name of most kinds, a label key's prefix, a CRD group: at most 253
// characters of lowercase RFC 1123 labels joined by dots.
std::vector<std::string> IsDns1123Subdomain(std::string_view value);
// Namespaces: one RFC 1123 label, at most 63 characters.
std::vector<std::string> IsDns1123Label(std::string_view value);
// Services: an RFC 1035 label (begins with a letter).
std::vector<std::string> IsDns1035Label(std::string_view value);
// RBAC objects: anything but "." and "..", without '/' or '%'.
std::vector<std::string> IsPathSegmentName(std::string_view value);
// Label and annotation keys: [prefix/]name, the name at most 63 characters.
std::vector<std::string> IsQualifiedName(std::string_view value);
// Label values: empty, or at most 63 alphanumeric characters and '-', '_', '.'
// inside.
std::vector<std::string> IsLabelValue(std::string_view value);
// ConfigMap and Secret data keys.
std::vector<std::string> IsConfigMapKey(std::string_view value);

}  // namespace gpuop::kube
