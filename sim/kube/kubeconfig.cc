#include "sim/kube/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include "base/files.h"
#include "sim/kube/tls.h"

namespace gpuop::simkube {

std::string RenderKubeconfig(const KubeconfigParams& p) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "v1";
  out << YAML::Key << "kind" << YAML::Value << "Config";
  out << YAML::Key << "clusters" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << p.name;
  out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "server" << YAML::Value << p.server;
  if (!p.ca_cert_pem.empty()) {
    out << YAML::Key << "certificate-authority-data" << YAML::Value << Base64Encode(p.ca_cert_pem);
  }
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "users" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << p.name;
  out << YAML::Key << "user" << YAML::Value << YAML::BeginMap;
  if (!p.token.empty()) out << YAML::Key << "token" << YAML::Value << p.token;
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "contexts" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << p.name;
  out << YAML::Key << "context" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << p.name;
  out << YAML::Key << "user" << YAML::Value << p.name;
  if (!p.namespace_.empty()) out << YAML::Key << "namespace" << YAML::Value << p.namespace_;
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "current-context" << YAML::Value << p.name;
  out << YAML::Key << "preferences" << YAML::Value << YAML::BeginMap << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Status WriteKubeconfig(const std::string& path, const KubeconfigParams& p) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    GPUOP_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  }
  Status s = WriteFileAtomic(path, RenderKubeconfig(p), 0600);
  if (!s.ok()) return s.Annotate("writing kubeconfig " + path);
  return Status::Ok();
}

}  // namespace gpuop::simkube
