#include "kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <optional>
#include <vector>

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::kube {
namespace {

constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

std::string EnvOr(const char* name, std::string fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::move(fallback);
}

// Relative paths in a kubeconfig are relative to the file's directory.
std::string ResolvePath(const std::string& kubeconfig_path, const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  return DirName(kubeconfig_path) + "/" + p;
}

// Scalar field of a map node, "" when absent.
Result<std::string> YamlStringField(const YAML::Node& node, const char* key,
                                    const std::string& where) {
  YAML::Node v = node[key];
  if (!v || v.IsNull()) return std::string();
  if (!v.IsScalar()) return InvalidArgument(where + ": " + key + " is not a string");
  return v.Scalar();
}

Result<bool> BoolField(const YAML::Node& node, const char* key, const std::string& where) {
  YAML::Node v = node[key];
  if (!v || v.IsNull()) return false;
  bool out = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, out)) {
    return InvalidArgument(where + ": " + key + " is not true or false");
  }
  return out;
}

// The `inner` map of the entry named `name` in a list like
// clusters: [{name: x, cluster: {...}}]; nullopt when there is none.
Result<std::optional<YAML::Node>> FindNamed(const YAML::Node& root, const char* list_key,
                                            const char* inner_key, const std::string& name,
                                            const std::string& where) {
  YAML::Node list = root[list_key];
  if (!list || list.IsNull()) return std::optional<YAML::Node>();
  if (!list.IsSequence()) return InvalidArgument(where + ": " + list_key + " is not a list");
  for (const auto& entry : list) {
    if (!entry.IsMap()) continue;
    YAML::Node n = entry["name"];
    if (n && n.IsScalar() && n.Scalar() == name) {
      YAML::Node inner = entry[inner_key];
      if (!inner || inner.IsNull())
        return std::optional<YAML::Node>(YAML::Node(YAML::NodeType::Map));
      if (!inner.IsMap()) {
        return InvalidArgument(where + ": " + list_key + " entry " + JsonQuote(name) + " has a " +
                               inner_key + " that is not a map");
      }
      return std::optional<YAML::Node>(inner);
    }
  }
  return std::optional<YAML::Node>();
}

std::vector<std::string> NamesIn(const YAML::Node& root, const char* list_key) {
  std::vector<std::string> names;
  YAML::Node list = root[list_key];
  if (!list || !list.IsSequence()) return names;
  for (const auto& entry : list) {
    if (entry.IsMap() && entry["name"] && entry["name"].IsScalar()) {
      names.push_back(entry["name"].Scalar());
    }
  }
  return names;
}

// Reads PEM material given inline (base64 `data_key`) or as a file (`file_key`).
// Returns "" when neither is set.
Result<std::string> LoadPem(const YAML::Node& node, const char* file_key, const char* data_key,
                            const std::string& kubeconfig_path, const std::string& where) {
  GPUOP_ASSIGN_OR_RETURN(std::string data, YamlStringField(node, data_key, where));
  if (!data.empty()) {
    auto decoded = Base64Decode(data);
    if (!decoded) {
      return InvalidArgument(where + ": " + data_key +
                             " is not valid base64; encode the PEM file with `base64 -w0`");
    }
    return *decoded;
  }
  GPUOP_ASSIGN_OR_RETURN(std::string file, YamlStringField(node, file_key, where));
  if (file.empty()) return std::string();
  std::string path = ResolvePath(kubeconfig_path, file);
  auto content = ReadFile(path);
  if (!content.ok()) {
    return Status(content.status().code(), where + ": " + file_key + " " + path + ": " +
                                               content.status().message() +
                                               "; fix the path or use " + data_key);
  }
  return std::move(content).value();
}

