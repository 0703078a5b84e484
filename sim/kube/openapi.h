// The OpenAPI v3 documents the API emulator serves at /openapi/v3, so kubectl
// finds the schemas it uses for client-side checks and for deciding that the
// server does field validation (fieldValidation=Strict).
//
// The index (GET /openapi/v3) maps each group/version path to a URL with a
// content hash, as kube-apiserver does:
//   {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=..."}, ...}}
// Documents are read once from a directory of files named after their path
// with '/' turned into '_' (api_v1.json, apis_apps_v1.json), as in
// api/openapi/1.35.
// Thread-safety: immutable after Load; share freely.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop::simkube {

class OpenApiDocs {
 public:
  static Result<std::shared_ptr<const OpenApiDocs>> Load(const std::string& dir);

  // The index document.
  const std::string& index() const { return index_; }
  // The document of "apis/apps/v1"; nullptr when there is none.
  const std::string* Find(std::string_view path) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string index_;
  std::map<std::string, std::string, std::less<>> docs_;
};

// GET /openapi/v2. The emulator has the Kubernetes schemas as OpenAPI v3
// only; kubectl reads v2 just for group versions /openapi/v3 does not list,
// i.e. kinds the server does not serve. An empty Swagger 2.0 document there
// lets it skip validating what it cannot map and say "no matches for kind",
// as it does against kube-apiserver. `protobuf`: gnostic's openapi_v2.Document
// (what client-go asks for, kOpenApiV2Protobuf), else JSON.
inline constexpr std::string_view kOpenApiV2Protobuf =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
std::string EmptyOpenApiV2(bool protobuf);

// The directory the emulator serves by default: <dir of the running
// executable>/../share/gpuop/openapi/1.35 when it exists, else the source
// tree's api/openapi/1.35 (known at build time).
std::string DefaultOpenApiDir();

}  // namespace gpuop::simkube
