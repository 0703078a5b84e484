// Podman: the simulated kubelet's container runtime. Runs the ContainerPlans
// of sim/cluster/pod_spec.h as real OCI containers with the podman CLI
// (`--runtime runc`, images from the local store only, never pulled).
//
// One instance per simulated node. Every podman call runs in a private mount
// namespace of its own where the node's directories are bind-mounted over the
// host's (Options::node_binds: the node's /etc/cdi and /var/run/cdi, its
// toolkit directory), so podman's CDI resolution and the OCI hooks it runs
// see that node's view. Containers join the node's network namespace
// (/var/run/netns/<netns>) and carry the label gpuop.sim/node=<node>.
//
// Plan fields podman cannot express are an error naming the field, never
// dropped. Thread-safe: no mutable state; calls may run concurrently (podman
// locks its own store).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "sim/cluster/pod_spec.h"

namespace gpuop::simcluster {

class Podman {
 public:
  struct Options {
    std::string node_name;
    std::string netns;      // name under /var/run/netns; "" only for an instance that lists and removes (Run fails)
    std::string host_root;  // the node's root
    std::string state_dir;  // where containers.conf lives (created)
    // (path on this machine, path it is mounted over) for each podman call,
    // e.g. {host_root + "/etc/cdi", "/etc/cdi"}; both are created when missing.
    std::vector<std::pair<std::string, std::string>> node_binds;
    std::string podman = "podman";  // the binary
  };

  // Writes <state_dir>/containers.conf. Error: the state dir cannot be written.
  static Result<Podman> Create(Options options);

  // Creates and starts a container (detached) from a plan. `name` is unique
  // per (pod uid, container, restart count); a container of that name left
  // from an earlier run is an AlreadyExists error. Logs go to `log_path` in
  // the CRI format (`<RFC3339Nano> stdout|stderr F|P <text>`, podman's
  // k8s-file driver). Returns the container's id. Errors: AlreadyExists (the
  // name is taken), NotFound (no such image in the local store),
  // FailedPrecondition (the runtime could not start it: the kubelet's
  // StartError, the message is runc's), Unavailable (anything else). A
  // container that failed to start is removed.
  Result<std::string> Run(const ContainerPlan& plan, const std::string& name, const std::string& log_path,
                          const std::map<std::string, std::string>& labels) const;

  struct State {
    bool running = false;
    int exit_code = 0;
    std::string started_at, finished_at;  // RFC 3339 as podman reports them; "" before start/exit
    std::string error;                    // the runtime's error (a failed start), "" when none
    bool oom_killed = false;
    int pid = 0;                          // on this machine, 0 when not running
  };
  // NotFound when no such container exists.
  Result<State> Inspect(const std::string& name) const;
  Status Signal(const std::string& name, int signal) const;
  // Stops (SIGKILL) and removes; OK when it does not exist.
  Status Remove(const std::string& name) const;
  // Runs cmd in the running container; exit code + stdout and stderr together.
  // DeadlineExceeded after `timeout` (the exec is killed).
  Result<std::pair<int, std::string>> Exec(const std::string& name, const std::vector<std::string>& cmd,
                                           std::chrono::seconds timeout) const;
  // Whether the local store has the image (the kubelet never pulls here).
  Result<bool> ImageExists(const std::string& image) const;
  // Names of the containers (running or not, of any node) with all of these
  // labels; Run labels each container gpuop.sim/node=<node name>.
  Result<std::vector<std::string>> ListContainers(const std::map<std::string, std::string>& label_filter) const;

  // The podman argv Run would use (without the podman binary and the global
  // flags): for tests and error messages. Error: a plan field podman cannot express.
  Result<std::vector<std::string>> RunArgs(const ContainerPlan& plan, const std::string& name,
                                           const std::string& log_path,
                                           const std::map<std::string, std::string>& labels) const;

  struct Output {
    int status = 0;   // exit status, 128 + signal when killed
    std::string out;  // stdout (and stderr too when merged)
    std::string err;  // stderr when not merged
  };
  // Runs `podman --runtime runc <args>` in the node's mount namespace view,
  // stdin from /dev/null. Error only when it cannot be started;
  // DeadlineExceeded when it was killed at the timeout.
  Result<Output> Call(const std::vector<std::string>& args,
                      std::chrono::seconds timeout = std::chrono::seconds(120), bool merge_stderr = false) const;

  const Options& options() const { return options_; }

 private:
  explicit Podman(Options options) : options_(std::move(options)) {}
  Options options_;
};

}  // namespace gpuop::simcluster
