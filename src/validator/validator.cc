#include "validator/validator.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "kube/object.h"
#include "validator/checks.h"
#include "validator/workload.h"

namespace gpuop::validator {

namespace {

// One run of a component's check; the file's content when it passes.
Result<std::string> CheckOnce(const Options& o, kube::Client* client, std::stop_token stop) {
  switch (o.component) {
    case Component::kDriver: {
      GPUOP_ASSIGN_OR_RETURN(DriverInfo d, CheckDriver(o));
      LogInfo("driver validation passed", {{"node", o.node_name},
                                           {"host_driver", d.host_driver},
                                           {"driver_root", d.driver_root},
                                           {"driver_version", d.driver_version},
                                           {"gpus", d.gpus}});
      return DriverReadyContent(d);
    }
    case Component::kToolkit: {
      GPUOP_ASSIGN_OR_RETURN(unsigned gpus, CheckToolkit(o));
      LogInfo("toolkit validation passed", {{"node", o.node_name}, {"gpus", gpus}});
      return std::string();
    }
    case Component::kCuda: {
      if (!o.with_workload) {
        LogInfo("cuda validation: WITH_WORKLOAD=false, no workload pod", {{"node", o.node_name}});
        return std::string();
      }
      if (client == nullptr) {
        return FailedPrecondition(
            "cuda validation failed: no API server client for the workload pod");
      }
      GPUOP_RETURN_IF_ERROR(RunCudaWorkload(*client, o, stop));
      LogInfo("cuda validation passed", {{"node", o.node_name}});
      return std::string();
    }
    case Component::kPlugin: {
      if (client == nullptr) {
        return FailedPrecondition("plugin validation failed: no API server client to read node " +
                                  o.node_name);
      }
      GPUOP_ASSIGN_OR_RETURN(int64_t devices, WaitForPluginResources(*client, o, stop));
      if (o.with_workload) {
        auto node = client->Get(kube::resources::kNodes, "", o.node_name);
        if (!node.ok()) return node.status().Annotate("plugin validation failed");
        GPUOP_RETURN_IF_ERROR(
            RunPluginWorkload(*client, o, PluginWorkloadResource(*node, o.mig_strategy), stop));
      }
      LogInfo("plugin validation passed", {{"node", o.node_name}, {"devices", devices}});
      return std::string();
    }
    case Component::kMain:
    case Component::kMetrics:
      break;
  }
  return InvalidArgument("component " + ComponentName(o.component) + " has no check");
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
  return Internal("removing " + path + ": " + std::strerror(errno));
}

}  // namespace

Status RunCheck(const Options& o, kube::Client* client, std::stop_token stop) {
  const std::string file_name = ReadyFile(o.component);
  if (file_name.empty()) {
    return InvalidArgument("component " + ComponentName(o.component) + " writes no file");
  }
  const std::string dir = o.OutputDir();
  const std::string path = JoinRoot(dir, "/" + file_name);
  if (Status s = MakeDirs(dir); !s.ok()) {
    return s.Annotate("creating OUTPUT_DIR (mount the host's /run/nvidia/validations)");
  }
  // A check deletes its file when it starts: a stale file never outlives a
  // failing check.
  GPUOP_RETURN_IF_ERROR(RemoveFile(path));
  int attempt = 0;
  while (true) {
    ++attempt;
    auto content = CheckOnce(o, client, stop);
    if (content.ok()) {
      if (Status s = WriteFileAtomic(path, *content); !s.ok()) {
        return s.Annotate(ComponentName(o.component) + " validation passed but its file");
      }
      LogInfo("validation file written", {{"file", path}, {"attempts", attempt}});
      return Status::Ok();
    }
    if (stop.stop_requested()) return Aborted(content.status().message() + " (stopped)");
    if (!o.with_wait) return content.status();
    LogWarn("validation failed; retrying", {{"component", ComponentName(o.component)},
                                            {"attempt", attempt},
                                            {"retry_in_s", o.sleep_interval_seconds},
                                            {"error", content.status()}});
    if (!RealClock().SleepFor(std::chrono::seconds(o.sleep_interval_seconds), stop)) {
      return Aborted(content.status().message() + " (stopped)");
    }
  }
}

Status Cleanup(const std::string& output_dir) {
  DIR* d = ::opendir(output_dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return Status::Ok();
    return Internal("opening " + output_dir + ": " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    // `rm -f *-ready`: the shell's glob skips dot files (.driver-ctr-ready).
    if (name.empty() || name[0] == '.') continue;
    if (name.size() > 6 && name.compare(name.size() - 6, 6, "-ready") == 0) names.push_back(name);
  }
  ::closedir(d);
  Status first;
  for (const std::string& n : names) {
    Status s = RemoveFile(JoinRoot(output_dir, "/" + n));
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Status RunMain(const Options& o, std::stop_token stop) {
  LogInfo("all validations are successful; holding the node's validations",
          {{"node", o.node_name}, {"dir", o.OutputDir()}});
  WaitForStop(stop);
  LogInfo("stopping: removing the *-ready files", {{"dir", o.OutputDir()}});
  return Cleanup(o.OutputDir());
}

}  // namespace gpuop::validator
