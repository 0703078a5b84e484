#include "sim/kube/openapi.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/files.h"
#include "base/strings.h"
#include "sim/kube/discovery.h"

#ifndef GPUOP_SOURCE_OPENAPI_DIR
#define GPUOP_SOURCE_OPENAPI_DIR ""
#endif

namespace gpuop::simkube {
namespace {

std::string HashHex(const std::string& data) {
  uint64_t a = 1469598103934665603ull, b = 0x9e3779b97f4a7c15ull;
  for (unsigned char c : data) {
    a = (a ^ c) * 1099511628211ull;
    b = (b + c) * 0xff51afd7ed558ccdull;
  }
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llX%016llX", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace

Result<std::shared_ptr<const OpenApiDocs>> OpenApiDocs::Load(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return NotFound("OpenAPI directory " + dir +
                    " cannot be read; pass --openapi-dir with the api/openapi/1.35 directory");
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (EndsWith(n, ".json")) names.push_back(n);
  }
  ::closedir(d);
  if (names.empty()) return NotFound("OpenAPI directory " + dir + " holds no *.json documents");
  auto docs = std::make_shared<OpenApiDocs>();
  docs->dir_ = dir;
  nlohmann::json paths = nlohmann::json::object();
  for (const auto& n : names) {
    GPUOP_ASSIGN_OR_RETURN(std::string content, ReadFile(dir + "/" + n));
    std::string path = n.substr(0, n.size() - 5);
    for (char& c : path) {
      if (c == '_') c = '/';
    }
    paths[path] = {{"serverRelativeURL", "/openapi/v3/" + path + "?hash=" + HashHex(content)}};
    docs->docs_[path] = std::move(content);
  }
  docs->index_ = nlohmann::json{{"paths", std::move(paths)}}.dump();
  return std::shared_ptr<const OpenApiDocs>(std::move(docs));
}

const std::string* OpenApiDocs::Find(std::string_view path) const {
  auto it = docs_.find(path);
  return it == docs_.end() ? nullptr : &it->second;
}

std::string EmptyOpenApiV2(bool protobuf) {
  constexpr std::string_view kTitle = "Kubernetes";
  constexpr std::string_view kVersion = kKubeGitVersion;
  if (!protobuf) {
    return R"({"swagger":"2.0","info":{"title":")" + std::string(kTitle) + R"(","version":")" +
           std::string(kVersion) + R"("},"paths":{},"definitions":{}})";
  }
  // Document{swagger=1: "2.0", info=2: Info{title=1, version=2}}; every
  // length is under 128, so each fits one varint byte.
  auto field = [](char tag, std::string_view bytes) {
    return std::string(1, tag) + static_cast<char>(bytes.size()) + std::string(bytes);
  };
  std::string info = field('\x0a', kTitle) + field('\x12', kVersion);
  return field('\x0a', "2.0") + field('\x12', info);
}

std::string DefaultOpenApiDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    std::string exe(buf, static_cast<size_t>(n));
    std::string dir = exe.substr(0, exe.rfind('/'));
    std::string installed = dir + "/../share/gpuop/openapi/1.35";
    if (PathExists(installed)) return installed;
  }
  return GPUOP_SOURCE_OPENAPI_DIR;
}

}  // namespace gpuop::simkube
