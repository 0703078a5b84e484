#include "manager/manager.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/log.h"

namespace gpuop::manager {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;

// Runs `run` on a thread with a stop source of its own, so the manager can
// stop its runnables one at a time, in the order it chooses.
struct Worker {
  std::stop_source stop;
  std::thread thread;
};

}  // namespace

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {}
Manager::~Manager() = default;

void Manager::Add(std::string name, RunFunction run, bool needs_leader) {
  runnables_.push_back({std::move(name), std::move(run), needs_leader});
}

void Manager::AddHealthCheck(std::string name, Check check) {
  health_checks_.push_back({std::move(name), std::move(check)});
}

void Manager::AddReadyCheck(std::string name, Check check) {
  ready_checks_.push_back({std::move(name), std::move(check)});
}

void Manager::AddRoute(std::string path, http::Handler handler) {
  routes_[std::move(path)] = std::move(handler);
}

std::string Manager::health_address() const {
  return health_server_ ? health_server_->address() : "";
}

std::string Manager::metrics_address() const {
  return metrics_server_ ? metrics_server_->address() : "";
}

http::Response Manager::Answer(const std::vector<NamedCheck>& checks) const {
  for (const NamedCheck& c : checks) {
    if (Status s = c.check(); !s.ok()) {
      return http::Response{.status = 503, .body = c.name + ": " + s.message()};
    }
  }
  return http::Response{.body = "ok"};
}

Status Manager::StartServers() {
  if (!options_.health_addr.empty()) {
    auto routes = routes_;
    routes["/healthz"] = [this] { return Answer(health_checks_); };
    routes["/readyz"] = [this] { return Answer(ready_checks_); };
    GPUOP_ASSIGN_OR_RETURN(
        health_server_, http::Server::Start(options_.health_addr, options_.health_flag,
                                            std::move(routes), {.counters = &health_connections_}));
  }
  if (!options_.metrics_addr.empty()) {
    auto metrics = [this] {
      std::string body = options_.metrics ? options_.metrics() : "";
      body += http::ConnectionMetrics(
          {{"metrics", &metrics_connections_}, {"health", &health_connections_}});
      return http::Response{.content_type = "text/plain; version=0.0.4; charset=utf-8",
                            .body = std::move(body)};
    };
    GPUOP_ASSIGN_OR_RETURN(
        metrics_server_,
        http::Server::Start(options_.metrics_addr, options_.metrics_flag, {{"/metrics", metrics}},
                            {.counters = &metrics_connections_}));
  }
  if (health_server_ || metrics_server_) {
    LogInfo(options_.name + " serving",
            {{"health", health_server_ ? health_server_->address() : "off"},
             {"metrics", metrics_server_ ? metrics_server_->address() : "off"}});
  }
  return Status::Ok();
}

void Manager::RunOne(const Runnable& r, std::stop_token stop) {
  Status s = r.run(stop);
  if (s.ok()) return;
  LogError(r.name + " failed; stopping the process", {{"error", s}});
  failed_ = true;
  failure_.request_stop();
}

void Manager::LeadUntil(std::stop_token lead) {
  leading_ = true;
  LogInfo("leading: starting the controllers");
  std::vector<std::thread> threads;
  for (const Runnable& r : runnables_) {
    if (r.needs_leader) threads.emplace_back([this, &r, lead] { RunOne(r, lead); });
  }
  // `lead` stops them all at once: the Lease is gone or the process stops.
  for (auto it = threads.rbegin(); it != threads.rend(); ++it) it->join();
}

int Manager::Run(std::stop_token stop) {
  auto fail = [this](const Status& s) {
    std::fprintf(stderr, "gpuop %s: %s\n", options_.name.c_str(), s.message().c_str());
    return kExitFailure;
  };
  std::unique_ptr<kube::LeaderElector> elector;
  if (options_.leader_election) {
    if (options_.lease_client == nullptr) {
      return fail(InvalidArgument("leader election without a client for the Lease"));
    }
    kube::LeaderCallbacks callbacks;
    callbacks.on_started_leading = [this](std::stop_token lead) { LeadUntil(lead); };
    callbacks.on_stopped_leading = [this] {
      leading_ = false;
      if (stopping_) return;
      LogError("lost the leader lease; exiting so a fresh process contends again");
      failed_ = true;
      failure_.request_stop();
    };
    auto e = kube::LeaderElector::New(*options_.lease_client, *options_.leader_election,
                                      std::move(callbacks));
    if (!e.ok()) return fail(e.status());
    elector = std::move(e).value();
  }
  if (Status s = StartServers(); !s.ok()) return fail(s);

  // The process stops on the caller's request or a runnable's failure.
  std::stop_source done;
  std::stop_callback on_stop(stop, [&done] { done.request_stop(); });
  std::stop_callback on_failure(failure_.get_token(), [&done] { done.request_stop(); });

  std::vector<std::unique_ptr<Worker>> workers;
  for (const Runnable& r : runnables_) {
    if (r.needs_leader && elector) continue;
    auto w = std::make_unique<Worker>();
    w->thread = std::thread([this, &r, token = w->stop.get_token()] { RunOne(r, token); });
    workers.push_back(std::move(w));
  }
  std::stop_source election;
  std::thread elector_thread;
  if (elector) {
    elector_thread = std::thread([&] { elector->Run(election.get_token()); });
  } else {
    leading_ = true;
  }

  WaitForStop(done.get_token());
  stopping_ = true;
  if (elector_thread.joinable()) {
    election.request_stop();  // stops the leader's runnables, then releases the Lease
    elector_thread.join();
  }
  for (auto it = workers.rbegin(); it != workers.rend(); ++it) {
    (*it)->stop.request_stop();
    (*it)->thread.join();
  }
  leading_ = false;
  metrics_server_.reset();
  health_server_.reset();
  if (options_.events) options_.events->Flush(std::chrono::seconds(2));
  return failed_ ? kExitFailure : kExitOk;
}

int Manager::Run(StopSignals& signals) {
  std::stop_source stop, finished;
  int code = kExitOk;
  std::thread runner([&] {
    code = Run(stop.get_token());
    finished.request_stop();
  });
  while (int sig = signals.Wait(finished.get_token())) {
    if (sig == SIGHUP && options_.on_hangup) {
      LogInfo("SIGHUP: reloading");
      options_.on_hangup();
      continue;
    }
    LogInfo("stopping", {{"signal", sigabbrev_np(sig)}});
    break;
  }
  stop.request_stop();
  runner.join();
  return code;
}

}  // namespace gpuop::manager
