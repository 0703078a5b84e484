// Manager: runs the parts of one long-running gpuop process and owns their
// order, as controller-runtime's manager does. A command parses its flags,
// builds its components, adds each as a runnable (a function that works until
// its stop_token is requested) and hands the process to Run, which:
//   1. serves /healthz and /readyz (and /metrics, when asked) so probes see
//      the process from its start;
//   2. starts the runnables in the order added, each on a thread of its own;
//   3. with leader election, contends for the Lease and starts the runnables
//      that need leadership only while this process leads (the caches of the
//      others are already filling, so a new leader acts at once);
//   4. waits for SIGTERM/SIGINT (SIGHUP calls on_hangup), a runnable's error
//      or the loss of the Lease;
//   5. stops in reverse: the leader's runnables and the election (releasing
//      the Lease), the other runnables last-added first, the servers, and
//      flushes the Events recorded on the way out.
// Exit code: 0 after a stop request, 1 when a server cannot start, a runnable
// fails or the Lease is lost (the Deployment restarts the process, which
// contends anew, like controller-runtime).
//
// Thread-safety: Add* before Run, from one thread. Run once. Leading() from any
// thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "base/signals.h"
#include "base/status.h"
#include "http/server.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/leader_election.h"

namespace gpuop::manager {

// Works until `stop` is requested, then returns Ok. An error ends the process
// (exit 1); returning Ok early ends only this runnable.
using RunFunction = std::function<Status(std::stop_token stop)>;
// A health or readiness check: Ok, or why not.
using Check = std::function<Status()>;

struct ManagerOptions {
  // The component ("operator"): its errors on stderr read "gpuop operator: ...",
  // its log says "operator serving" with the servers' addresses.
  std::string name;
  // /healthz, /readyz and AddRoute's paths; "": none.
  std::string health_addr;
  std::string health_flag = "--health-addr";  // names the address in a bind error
  // /metrics, from `metrics` plus the servers' connection counters; "": none.
  std::string metrics_addr;
  std::string metrics_flag = "--metrics-addr";
  std::function<std::string()> metrics;
  // Set: runnables added with needs_leader run only while this process holds
  // the Lease. `lease_client` (its own, so lease writes queue behind no other
  // request) must outlive the manager.
  std::optional<kube::LeaderElectionConfig> leader_election;
  kube::Client* lease_client = nullptr;
  // Flushed (for up to 2 s) once every runnable has stopped.
  kube::EventRecorder* events = nullptr;
  // SIGHUP, where Run(StopSignals&) was given signals that include it.
  std::function<void()> on_hangup;
};

class Manager {
 public:
  explicit Manager(ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  void Add(std::string name, RunFunction run, bool needs_leader = false);
  // /healthz answers 200 "ok" while every health check is Ok, else 503 with
  // the first failing check's name and message; /readyz likewise.
  void AddHealthCheck(std::string name, Check check);
  void AddReadyCheck(std::string name, Check check);
  // Another GET path on the health server (debug pages).
  void AddRoute(std::string path, http::Handler handler);

  // Runs the process as the header describes until `stop` is requested.
  int Run(std::stop_token stop);
  // Until SIGTERM or SIGINT; SIGHUP calls on_hangup.
  int Run(StopSignals& signals);

  // Whether the leader's runnables run now (always, once started, without
  // leader election): a follower is ready to take over, a leader once synced.
  bool Leading() const { return leading_.load(); }
  // The servers' addresses once Run has started them ("" when off): tests
  // that bind port 0.
  std::string health_address() const;
  std::string metrics_address() const;

 private:
  struct Runnable {
    std::string name;
    RunFunction run;
    bool needs_leader;
  };
  struct NamedCheck {
    std::string name;
    Check check;
  };

  Status StartServers();
  http::Response Answer(const std::vector<NamedCheck>& checks) const;
  // Runs `r` to its end; an error asks the whole process to stop.
  void RunOne(const Runnable& r, std::stop_token stop);
  void LeadUntil(std::stop_token lead);

  const ManagerOptions options_;
  std::vector<Runnable> runnables_;
  std::vector<NamedCheck> health_checks_, ready_checks_;
  std::map<std::string, http::Handler> routes_;
  http::ConnectionCounters metrics_connections_, health_connections_;
  std::unique_ptr<http::Server> health_server_, metrics_server_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> stopping_{false};
  std::stop_source failure_;  // requested by the first runnable that fails
};

}  // namespace gpuop::manager