Status ParseCluster(const YAML::Node& cluster, const std::string& path, const std::string& where,
                    RestConfig& out) {
  GPUOP_ASSIGN_OR_RETURN(out.server, YamlStringField(cluster, "server", where));
  while (!out.server.empty() && out.server.back() == '/') out.server.pop_back();
  if (out.server.empty()) {
    return InvalidArgument(where +
                           " has no server; set clusters[].cluster.server to the API "
                           "server URL, e.g. https://10.0.0.1:6443");
  }
  GPUOP_ASSIGN_OR_RETURN(out.ca_pem, LoadPem(cluster, "certificate-authority",
                                             "certificate-authority-data", path, where));
  GPUOP_ASSIGN_OR_RETURN(out.insecure_skip_tls_verify,
                         BoolField(cluster, "insecure-skip-tls-verify", where));
  return Status::Ok();
}

Status ParseUser(const YAML::Node& user, const std::string& path, const std::string& where,
                 RestConfig& out) {
  GPUOP_ASSIGN_OR_RETURN(out.client_cert_pem, LoadPem(user, "client-certificate",
                                                      "client-certificate-data", path, where));
  GPUOP_ASSIGN_OR_RETURN(out.client_key_pem,
                         LoadPem(user, "client-key", "client-key-data", path, where));
  if (out.client_cert_pem.empty() != out.client_key_pem.empty()) {
    return InvalidArgument(
        where + " has a client " +
        (out.client_cert_pem.empty() ? "key but no certificate" : "certificate but no key") +
        "; set both client-certificate(-data) and client-key(-data)");
  }
  GPUOP_ASSIGN_OR_RETURN(out.token, YamlStringField(user, "token", where));
  GPUOP_ASSIGN_OR_RETURN(std::string token_file, YamlStringField(user, "tokenFile", where));
  if (!token_file.empty()) {
    out.token_file = ResolvePath(path, token_file);
    auto token = ReadFile(out.token_file);
    if (!token.ok()) {
      return Status(token.status().code(),
                    where + ": tokenFile " + out.token_file + ": " + token.status().message());
    }
    out.token = std::string(Trim(*token));
  }
  bool has_credentials = !out.token.empty() || !out.client_cert_pem.empty();
  if (!has_credentials) {
    for (const char* plugin : {"exec", "auth-provider"}) {
      if (user[plugin] && !user[plugin].IsNull()) {
        return NotSupported(where + " authenticates with an " + plugin +
                            " plugin, which gpuop does not run; use a kubeconfig with a token, "
                            "tokenFile or client certificate (e.g. for a service account)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFound("kubeconfig " + path +
                      " does not exist; pass --kubeconfig with an existing file or set KUBECONFIG");
    }
    return text.status().Annotate("reading kubeconfig " + path);
  }
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig " + path + " is not valid YAML: " + e.what());
  }
  if (!root.IsMap()) {
    return InvalidArgument("kubeconfig " + path +
                           " is not a kubeconfig (expected a map with "
                           "clusters, users, contexts)");
  }
  try {
    const std::string file_where = "kubeconfig " + path;
    std::string context_name = context;
    if (context_name.empty()) {
      GPUOP_ASSIGN_OR_RETURN(context_name, YamlStringField(root, "current-context", file_where));
      if (context_name.empty()) {
        return InvalidArgument(file_where +
                               " has no current-context; pass --context NAME or run `kubectl "
                               "config use-context NAME` (contexts: " +
                               Join(NamesIn(root, "contexts"), ", ") + ")");
      }
    }
    const std::string where = file_where + " context " + JsonQuote(context_name);
    GPUOP_ASSIGN_OR_RETURN(auto ctx, FindNamed(root, "contexts", "context", context_name, where));
    if (!ctx) {
      std::vector<std::string> names = NamesIn(root, "contexts");
      return NotFound(file_where + " has no context " + JsonQuote(context_name) +
                      " (it has: " + (names.empty() ? std::string("none") : Join(names, ", ")) +
                      "); pass one of them with --context");
    }
    GPUOP_ASSIGN_OR_RETURN(std::string cluster_name, YamlStringField(*ctx, "cluster", where));
    GPUOP_ASSIGN_OR_RETURN(std::string user_name, YamlStringField(*ctx, "user", where));
    GPUOP_ASSIGN_OR_RETURN(std::string ns, YamlStringField(*ctx, "namespace", where));

    RestConfig out;
    out.source = where;
    if (!ns.empty()) out.namespace_ = ns;
    if (cluster_name.empty()) {
      return InvalidArgument(where + " names no cluster; set contexts[].context.cluster");
    }
    GPUOP_ASSIGN_OR_RETURN(auto cluster,
                           FindNamed(root, "clusters", "cluster", cluster_name, where));
    if (!cluster) {
      return NotFound(where + " names cluster " + JsonQuote(cluster_name) +
                      ", which the file does not define; add it under clusters or fix the context");
    }
    GPUOP_RETURN_IF_ERROR(
        ParseCluster(*cluster, path, file_where + " cluster " + JsonQuote(cluster_name), out));
    if (!user_name.empty()) {
      GPUOP_ASSIGN_OR_RETURN(auto user, FindNamed(root, "users", "user", user_name, where));
      if (!user) {
        return NotFound(where + " names user " + JsonQuote(user_name) +
                        ", which the file does not define; add it under users or fix the context");
      }
      GPUOP_RETURN_IF_ERROR(
          ParseUser(*user, path, file_where + " user " + JsonQuote(user_name), out));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig " + path + " is malformed: " + e.what());
  }
}

Result<RestConfig> InClusterConfig(const std::string& root) {
  std::string host = EnvOr("KUBERNETES_SERVICE_HOST");
  std::string port = EnvOr("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return FailedPrecondition(
        "not running in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
        "are not both set; pass --kubeconfig to reach a cluster from outside");
  }
  auto port_number = ParseUint(port);
  if (!port_number || *port_number == 0 || *port_number > 65535) {
    return InvalidArgument("KUBERNETES_SERVICE_PORT=" + port + " is not a port number");
  }
  // An IPv6 service address goes in brackets in a URL.
  bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  RestConfig out;
  out.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;

  const std::string dir = root + kServiceAccountDir;
  out.source = "in-cluster service account " + dir;
  out.token_file = dir + "/token";
  auto token = ReadFile(out.token_file);
  if (!token.ok()) {
    return Status(token.status().code(),
                  "in-cluster configuration: " + token.status().message() +
                      "; the pod needs a service account token (automountServiceAccountToken "
                      "must not be false)");
  }
  out.token = std::string(Trim(*token));
  if (out.token.empty()) {
    return InvalidArgument("in-cluster configuration: " + out.token_file + " is empty");
  }
  auto ca = ReadFile(dir + "/ca.crt");
  if (!ca.ok()) {
    return Status(ca.status().code(),
                  "in-cluster configuration: " + ca.status().message() +
                      "; the service account volume should hold ca.crt next to the token");
  }
  out.ca_pem = std::move(ca).value();
  // The namespace file is optional (older clusters, custom projections).
  if (auto ns = ReadFile(dir + "/namespace"); ns.ok() && !Trim(*ns).empty()) {
    out.namespace_ = std::string(Trim(*ns));
  }
  return out;
}

Result<RestConfig> LoadRestConfig(const KubeconfigOptions& options) {
  if (!options.path.empty()) return LoadKubeconfig(options.path, options.context);
  if (!EnvOr("KUBERNETES_SERVICE_HOST").empty() && !EnvOr("KUBERNETES_SERVICE_PORT").empty() &&
      options.context.empty()) {
    return InClusterConfig();
  }
  std::string env = EnvOr("KUBECONFIG");
  if (!env.empty()) {
    std::vector<std::string> paths = Split(env, ':');
    for (const auto& p : paths) {
      if (PathExists(p)) return LoadKubeconfig(p, options.context);
    }
    return NotFound("none of the files in KUBECONFIG=" + env +
                    " exists; fix KUBECONFIG or pass --kubeconfig");
  }
  std::string home = EnvOr("HOME");
  if (!home.empty()) {
    std::string path = home + "/.kube/config";
    if (PathExists(path)) return LoadKubeconfig(path, options.context);
  }
  return NotFound(
      "no Kubernetes configuration found: not in a pod (KUBERNETES_SERVICE_HOST unset), "
      "KUBECONFIG unset and no ~/.kube/config (HOME=" +
      home + "); pass --kubeconfig FILE");
}

}  // namespace gpuop::kube
