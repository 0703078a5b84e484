#include "sim/cluster/podman.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "base/files.h"
#include "base/process.h"
#include "base/strings.h"

extern char** environ;

namespace gpuop::simcluster {
namespace {

constexpr const char* kNodeLabel = "gpuop.sim/node";

// Whether podman's answer says the container or image is not there.
bool SaysNoSuch(const std::string& text) {
  std::string t = ToLower(text);
  return t.find("no such container") != std::string::npos || t.find("no such object") != std::string::npos ||
         t.find("image not known") != std::string::npos;
}

std::string FirstLines(const std::string& text) {
  std::string t(Trim(text));
  if (t.size() > 2000) t = t.substr(0, 2000) + "...";
  return t;
}

// Podman reports an unset time as Go's zero time.
std::string TimeOrEmpty(const nlohmann::json& state, const char* key) {
  auto it = state.find(key);
  if (it == state.end() || !it->is_string()) return "";
  std::string t = it->get<std::string>();
  return StartsWith(t, "0001-01-01") ? "" : t;
}

void AppendAll(int fd, std::string* out) {
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    out->append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

Result<Podman> Podman::Create(Options options) {
  if (options.state_dir.empty()) return InvalidArgument("podman for node " + options.node_name + ": no state dir");
  GPUOP_RETURN_IF_ERROR(MakeDirs(options.state_dir));
  // crun and podman's default ulimits fail on setrlimit on these machines.
  GPUOP_RETURN_IF_ERROR(WriteFileAtomic(options.state_dir + "/containers.conf",
                                        "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\n"));
  for (const auto& [src, dst] : options.node_binds) {
    if (src.empty() || dst.empty() || dst[0] != '/') {
      return InvalidArgument("podman for node " + options.node_name + ": bad node bind \"" + src + "\" → \"" + dst +
                             "\"");
    }
    GPUOP_RETURN_IF_ERROR(MakeDirs(src));
  }
  return Podman(std::move(options));
}

Result<Podman::Output> Podman::Call(const std::vector<std::string>& args, std::chrono::seconds timeout,
                                    bool merge_stderr) const {
  // Everything the child needs is built before it starts: it shares this
  // process's memory and may only make system calls (SpawnChild).
  for (const auto& bind : options_.node_binds) GPUOP_RETURN_IF_ERROR(MakeDirs(bind.second));
  std::vector<std::string> argv = {options_.podman, "--runtime", "runc"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    if (!StartsWith(*e, "CONTAINERS_CONF=")) env.emplace_back(*e);
  }
  env.push_back("CONTAINERS_CONF=" + options_.state_dir + "/containers.conf");
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::vector<std::pair<const char*, const char*>> binds;
  for (const auto& [src, dst] : options_.node_binds) binds.emplace_back(src.c_str(), dst.c_str());

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Internal("pipe: " + ErrnoText(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return Internal("pipe: " + ErrnoText(errno));
  }
  Result<pid_t> child = SpawnChild([&] {
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(merge_stderr ? out_pipe[1] : err_pipe[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    auto die = [](const char* what) {
      (void)!::write(STDERR_FILENO, what, std::strlen(what));
      const char* e = ::strerrordesc_np(errno);  // no locale, no allocation
      if (e != nullptr) (void)!::write(STDERR_FILENO, e, std::strlen(e));
      (void)!::write(STDERR_FILENO, "\n", 1);
      ::_exit(126);
    };
    if (!binds.empty()) {
      if (::unshare(CLONE_NEWNS) != 0) die("gpuop: unshare(CLONE_NEWNS): ");
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die("gpuop: making / private: ");
      for (const auto& [src, dst] : binds) {
        if (::mount(src, dst, nullptr, MS_BIND | MS_REC, nullptr) != 0) die("gpuop: bind mount of a node path: ");
      }
    }
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    die("gpuop: exec podman: ");
  });
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (!child.ok()) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return child.status();
  }
  const pid_t pid = *child;
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  Output result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  int wstatus = 0;
  // Wait for podman itself, not for EOF: the conmon it leaves behind for a
  // detached container may hold the pipes open.
  for (;;) {
    pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      return Internal("waitpid podman: " + ErrnoText(errno));
    }
    if (!timed_out && std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    ::poll(fds, 2, 20);
    AppendAll(out_pipe[0], &result.out);
    AppendAll(err_pipe[0], &result.err);
  }
  AppendAll(out_pipe[0], &result.out);
  AppendAll(err_pipe[0], &result.err);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  result.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  if (timed_out) {
    return DeadlineExceeded("podman " + (args.empty() ? std::string() : args[0]) + " on node " +
                            options_.node_name + " did not finish within " + std::to_string(timeout.count()) +
                            "s and was killed");
  }
  return result;
}

Result<std::vector<std::string>> Podman::RunArgs(const ContainerPlan& plan, const std::string& name,
                                                 const std::string& log_path,
                                                 const std::map<std::string, std::string>& labels) const {
  auto unsupported = [&](const std::string& field, const std::string& why) {
    return InvalidArgument("container " + plan.name + " (" + name + "): " + field + " cannot be run by podman: " + why);
  };
  if (plan.image.empty()) return unsupported("image", "empty");
  if (options_.netns.empty()) {
    return FailedPrecondition("podman for node " + options_.node_name +
                              " has no network namespace: it cannot run containers");
  }
  std::vector<std::string> a = {"run",         "--detach",   "--name", name,        "--pull", "never",
                                "--network",   "ns:/var/run/netns/" + options_.netns,      "--systemd", "false",
                                "--log-driver", "k8s-file", "--log-opt", "path=" + log_path};
  if (log_path.empty() || log_path[0] != '/') return unsupported("log path", "must be absolute");
  if (!plan.hostname.empty()) a.insert(a.end(), {"--hostname", plan.hostname});
  if (plan.host_pid) a.insert(a.end(), {"--pid", "host"});
  if (plan.host_ipc) a.insert(a.end(), {"--ipc", "host"});
  if (plan.privileged) a.push_back("--privileged");
  if (plan.read_only_root) a.insert(a.end(), {"--read-only", "--read-only-tmpfs=false"});
  if (plan.no_new_privileges) a.insert(a.end(), {"--security-opt", "no-new-privileges"});
  if (plan.seccomp_unconfined) a.insert(a.end(), {"--security-opt", "seccomp=unconfined"});
  for (const auto& c : plan.cap_add) a.insert(a.end(), {"--cap-add", c});
  for (const auto& c : plan.cap_drop) a.insert(a.end(), {"--cap-drop", c});
  if (plan.run_as_user) {
    std::string user = std::to_string(*plan.run_as_user);
    if (plan.run_as_group) user += ":" + std::to_string(*plan.run_as_group);
    a.insert(a.end(), {"--user", user});
  } else if (plan.run_as_group) {
    return unsupported("securityContext.runAsGroup", "runAsGroup without runAsUser (the image's user) is not supported");
  }
  for (int64_t g : plan.supplemental_groups) a.insert(a.end(), {"--group-add", std::to_string(g)});
  if (!plan.working_dir.empty()) a.insert(a.end(), {"--workdir", plan.working_dir});
  for (const auto& m : plan.mounts) {
    if (m.source.find(',') != std::string::npos || m.target.find(',') != std::string::npos) {
      return unsupported("volumeMounts " + m.target, "a path with a comma");
    }
    if (m.target.empty() || m.target[0] != '/') return unsupported("volumeMounts " + m.target, "not an absolute path");
    if (!m.propagation.empty() && m.propagation != "rslave" && m.propagation != "rshared" &&
        m.propagation != "rprivate") {
      return unsupported("volumeMounts " + m.target + " propagation", m.propagation);
    }
    std::string spec = "type=bind,source=" + m.source + ",destination=" + m.target;
    if (m.read_only) spec += ",ro=true";
    if (!m.propagation.empty()) spec += ",bind-propagation=" + m.propagation;
    a.insert(a.end(), {"--mount", spec});
  }
  for (const auto& d : plan.devices) a.insert(a.end(), {"--device", d});
  for (const auto& d : plan.cdi_devices) {
    if (d.find('=') == std::string::npos) return unsupported("CDI device " + d, "not a fully-qualified CDI name");
    a.insert(a.end(), {"--device", d});
  }
  for (const auto& [k, v] : plan.env) {
    if (k.empty() || k.find('=') != std::string::npos) return unsupported("env " + k, "not a variable name");
    a.insert(a.end(), {"--env", k + "=" + v});
  }
  std::map<std::string, std::string> all_labels = labels;
  all_labels[kNodeLabel] = options_.node_name;
  for (const auto& [k, v] : all_labels) a.insert(a.end(), {"--label", k + "=" + v});
  for (const auto& [k, v] : plan.annotations) a.insert(a.end(), {"--annotation", k + "=" + v});
  if (!plan.command.empty()) {
    nlohmann::json entry = plan.command;
    a.insert(a.end(), {"--entrypoint", entry.dump()});
  }
  a.push_back(plan.image);
  a.insert(a.end(), plan.args.begin(), plan.args.end());
  return a;
}

Result<std::string> Podman::Run(const ContainerPlan& plan, const std::string& name, const std::string& log_path,
                                const std::map<std::string, std::string>& labels) const {
  GPUOP_ASSIGN_OR_RETURN(auto args, RunArgs(plan, name, log_path, labels));
  GPUOP_RETURN_IF_ERROR(MakeDirs(DirName(log_path)));
  GPUOP_ASSIGN_OR_RETURN(Output r, Call(args));
  if (r.status != 0) {
    std::string msg = FirstLines(r.err.empty() ? r.out : r.err);
    std::string what = "starting container " + name + " (image " + plan.image + ") on node " + options_.node_name +
                       ": " + msg;
    if (msg.find("already in use") != std::string::npos) return AlreadyExists(what);
    // A container that was created but failed to start stays "created" with
    // no trace of why: remove it, the error is the record.
    (void)Remove(name);
    if (SaysNoSuch(msg)) return NotFound(what);
    if (msg.find("OCI runtime") != std::string::npos || msg.find("runc create failed") != std::string::npos) {
      return FailedPrecondition(what);
    }
    return Unavailable(what);
  }
  auto lines = Split(r.out, '\n');
  if (lines.empty()) return Internal("podman run for " + name + " printed no container id");
  return std::string(Trim(lines.back()));
}

Result<Podman::State> Podman::Inspect(const std::string& name) const {
  GPUOP_ASSIGN_OR_RETURN(Output r, Call({"container", "inspect", "--format", "json", name}));
  if (r.status != 0) {
    std::string msg = FirstLines(r.err + r.out);
    if (SaysNoSuch(msg)) return NotFound("container " + name + " does not exist on node " + options_.node_name);
    return Unavailable("inspecting container " + name + ": " + msg);
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    return Internal("podman inspect " + name + " printed no JSON: " + e.what());
  }
  if (!doc.is_array() || doc.empty()) return NotFound("container " + name + " does not exist on node " + options_.node_name);
  const auto& s = doc[0].value("State", nlohmann::json::object());
  State st;
  st.running = s.value("Running", false);
  st.exit_code = s.value("ExitCode", 0);
  st.started_at = TimeOrEmpty(s, "StartedAt");
  st.finished_at = TimeOrEmpty(s, "FinishedAt");
  st.error = s.value("Error", "");
  st.oom_killed = s.value("OOMKilled", false);
  st.pid = s.value("Pid", 0);
  return st;
}

Status Podman::Signal(const std::string& name, int signal) const {
  GPUOP_ASSIGN_OR_RETURN(Output r, Call({"kill", "--signal", std::to_string(signal), name}));
  if (r.status != 0) {
    std::string msg = FirstLines(r.err + r.out);
    if (SaysNoSuch(msg)) return NotFound("container " + name + " does not exist on node " + options_.node_name);
    return FailedPrecondition("signal " + std::to_string(signal) + " to container " + name + ": " + msg);
  }
  return Status::Ok();
}

Status Podman::Remove(const std::string& name) const {
  GPUOP_ASSIGN_OR_RETURN(Output r, Call({"rm", "--force", "--ignore", "--time", "0", name}));
  if (r.status != 0) {
    std::string msg = FirstLines(r.err + r.out);
    if (SaysNoSuch(msg)) return Status::Ok();
    return Unavailable("removing container " + name + " on node " + options_.node_name + ": " + msg);
  }
  return Status::Ok();
}

Result<std::pair<int, std::string>> Podman::Exec(const std::string& name, const std::vector<std::string>& cmd,
                                                 std::chrono::seconds timeout) const {
  if (cmd.empty()) return InvalidArgument("exec in container " + name + ": empty command");
  std::vector<std::string> args = {"exec", name};
  args.insert(args.end(), cmd.begin(), cmd.end());
  GPUOP_ASSIGN_OR_RETURN(Output r, Call(args, timeout, /*merge_stderr=*/true));
  // podman exec exits 125 when it could not exec at all (no such container,
  // not running); 126/127 are the command's own "cannot run"/"not found".
  if (r.status == 125) {
    if (SaysNoSuch(r.out)) return NotFound("container " + name + " does not exist on node " + options_.node_name);
    return FailedPrecondition("exec in container " + name + ": " + FirstLines(r.out));
  }
  return std::make_pair(r.status, r.out);
}

Result<bool> Podman::ImageExists(const std::string& image) const {
  GPUOP_ASSIGN_OR_RETURN(Output r, Call({"image", "exists", image}));
  if (r.status == 0) return true;
  if (r.status == 1) return false;
  return Unavailable("checking image " + image + ": " + FirstLines(r.err + r.out));
}

Result<std::vector<std::string>> Podman::ListContainers(const std::map<std::string, std::string>& label_filter) const {
  std::vector<std::string> args = {"ps", "--all", "--format", "{{.Names}}"};
  for (const auto& [k, v] : label_filter) args.insert(args.end(), {"--filter", "label=" + k + "=" + v});
  GPUOP_ASSIGN_OR_RETURN(Output r, Call(args));
  if (r.status != 0) return Unavailable("listing containers of node " + options_.node_name + ": " + FirstLines(r.err));
  std::vector<std::string> names;
  for (const auto& line : Split(r.out, '\n')) {
    std::string n(Trim(line));
    if (!n.empty()) names.push_back(n);
  }
  return names;
}

}  // namespace gpuop::simcluster
